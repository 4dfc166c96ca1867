"""The browser half of the report stepper: CSS and one inline script (no network, no libraries, no widgets).

The script reads the steps the Python half embedded (`cyber_agent/notebook/stepper.py:ReportStepper.to_html`)
and draws prev / slider / next, the step label, a trace picker and a verdict filter, with the
same rules as the Python state (`go`, `jump_to`, `filter_verdict`). It hides the static list
beside it, which is what shows wherever scripts do not run (an untrusted notebook, GitHub,
nbviewer): every step as a collapsible `<details>`, the current one open. Nothing here talks to
the kernel, so a saved notebook reopens as it was — never "model not found".
"""

from __future__ import annotations

__all__ = ["STEPPER_CSS", "STEPPER_JS"]

STEPPER_CSS = """
.ca-stepper{font-family:system-ui,sans-serif;font-size:13px}
.ca-stepper .ca-bar{display:flex;gap:6px;align-items:center;margin-bottom:4px;flex-wrap:wrap}
.ca-stepper .ca-bar input[type=range]{width:18em}
.ca-stepper .ca-bar select.ca-trace{max-width:40em}
.ca-stepper .ca-label{color:#333;min-width:12em}
.ca-stepper .ca-body{border-left:3px solid #ccc;padding:2px 8px;margin-top:4px}
.ca-stepper-static ol{padding-left:2.2em;margin:2px 0}
.ca-stepper-static li.ca-now>details>summary{background:#e8f0fe}
"""

STEPPER_JS = r"""
(function () {
  const script = document.currentScript;
  const box = script && script.closest('.ca-stepper-box');
  if (!box || box.dataset.live) return;
  box.dataset.live = '1';
  const data = JSON.parse(box.querySelector('script.ca-data').textContent);
  const items = data.items;  // [kind, trace id, verdict or null, html]
  const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls;
                                   if (text !== undefined) e.textContent = text; return e; };
  const live = el('div', 'ca-stepper');
  const bar = el('div', 'ca-bar'), bar2 = el('div', 'ca-bar');
  const prev = el('button', 'ca-prev', '\u25c0 prev'), next = el('button', 'ca-next', 'next \u25b6');
  const slider = el('input', 'ca-slider'); slider.type = 'range'; slider.min = 0; slider.step = 1;
  const label = el('span', 'ca-label cyber-agent-stepper-label');
  const trace = el('select', 'ca-trace'), verdict = el('select', 'ca-verdict');
  for (const [text, id] of data.traces) { const o = el('option', '', text); o.value = id; trace.appendChild(o); }
  for (const v of ['all', ...data.verdicts]) { const o = el('option', '', v); o.value = v; verdict.appendChild(o); }
  const body = el('div', 'ca-body cyber-agent-stepper-body');
  bar.append(prev, slider, next, label);
  bar2.append(el('span', '', 'trace'), trace, el('span', '', 'verdict'), verdict);
  live.append(bar, bar2, body);
  let visible = [], index = 0, wanted = data.verdict;
  const filter = () => { visible = items.map((_, i) => i).filter(i => wanted === 'all' || items[i][2] === wanted); };
  function render() {
    const only = wanted === 'all' ? '' : ' \u00b7 ' + wanted + ' only';
    const none = !items.length;
    slider.max = Math.max(visible.length - 1, 0); slider.value = index;
    trace.disabled = verdict.disabled = none;
    verdict.value = wanted;
    if (!visible.length) {
      label.textContent = '0 / 0' + only;
      body.innerHTML = '<i>' + (none ? data.empty : 'no steps with verdict ' + wanted) + '</i>';
      prev.disabled = next.disabled = slider.disabled = true;
      return;
    }
    const item = items[visible[index]];
    label.textContent = (index + 1) + ' / ' + visible.length + ' \u00b7 ' + item[0] + only;
    body.innerHTML = item[3];
    slider.disabled = false;
    prev.disabled = index === 0; next.disabled = index >= visible.length - 1;
    trace.value = item[1];
  }
  const go = (i) => { if (visible.length) { index = Math.min(Math.max(i, 0), visible.length - 1); render(); } };
  prev.onclick = () => go(index - 1);
  next.onclick = () => go(index + 1);
  slider.oninput = () => go(Number(slider.value));
  verdict.onchange = () => {
    const shown = visible.length ? visible[index] : -1;
    wanted = verdict.value; filter();
    const at = visible.indexOf(shown); index = at >= 0 ? at : 0; render();
  };
  trace.onchange = () => {
    const id = trace.value;
    if (!visible.some(i => items[i][1] === id)) { wanted = 'all'; filter(); }
    index = visible.findIndex(i => items[i][1] === id); render();
  };
  filter(); index = Math.min(data.index, Math.max(visible.length - 1, 0));
  box.querySelector('.ca-stepper-static').style.display = 'none';
  box.insertBefore(live, box.firstChild);
  render();
})();
"""
