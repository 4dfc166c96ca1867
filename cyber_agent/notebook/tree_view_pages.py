"""A node's page on demand, from the kernel that displayed the tree view (beyond its `page_limit`).

A `TreeView` embeds the pages of its first `page_limit` nodes only
(`cyber_agent/notebook/tree_view.py:PAGE_LIMIT`). Displayed in a Jupyter kernel with pages left
out, its HTML also carries the kernel's id and the view's key (`fetch_attrs`), the view is kept
here (`register`: the last `KEEP` views held, older ones while anything else holds them), and
`KERNEL_JS` rides along. A click on a node whose page is not embedded then opens one websocket
from the page to that kernel (`/api/kernels/<id>/channels` under the base URL of JupyterLab's
`jupyter-config-data`) and sends a silent `execute_request` with no code and one user expression,

    __import__("cyber_agent.notebook.tree_view_pages", fromlist=["page_text"]).page_text(key, trace_id)

whose `text/plain` is the page as JSON, in the embedded pages' shape (`TreeView.pages_data`):
[headline, [[section, lines], ...]], or {"error": "..."} the script shows. Where no kernel
answers (a saved notebook reopened with another kernel, GitHub, nbviewer, a `file://` export)
the page says so and names `TreeView.page(trace_id)`; `export_html` embeds every page anyway.
"""

from __future__ import annotations

import html
import json
import re
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cyber_agent.notebook.tree_view import TreeView

__all__ = ["KEEP", "KERNEL_JS", "PageJson", "fetch_attrs", "kernel_id", "page_text", "register"]

KEEP = 8
"""Views held by the registry whatever else holds them (the most recently displayed)."""

_held: OrderedDict[str, TreeView] = OrderedDict()
_known: weakref.WeakValueDictionary[str, TreeView] = weakref.WeakValueDictionary()


class PageJson(str):
    """A page as JSON text whose repr is itself (so a user expression's `text/plain` is the JSON)."""

    def __repr__(self) -> str:
        return str(self)


def register(key: str, view: TreeView) -> None:
    """Keep `view` under `key` (a live view's key keeps only its latest snapshot)."""
    _known[key] = view
    _held[key] = view
    _held.move_to_end(key)
    while len(_held) > KEEP:
        _held.popitem(last=False)


def _view(key: str) -> TreeView | None:
    return _held.get(key) or _known.get(key)


def page_text(key: str, trace_id: str) -> PageJson:
    """The page of `trace_id` in the view registered as `key`, as JSON (or {"error": ...}); never raises."""
    view = _view(key)
    if view is None:
        return _error(f"this kernel no longer holds the view (restarted, or more than {KEEP} views shown since); "
                      f"run its cell again, or TreeView.page({trace_id!r})")
    try:
        page = view.page(trace_id)
    except KeyError as error:
        return _error(str(error.args[0]) if error.args else f"no trace {trace_id!r} in this view")
    except Exception as error:  # noqa: BLE001 - a store gone or damaged: the page says so, the kernel goes on
        return _error(f"could not build the page: {type(error).__name__}: {error}")
    return PageJson(json.dumps([page.headline, [[name, list(lines)] for name, lines in page.sections]],
                               ensure_ascii=False, separators=(",", ":")))


def _error(text: str) -> PageJson:
    return PageJson(json.dumps({"error": text}, ensure_ascii=False))


_KERNEL_FILE = re.compile(r"kernel-([0-9A-Za-z-]+)\.json$")


def kernel_id() -> str | None:
    """The id of the Jupyter kernel this process is (from its connection file `kernel-<id>.json`), else None."""
    from cyber_agent.notebook.bridge import in_notebook

    if not in_notebook():
        return None
    try:
        from ipykernel import get_connection_file

        found = _KERNEL_FILE.search(get_connection_file())
    except Exception:  # noqa: BLE001 - no kernel app, or an unusual kernel: no fetching
        return None
    return found.group(1) if found else None


def fetch_attrs(view: TreeView, key: str) -> str:
    """HTML attributes (and the channel script) letting the view fetch missing pages; "" when none is missing or no kernel."""
    if len(view._pages) >= len(view):  # every page embedded (export_html, a small tree)
        return ""
    kernel = kernel_id()
    if kernel is None:
        return ""
    register(key, view)
    return f' data-kernel="{html.escape(kernel)}" data-view="{html.escape(key)}"'


KERNEL_JS = r"""
(function () {
  if (window.__caKernel && window.__caKernel.v >= 1) return;  // v: a newer channel replaces an older one
  const TIMEOUT = 30000, SLOW = 2000, sockets = {}, cache = {}, known = {};
  const NO_KERNEL = kernel => 'no kernel ' + kernel.slice(0, 8) + '… on this server (the notebook was reopened, or its kernel shut down or restarted)';
  function config() {
    const el = document.getElementById('jupyter-config-data');
    if (!el) return null;
    try { return JSON.parse(el.textContent); } catch (e) { return null; }
  }
  function uuid() { return (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2)); }
  function channel(kernel) {
    if (sockets[kernel]) return sockets[kernel];
    const c = config();
    if (!c || !/^https?:$/.test(location.protocol)) return null;
    const base = new URL(c.baseUrl || '/', location.href);
    const ws = new URL(c.wsUrl || base.href.replace(/^http/, 'ws'), location.href);
    let url = ws.href.replace(/\/?$/, '/') + 'api/kernels/' + encodeURIComponent(kernel) + '/channels?session_id=' + uuid();
    if (c.token) url += '&token=' + encodeURIComponent(c.token);
    const ch = {session: uuid(), waiting: {}, open: false, socket: null};
    try { ch.socket = new WebSocket(url); } catch (e) { return null; }
    const fail = reason => {
      if (sockets[kernel] === ch) delete sockets[kernel];
      for (const id of Object.keys(ch.waiting)) { const w = ch.waiting[id]; delete ch.waiting[id]; w(null, reason); }
    };
    ch.socket.onopen = () => { ch.open = true; };
    ch.socket.onerror = () => {};
    ch.socket.onclose = () => fail(ch.open ? 'the kernel closed the connection (shut down or restarted)' : NO_KERNEL(kernel));
    ch.socket.onmessage = e => {
      let msg; try { msg = JSON.parse(e.data); } catch (err) { return; }
      const type = msg && msg.header && msg.header.msg_type;
      if (type === 'shutdown_reply' || (type === 'status' && msg.content && msg.content.execution_state === 'dead')) {
        fail('the kernel shut down'); try { ch.socket.close(); } catch (err) { /* closed already */ } return;
      }
      const parent = msg && msg.parent_header && msg.parent_header.msg_id;
      if (!parent || !ch.waiting[parent] || !msg.header || msg.header.msg_type !== 'execute_reply') return;
      const w = ch.waiting[parent]; delete ch.waiting[parent]; w(msg.content, null);
    };
    ch.send = msg => { if (ch.open) ch.socket.send(msg); else ch.socket.addEventListener('open', () => ch.socket.send(msg)); };
    sockets[kernel] = ch;
    return ch;
  }
  // The server's word on the kernel first: a websocket to a kernel shut down may stay open and never answer.
  function alive(kernel) {
    const c = config();
    if (!c || !/^https?:$/.test(location.protocol)) return Promise.resolve('no Jupyter server to ask here (a shared file, GitHub or nbviewer, or a page without JupyterLab)');
    const url = new URL(c.baseUrl || '/', location.href).href.replace(/\/?$/, '/') + 'api/kernels/' + encodeURIComponent(kernel);
    return fetch(url, {headers: c.token ? {Authorization: 'token ' + c.token} : {}, credentials: 'same-origin', cache: 'no-store'})
      .then(r => r.ok ? null : r.status === 404 ? NO_KERNEL(kernel) : 'the server answered ' + r.status + ' for the kernel')
      .catch(() => 'the Jupyter server does not answer');
  }
  function ask(kernel, view, traceId) {
    return alive(kernel).then(dead => dead ? {error: dead} : send(kernel, view, traceId));
  }
  function send(kernel, view, traceId) {
    return new Promise(resolve => {
      let ch;
      try { ch = channel(kernel); } catch (e) { ch = null; }
      if (!ch) { resolve({error: 'no Jupyter kernel to ask here (a shared file, GitHub or nbviewer, or a page without JupyterLab)'}); return; }
      const id = uuid();
      const expr = '__import__("cyber_agent.notebook.tree_view_pages", fromlist=["page_text"]).page_text(' +
        JSON.stringify(view) + ', ' + JSON.stringify(traceId) + ')';
      const timer = window.setTimeout(() => { if (ch.waiting[id]) { delete ch.waiting[id]; resolve({error: 'no answer from the kernel within ' + (TIMEOUT / 1000) + ' s (a cell still running?); click the node again'}); } }, TIMEOUT);
      ch.waiting[id] = (content, reason) => {
        window.clearTimeout(timer);
        if (!content) { resolve({error: reason || 'no answer'}); return; }
        const out = content.user_expressions && content.user_expressions.page;
        if (!out) { resolve({error: 'the kernel did not evaluate the request (' + (content.status || 'no status') + ')'}); return; }
        if (out.status !== 'ok') { resolve({error: 'the kernel could not build the page: ' + (out.ename || '') + ': ' + (out.evalue || '') + ' (is cyber_agent importable in this kernel?)'}); return; }
        try { resolve(JSON.parse((out.data || {})['text/plain'])); } catch (e) { resolve({error: 'the kernel sent an unreadable page'}); }
      };
      const header = {msg_id: id, msg_type: 'execute_request', session: ch.session, username: 'cyber_agent-tree-view',
                      date: new Date().toISOString(), version: '5.3'};
      ch.send(JSON.stringify({header: header, parent_header: {}, metadata: {}, channel: 'shell', buffers: [],
        content: {code: '', silent: true, store_history: false, user_expressions: {page: expr}, allow_stdin: false, stop_on_error: false}}));
    });
  }
  // page(kernel, view, box, traceId, onSlow): a Promise of [headline, sections] or {error}; never rejects.
  // Answers are cached by box (a hash of the view's data: a live view's next snapshot asks again);
  // known(kernel, view, traceId): the latest page of the trace in any snapshot of the view, or null.
  window.__caKernel = {v: 1, page: function (kernel, view, box, traceId, onSlow) {
    const k = kernel + '|' + view + '|' + box + '|' + traceId;
    if (cache[k]) return cache[k];
    const slow = window.setTimeout(() => { try { if (onSlow) onSlow(); } catch (e) { /* the view is gone */ } }, SLOW);
    const p = ask(kernel, view, traceId).catch(e => ({error: String(e)})).then(page => {
      window.clearTimeout(slow);
      if (Array.isArray(page)) known[kernel + '|' + view + '|' + traceId] = page; else delete cache[k];
      return page || {error: 'no answer'};
    });
    cache[k] = p;
    return p;
  }, known: (kernel, view, traceId) => known[kernel + '|' + view + '|' + traceId] || null};
})();
"""
"""The page's half of the channel: `window.__caKernel.page(...)`, one websocket per kernel, answers cached."""
