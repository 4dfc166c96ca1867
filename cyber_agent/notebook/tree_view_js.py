"""The browser half of the tree view: CSS and one inline script (no network, no libraries).

The script reads the column-wise JSON the Python half embedded
(`cyber_agent/notebook/tree_view.py:TreeView.data`): `ids` (a sub-trace id as the tail after its
parent's id, `@…`), `parent` (node indices, -1 for a root), `path`, `role` / `status` (codes
into `roles` / `statuses`), `verdict` (0 none, 1 pass, 2 fail, 3 unknown), `title`, own `cost`,
`tokens`, `calls`; `badges`, `hl` (highlight kind), `pairs` (a compared node's counterpart) and
`running` ([tool, started epoch s]) by node index; `focus`, `legend`. It derives children, depths
and subtree totals itself, flattens only the expanded levels and keeps only the rows on screen
in the DOM (a fixed row height, rows rebuilt on scroll). Pages (second JSON block) are parsed on
the first click; a page left out is asked of the kernel when the box has `data-kernel`
(`cyber_agent/notebook/tree_view_pages.py:KERNEL_JS`), else a note says how to get it. It handles expand / collapse, search (exact path or id first, then text; next
/ previous), a node's page with breadcrumbs, highlights and badges.

Live: a box with `data-key` keeps what is expanded / selected / searched / scrolled, and whether
the find box had the focus and its caret, in `window.__caTreeState[key]`, so a re-render (a
live view's next snapshot, `cyber_agent/notebook/tree_view_live.py`, arrives as a new output
bundle by display id) carries on where the user was; while traces run, the rows are repainted
every 0.5 s so their elapsed times move.
Events: a click dispatches `ca-selected` ({id, pair}) from the box; a `ca-select` event ({id})
on the box selects that trace (a comparison links its two views with them).
"""

from __future__ import annotations

__all__ = ["TREE_CSS", "TREE_JS"]

TREE_CSS = """
.ca-tree{font-family:system-ui,sans-serif;font-size:13px;display:flex;gap:12px;align-items:flex-start}
.ca-tree .ca-left{width:46em;max-width:58%}
.ca-tree .ca-bar{display:flex;gap:4px;margin-bottom:4px}
.ca-tree .ca-bar input{flex:1}
.ca-tree .ca-rows{height:440px;overflow-y:auto;position:relative;border:1px solid #ccc;font-family:monospace}
.ca-tree .ca-row{position:absolute;left:0;right:0;height:20px;line-height:20px;white-space:nowrap;cursor:pointer;padding-left:4px}
.ca-tree .ca-row:hover{background:#eef}
.ca-tree .ca-row.ca-sel{outline:2px solid #1565c0;outline-offset:-2px}
.ca-tree .ca-tog{display:inline-block;width:1.2em}
.ca-tree .ca-num{color:#666;font-size:11px}
.ca-tree .ca-badge{background:#fde68a;border-radius:3px;padding:0 3px;margin-left:4px;font-size:11px}
.ca-tree .ca-run{background:#dbeafe;color:#1565c0;border-radius:3px;padding:0 3px;margin-left:4px;font-size:11px}
.ca-tree .st-failed{color:#c62828}.ca-tree .st-stopped{color:#d97706}.ca-tree .st-running{color:#1565c0;font-weight:bold}
.ca-tree .v-pass{color:#2ca02c}.ca-tree .v-fail{color:#d62728}.ca-tree .v-unknown{color:#b8860b}
.ca-tree .hl-fail{background:#fecaca}.ca-tree .hl-path{background:#fef3c7}
.ca-tree .hl-deleted{background:#fecaca;text-decoration:line-through}.ca-tree .hl-inserted{background:#bbf7d0}
.ca-tree .hl-relabelled{background:#fed7aa}.ca-tree .hl-changed{background:#e9d5ff}
.ca-tree .ca-legend span{display:inline-block;padding:0 4px;margin-right:6px;border-radius:3px;font-size:11px}
.ca-tree .ca-page{flex:1;min-width:20em}
.ca-tree .ca-crumbs a{cursor:pointer;color:#1565c0}
.ca-tree .ca-page h4{margin:8px 0 2px 0}
.ca-tree .ca-page ul{margin:0;padding-left:1.2em}
.ca-tree .ca-msgs li{font-family:monospace;font-size:12px;white-space:pre-wrap}
.ca-tree .ca-status{color:#555;font-size:12px;margin-top:2px}
"""

TREE_JS = r"""
(function () {
  const script = document.currentScript;
  const root = (script && script.closest('.ca-tree-box')) || document.getElementById(script ? script.dataset.box : '');
  if (!root || root.dataset.live) return;
  root.dataset.live = '1';
  const H = 20, key = root.dataset.key || null;
  const states = window.__caTreeState = window.__caTreeState || {};
  const state = key ? (states[key] = states[key] || {}) : {};
  const esc = s => String(s).replace(/[&<>"]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]));
  const money = v => '$' + Number(v).toFixed(4);
  const fmt = v => Number(v).toLocaleString('en-US');
  const VERDICTS = ['', 'pass', 'fail', 'unknown'];
  let D, N, ids, kids, depth, sub, byId, pagesText, pages = null, roots;
  let open = new Set(), visible = [], selected = 0, matches = [], at = -1;
  function load(data, pagesJson) {
    D = data; N = D.parent.length; pagesText = pagesJson; pages = null;
    ids = new Array(N); kids = new Array(N); depth = new Int32Array(N); roots = [];
    sub = [new Float64Array(N), new Float64Array(N), new Float64Array(N), new Int32Array(N)];
    for (let i = 0; i < N; i++) {
      const p = D.parent[i], raw = D.ids[i];
      ids[i] = (p >= 0 && raw.charAt(0) === '@') ? ids[p] + raw : raw;
      kids[i] = [];
      if (p >= 0) { kids[p].push(i); depth[i] = depth[p] + 1; } else roots.push(i);
      sub[0][i] = D.cost[i]; sub[1][i] = D.tokens[i]; sub[2][i] = D.calls[i]; sub[3][i] = 1;
    }
    for (let i = N - 1; i >= 0; i--) { const p = D.parent[i]; if (p >= 0) for (let k = 0; k < 4; k++) sub[k][p] += sub[k][i]; }
    byId = new Map(); for (let i = 0; i < N; i++) byId.set(ids[i], i);
  }
  function getPages() { if (pages === null) { try { pages = JSON.parse(pagesText || '{}'); } catch (e) { pages = {}; } } return pages; }
  const staticPart = root.querySelector('.ca-static');
  load(JSON.parse(root.querySelector('script.ca-data').textContent),
       (root.querySelector('script.ca-pages') || {textContent: '{}'}).textContent);
  if (staticPart) staticPart.style.display = 'none';
  const box = document.createElement('div');
  box.className = 'ca-tree mathjax_ignore';  // a row's two "$" (costs) are not TeX to JupyterLab's MathJax
  box.innerHTML = '<div class="ca-left"><div class="ca-bar"><input class="ca-find" placeholder="find: exact path, then text (Enter)">' +
    '<button class="ca-prev" title="previous match">◀</button><button class="ca-next" title="next match">▶</button>' +
    '<button class="ca-expand">expand all</button><button class="ca-collapse">collapse</button></div>' +
    '<div class="ca-legend"></div><div class="ca-rows"><div class="ca-space"></div></div><div class="ca-status"></div></div><div class="ca-page"></div>';
  root.appendChild(box);
  const rows = box.querySelector('.ca-rows'), space = box.querySelector('.ca-space');
  const status = box.querySelector('.ca-status'), page = box.querySelector('.ca-page'), legend = box.querySelector('.ca-legend');
  const input = box.querySelector('.ca-find');
  function ancestors(i) { const out = []; let p = D.parent[i]; while (p >= 0) { out.unshift(p); p = D.parent[p]; } return out; }
  function remember() {
    if (!key) return;
    state.open = Array.from(open, i => ids[i]); state.selected = ids[selected]; state.scroll = rows.scrollTop;
    state.find = input.value; state.last = input.dataset.last || ''; state.at = at;
  }
  function rememberFocus() {
    if (!key) return;
    state.focus = document.activeElement === input;
    if (state.focus) { state.caret = [input.selectionStart, input.selectionEnd]; state.find = input.value; }
  }
  function restore() {
    open = new Set(roots);
    if (key && state.open) for (const id of state.open) { const i = byId.get(id); if (i !== undefined) open.add(i); }
    selected = roots.length ? roots[0] : 0;
    if (D.focus !== null && D.focus !== undefined && !(key && state.selected)) { selected = D.focus; for (const a of ancestors(selected)) open.add(a); }
    if (key && state.selected && byId.has(state.selected)) selected = byId.get(state.selected);
    if (key && state.find) { input.value = state.find; input.dataset.last = state.last; }
  }
  function restoreFocus() {
    if (!(key && state.focus)) return;
    input.focus({preventScroll: true});
    if (state.caret) { try { input.setSelectionRange(state.caret[0], state.caret[1]); } catch (e) { /* not a text input */ } }
  }
  function flatten() {
    visible = [];
    const stack = roots.slice().reverse();
    while (stack.length) {
      const i = stack.pop();
      visible.push(i);
      if (open.has(i)) for (let k = kids[i].length - 1; k >= 0; k--) stack.push(kids[i][k]);
    }
    space.style.height = (visible.length * H) + 'px';
  }
  function elapsed(started) {
    const s = Math.max(0, Date.now() / 1000 - started);
    return s < 60 ? s.toFixed(0) + ' s' : Math.floor(s / 60) + ' min ' + (Math.floor(s) % 60) + ' s';
  }
  function rowHtml(i) {
    const st = D.statuses[D.status[i]], role = D.roles[D.role[i]], v = VERDICTS[D.verdict[i]];
    const tog = kids[i].length ? (open.has(i) ? '▾' : '▸') : '·';
    const verdict = v ? ' <span class="v-' + v + '">' + esc(D.marks[v] || v) + '</span>' : '';
    const badges = (D.badges[i] || []).map(b => '<span class="ca-badge">' + esc(b) + '</span>').join('');
    const run = D.running[i];
    const live = run ? '<span class="ca-run">running' + (run[0] ? ': ' + esc(run[0]) : '') + ' · ' + elapsed(run[1]) + '</span>' : '';
    const subtree = kids[i].length ? ' · subtree ' + fmt(sub[3][i]) + ' traces, ' + money(sub[0][i]) + ', ' + fmt(sub[1][i]) + ' tok, ' + fmt(sub[2][i]) + ' calls' : '';
    const hl = D.hl[i] ? ' hl-' + D.hl[i] : '';
    return '<span style="padding-left:' + (depth[i] * 14) + 'px"></span><span class="ca-tog">' + tog + '</span>' +
      '<span class="ca-name st-' + esc(st) + hl + '">' + esc(D.path[i]) + ' ' + esc(role) + '</span>' + verdict +
      (D.title[i] ? ' · ' + esc(D.title[i]) : '') + (st !== 'completed' ? ' <span class="st-' + esc(st) + '">[' + esc(st) + ']</span>' : '') +
      live + badges + ' <span class="ca-num">own ' + money(D.cost[i]) + ', ' + fmt(D.tokens[i]) + ' tok, ' + fmt(D.calls[i]) + ' calls' + subtree + '</span>';
  }
  function paint() {
    const first = Math.max(0, Math.floor(rows.scrollTop / H) - 5);
    const last = Math.min(visible.length, first + Math.ceil((rows.clientHeight || 440) / H) + 10);
    rows.querySelectorAll('.ca-row').forEach(r => r.remove());
    const frag = document.createDocumentFragment();
    for (let v = first; v < last; v++) {
      const i = visible[v], div = document.createElement('div');
      div.className = 'ca-row' + (i === selected ? ' ca-sel' : '') + (D.hl[i] ? ' hl-' + D.hl[i] : '');
      div.style.top = (v * H) + 'px';
      div.dataset.i = i;
      div.innerHTML = rowHtml(i);
      frag.appendChild(div);
    }
    rows.appendChild(frag);
    const running = Object.keys(D.running).length;
    status.textContent = visible.length + ' of ' + N + ' traces shown · ' + (N ? D.path[selected] : '') + ' selected' +
      (running ? ' · ' + running + ' running' : '') + (matches.length ? ' · match ' + (at + 1) + ' of ' + matches.length : '');
    remember();
  }
  function showPage(i) {
    if (!N) return;
    const ask = !getPages()[i] && root.dataset.kernel && window.__caKernel && window.__caKernel.v >= 1;  // left out: ask the kernel
    const p = getPages()[i] || (ask ? window.__caKernel.known(root.dataset.kernel, root.dataset.view, ids[i]) : null);
    const crumbs = ancestors(i).map(a => '<a data-i="' + a + '">' + esc(D.path[a]) + '</a>').join(' › ');
    let out = '<div class="ca-crumbs">' + (crumbs ? crumbs + ' › ' : '') + '<b>' + esc(D.path[i]) + '</b></div>';
    out += '<h3 class="ca-headline">' + esc(p ? p[0] : D.path[i] + ' ' + D.roles[D.role[i]]) + '</h3><div class="ca-num">' + esc(ids[i]) + '</div>';
    if (D.pairs[i]) out += '<div class="ca-num">counterpart: ' + esc(D.pairs[i]) + '</div>';
    if (D.running[i]) out += '<div class="ca-run">running' + (D.running[i][0] ? ': ' + esc(D.running[i][0]) : '') + ' · ' + elapsed(D.running[i][1]) + '</div>';
    if ((D.badges[i] || []).length) out += '<div>' + D.badges[i].map(b => '<span class="ca-badge">' + esc(b) + '</span>').join('') + '</div>';
    if (p) for (const [name, lines] of p[1]) out += '<h4>' + esc(name) + '</h4><ul class="ca-sec-' + esc(name) + (name === 'messages' ? ' ca-msgs' : '') + '">' + lines.map(l => '<li>' + esc(l) + '</li>').join('') + '</ul>';
    else if (ask) out += '<p class="ca-loading">loading page from the kernel…</p>';
    else out += noPage(i, '');
    page.innerHTML = out;
    if (ask) fetchPage(i);  // a live view's redraw shows the page known so far meanwhile
  }
  function noPage(i, why) {
    return '<p class="ca-nopage">(no page kept for this trace: the tree is larger than the page limit' + (why ? '; ' + esc(why) : '') +
      '; TreeView.page(' + esc(JSON.stringify(ids[i])) + ') or export_html shows it)</p>';
  }
  function fetchPage(i) {  // a page left out, from the kernel that displayed the view (tree_view_pages.py)
    const wanted = ids[i], loading = () => page.querySelector('.ca-loading');
    const mine = () => root.isConnected && selected === i && ids[i] === wanted;
    window.__caKernel.page(root.dataset.kernel, root.dataset.view, root.id, wanted, () => {
      if (mine() && loading()) loading().textContent = 'still loading the page: a kernel busy with a running cell answers once it ends…';
    }).then(got => {
      if (Array.isArray(got)) getPages()[i] = got;
      if (!mine()) return;
      if (Array.isArray(got)) showPage(i); else if (loading()) loading().outerHTML = noPage(i, (got && got.error) || 'no answer');
    }).catch(() => {});
  }
  function select(i, scroll, quiet) {
    selected = i;
    for (const a of ancestors(i)) open.add(a);
    flatten();
    if (scroll) { const v = visible.indexOf(i); if (v >= 0 && (v * H < rows.scrollTop || v * H > rows.scrollTop + rows.clientHeight - H)) rows.scrollTop = Math.max(0, v * H - 100); }
    paint(); showPage(i);
    if (!quiet) root.dispatchEvent(new CustomEvent('ca-selected', {bubbles: true, detail: {id: ids[i], pair: D.pairs[i] || null}}));
  }
  function find(text, keep) {
    const needle = text.trim().toLowerCase();
    if (!needle) { matches = []; at = -1; paint(); return; }
    const exact = [], partial = [];
    for (let i = 0; i < N; i++) {
      if (D.path[i].toLowerCase() === needle || ids[i].toLowerCase() === needle) { exact.push(i); continue; }
      const hay = D.path[i] + ' ' + D.roles[D.role[i]] + ' ' + D.title[i] + ' ' + D.statuses[D.status[i]] + ' ' +
        VERDICTS[D.verdict[i]] + ' ' + ids[i] + ' ' + (D.badges[i] || []).join(' ') + ' ' + (D.hl[i] || '');
      if (hay.toLowerCase().includes(needle)) partial.push(i);
    }
    matches = exact.concat(partial);
    if (keep === undefined) at = matches.length ? 0 : -1; else at = Math.min(keep, matches.length - 1);
    if (at >= 0) select(matches[at], true); else { paint(); status.textContent = 'nothing matches ' + JSON.stringify(text); }
  }
  function step(d) { if (!matches.length) return; at = (at + d + matches.length) % matches.length; select(matches[at], true); }
  function drawLegend() {
    legend.innerHTML = (D.legend || []).map(([k, words, n]) => '<span class="hl-' + esc(k) + '">' + esc(words) + ': ' + esc(n) + '</span>').join('');
  }
  rows.addEventListener('scroll', () => window.requestAnimationFrame(paint));
  rows.addEventListener('click', e => {
    const row = e.target.closest('.ca-row'); if (!row) return;
    const i = Number(row.dataset.i);
    if (e.target.classList.contains('ca-tog') && kids[i].length) { open.has(i) ? open.delete(i) : open.add(i); flatten(); paint(); return; }
    select(i, false);
  });
  page.addEventListener('click', e => { const a = e.target.closest('a[data-i]'); if (a) select(Number(a.dataset.i), true); });
  root.addEventListener('ca-select', e => { const i = byId.get(e.detail && e.detail.id); if (i !== undefined) select(i, true, true); });
  input.addEventListener('focus', rememberFocus);
  // A redraw removes the focused box (Chromium then sends blur): only a blur that leaves the box in the page is the user's.
  input.addEventListener('blur', () => window.setTimeout(() => { if (root.isConnected) state.focus = false; }, 0));
  input.addEventListener('input', rememberFocus);
  input.addEventListener('keyup', rememberFocus);
  input.addEventListener('keydown', e => { if (e.key === 'Enter') { if (matches.length && input.dataset.last === input.value) step(e.shiftKey ? -1 : 1); else { input.dataset.last = input.value; find(input.value); } } });
  box.querySelector('.ca-next').addEventListener('click', () => { if (input.dataset.last !== input.value) { input.dataset.last = input.value; find(input.value); } else step(1); });
  box.querySelector('.ca-prev').addEventListener('click', () => { if (input.dataset.last !== input.value) { input.dataset.last = input.value; find(input.value); } else step(-1); });
  box.querySelector('.ca-expand').addEventListener('click', () => { const stack = [selected]; while (stack.length) { const i = stack.pop(); if (kids[i].length) { open.add(i); stack.push(...kids[i]); } } flatten(); paint(); });
  box.querySelector('.ca-collapse').addEventListener('click', () => { open = new Set(roots); select(roots[0], true); });
  function start(scroll) {
    restore(); drawLegend(); flatten();
    if (key && state.scroll) rows.scrollTop = state.scroll;
    if (key && state.last && input.value === state.last) { const keep = state.at; find(input.value, keep); if (!matches.length) { paint(); showPage(selected); } }
    else if (N) { select(selected, scroll, true); }
  }
  start(true);
  (window.__caTreePaint = window.__caTreePaint || []).push(performance.now());  // bench/tree_view.py reads it
  restoreFocus();
  if (Object.keys(D.running).length) {
    const timer = window.setInterval(() => { if (!root.isConnected) window.clearInterval(timer); else paint(); }, 500);
  }
})();
"""
