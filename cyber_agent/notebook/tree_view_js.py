"""The browser half of the tree view: CSS and one inline script (no network, no libraries).

The script reads the JSON the Python half embedded (`cyber_agent/notebook/tree_view.py:TreeView`),
keeps only the rows on screen in the DOM (a fixed row height, rows rebuilt on scroll), and
handles expand / collapse, search (exact path first, then text; next / previous), a node's
page with breadcrumbs, and the marks (badges) each node carries. Without the script (an
untrusted notebook, GitHub) the static outline beside it is what shows.
"""

from __future__ import annotations

__all__ = ["TREE_CSS", "TREE_JS"]

TREE_CSS = """
.ca-tree{font-family:system-ui,sans-serif;font-size:13px;display:flex;gap:12px;align-items:flex-start}
.ca-tree .ca-left{width:46em;max-width:55%}
.ca-tree .ca-bar{display:flex;gap:4px;margin-bottom:4px}
.ca-tree .ca-bar input{flex:1}
.ca-tree .ca-rows{height:440px;overflow-y:auto;position:relative;border:1px solid #ccc;font-family:monospace}
.ca-tree .ca-row{position:absolute;left:0;right:0;height:20px;line-height:20px;white-space:nowrap;cursor:pointer;padding-left:4px}
.ca-tree .ca-row:hover{background:#eef}
.ca-tree .ca-row.ca-sel{background:#cde}
.ca-tree .ca-tog{display:inline-block;width:1.2em}
.ca-tree .ca-num{color:#666;font-size:11px}
.ca-tree .ca-badge{background:#fde68a;border-radius:3px;padding:0 3px;margin-left:4px;font-size:11px}
.ca-tree .st-failed{color:#c62828}.ca-tree .st-stopped{color:#d97706}.ca-tree .st-running{color:#1565c0}
.ca-tree .v-pass{color:#2ca02c}.ca-tree .v-fail{color:#d62728}.ca-tree .v-unknown{color:#b8860b}
.ca-tree .ca-page{flex:1;min-width:20em}
.ca-tree .ca-crumbs a{cursor:pointer;color:#1565c0}
.ca-tree .ca-page h4{margin:8px 0 2px 0}
.ca-tree .ca-page ul{margin:0;padding-left:1.2em}
.ca-tree .ca-status{color:#555;font-size:12px;margin-top:2px}
"""

TREE_JS = r"""
(function () {
  const script = document.currentScript;
  const root = (script && script.closest('.ca-tree-box')) || document.getElementById(script ? script.dataset.box : '');
  if (!root || root.dataset.live) return;
  root.dataset.live = '1';
  const data = JSON.parse(root.querySelector('script.ca-data').textContent);
  const N = data.nodes, H = 20;
  const byId = new Map(N.map((n, i) => [n.id, i]));
  const kids = N.map(() => []);
  N.forEach((n, i) => { if (n.parent !== null && n.parent !== undefined) kids[n.parent].push(i); });
  const open = new Set(data.roots);
  let visible = [], selected = data.roots[0], matches = [], at = -1;
  const esc = s => String(s).replace(/[&<>"]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]));
  const money = v => '$' + Number(v).toFixed(4);
  const fmt = v => Number(v).toLocaleString('en-US');
  root.querySelector('.ca-static').style.display = 'none';
  const box = document.createElement('div');
  box.className = 'ca-tree';
  box.innerHTML = '<div class="ca-left"><div class="ca-bar"><input class="ca-find" placeholder="find: exact path, then text (Enter)">' +
    '<button class="ca-prev" title="previous match">◀</button><button class="ca-next" title="next match">▶</button>' +
    '<button class="ca-expand">expand all</button><button class="ca-collapse">collapse</button></div>' +
    '<div class="ca-rows"><div class="ca-space"></div></div><div class="ca-status"></div></div><div class="ca-page"></div>';
  root.appendChild(box);
  const rows = box.querySelector('.ca-rows'), space = box.querySelector('.ca-space');
  const status = box.querySelector('.ca-status'), page = box.querySelector('.ca-page');
  function flatten() {
    visible = [];
    const stack = data.roots.slice().reverse();
    while (stack.length) {
      const i = stack.pop();
      visible.push(i);
      if (open.has(i)) for (let k = kids[i].length - 1; k >= 0; k--) stack.push(kids[i][k]);
    }
    space.style.height = (visible.length * H) + 'px';
  }
  function rowHtml(i) {
    const n = N[i];
    const tog = kids[i].length ? (open.has(i) ? '▾' : '▸') : '·';
    const verdict = n.verdict ? ' <span class="v-' + n.verdict + '">' + esc(data.marks[n.verdict] || n.verdict) + '</span>' : '';
    const badges = (n.badges || []).map(b => '<span class="ca-badge">' + esc(b) + '</span>').join('');
    const sub = kids[i].length ? ' · subtree ' + fmt(n.sub[3]) + ' traces, ' + money(n.sub[0]) + ', ' + fmt(n.sub[1]) + ' tok, ' + fmt(n.sub[2]) + ' calls' : '';
    return '<span style="padding-left:' + (n.depth * 14) + 'px"></span><span class="ca-tog">' + tog + '</span>' +
      '<span class="st-' + esc(n.status) + '">' + esc(n.path) + ' ' + esc(n.role) + '</span>' + verdict +
      (n.title ? ' · ' + esc(n.title) : '') + (n.status !== 'completed' ? ' <span class="st-' + esc(n.status) + '">[' + esc(n.status) + ']</span>' : '') +
      badges + ' <span class="ca-num">own ' + money(n.own[0]) + ', ' + fmt(n.own[1]) + ' tok, ' + fmt(n.own[2]) + ' calls' + sub + '</span>';
  }
  function paint() {
    const first = Math.max(0, Math.floor(rows.scrollTop / H) - 5);
    const last = Math.min(visible.length, first + Math.ceil((rows.clientHeight || 440) / H) + 10);
    rows.querySelectorAll('.ca-row').forEach(r => r.remove());
    const frag = document.createDocumentFragment();
    for (let v = first; v < last; v++) {
      const i = visible[v], div = document.createElement('div');
      div.className = 'ca-row' + (i === selected ? ' ca-sel' : '');
      div.style.top = (v * H) + 'px';
      div.dataset.i = i;
      div.innerHTML = rowHtml(i);
      frag.appendChild(div);
    }
    rows.appendChild(frag);
    status.textContent = visible.length + ' of ' + N.length + ' traces shown · ' + N[selected].path + ' selected' +
      (matches.length ? ' · match ' + (at + 1) + ' of ' + matches.length : '');
  }
  function ancestors(i) { const out = []; let p = N[i].parent; while (p !== null && p !== undefined) { out.unshift(p); p = N[p].parent; } return out; }
  function showPage(i) {
    const n = N[i], p = data.pages[i];
    const crumbs = ancestors(i).map(a => '<a data-i="' + a + '">' + esc(N[a].path) + '</a>').join(' › ');
    let html = '<div class="ca-crumbs">' + (crumbs ? crumbs + ' › ' : '') + '<b>' + esc(n.path) + '</b></div>';
    html += '<h3 class="ca-headline">' + esc(p ? p[0] : n.path) + '</h3><div class="ca-num">' + esc(n.id) + '</div>';
    if (p) for (const [name, lines] of p[1]) html += '<h4>' + esc(name) + '</h4><ul>' + lines.map(l => '<li>' + esc(l) + '</li>').join('') + '</ul>';
    else html += '<p>(no page kept for this trace: the tree is larger than the page limit; see TreeView.page(trace_id))</p>';
    page.innerHTML = html;
  }
  function select(i, scroll) {
    selected = i;
    for (const a of ancestors(i)) open.add(a);
    flatten();
    if (scroll) { const v = visible.indexOf(i); if (v >= 0 && (v * H < rows.scrollTop || v * H > rows.scrollTop + rows.clientHeight - H)) rows.scrollTop = Math.max(0, v * H - 100); }
    paint(); showPage(i);
  }
  function find(text) {
    const needle = text.trim().toLowerCase();
    if (!needle) { matches = []; at = -1; paint(); return; }
    const exact = [], partial = [];
    N.forEach((n, i) => {
      if (n.path.toLowerCase() === needle || n.id.toLowerCase() === needle) exact.push(i);
      else if ((n.path + ' ' + n.role + ' ' + n.title + ' ' + n.status + ' ' + (n.verdict || '') + ' ' + n.id + ' ' + (n.badges || []).join(' ')).toLowerCase().includes(needle)) partial.push(i);
    });
    matches = exact.concat(partial); at = matches.length ? 0 : -1;
    if (at >= 0) select(matches[0], true); else { status.textContent = 'nothing matches ' + JSON.stringify(text); }
  }
  function step(d) { if (!matches.length) return; at = (at + d + matches.length) % matches.length; select(matches[at], true); }
  rows.addEventListener('scroll', () => window.requestAnimationFrame(paint));
  rows.addEventListener('click', e => {
    const row = e.target.closest('.ca-row'); if (!row) return;
    const i = Number(row.dataset.i);
    if (e.target.classList.contains('ca-tog') && kids[i].length) { open.has(i) ? open.delete(i) : open.add(i); flatten(); paint(); return; }
    select(i, false);
  });
  page.addEventListener('click', e => { const a = e.target.closest('a[data-i]'); if (a) select(Number(a.dataset.i), true); });
  const input = box.querySelector('.ca-find');
  input.addEventListener('keydown', e => { if (e.key === 'Enter') { if (matches.length && input.dataset.last === input.value) step(e.shiftKey ? -1 : 1); else { input.dataset.last = input.value; find(input.value); } } });
  box.querySelector('.ca-next').addEventListener('click', () => { if (input.dataset.last !== input.value) { input.dataset.last = input.value; find(input.value); } else step(1); });
  box.querySelector('.ca-prev').addEventListener('click', () => step(-1));
  box.querySelector('.ca-expand').addEventListener('click', () => { const stack = [selected]; while (stack.length) { const i = stack.pop(); if (kids[i].length) { open.add(i); stack.push(...kids[i]); } } flatten(); paint(); });
  box.querySelector('.ca-collapse').addEventListener('click', () => { open.clear(); data.roots.forEach(r => open.add(r)); select(data.roots[0], true); });
  flatten(); paint(); showPage(selected);
})();
"""
