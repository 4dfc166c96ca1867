"""Real browser (JupyterLab + headless Chromium): a click on a node beyond the page limit fetches its page from the kernel.

A notebook cell displays `TreeView(store, root, page_limit=20)` of a 60-trace sample tree (so 40
pages are left out of the HTML). Searching a node whose page is not embedded and selecting it
shows its headline and sections (brief, usage, ...) as the kernel builds them
(`cyber_agent/notebook/tree_view_pages.py`: the output's script asks the kernel over its own
websocket). While a cell keeps the kernel busy, the page says the answer comes when it ends,
and it does. With the kernel shut down, a click on another left-out node shows the note naming
`TreeView.page(...)`, and no script error reaches the page. A second notebook shows
`live_tree(h, page_limit=1)` of a demo launch: a click on a left-out node shows the page the
kernel builds while the run goes on (the view is drawn again every 0.5 s), and again in the
final view once the run ended. Each test opens its notebook in a workspace of its own (a
restored tab of the other notebook would put its cells in the page too).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from browser_lab import CELL_DONE, NOTEBOOK_READY, RUN_CELL, Lab, browser, lab_server, log_tail, notebook_root, run_cell
from nb_helpers import REPO

from cyber_agent.notebook.sample_tree import write_sample_tree
from cyber_agent.notebook.tree_view import TreeView

pytestmark = pytest.mark.timeout(300)

NOTEBOOK = "tree_pages.ipynb"
LIMIT = 20
HEADLINE_IS = """(text) => {
  const h = window.jupyterapp.shell.currentWidget.content.widgets[0].outputArea.node.querySelector('.ca-page .ca-headline');
  return !!h && h.textContent === text;
}"""
BUSY = """(index) => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel.sessionContext.session.kernel.status === 'busy'
    && panel.content.widgets[index].node.querySelector('.jp-InputPrompt').textContent.includes('*');
}"""
SAYS_BUSY = """() => {
  const l = window.jupyterapp.shell.currentWidget.content.widgets[0].outputArea.node.querySelector('.ca-page .ca-loading');
  return !!l && l.textContent.includes('busy with a running cell');
}"""
LIVE = "live_pages.ipynb"
LIVE_CELLS = [
    f"from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK\nfrom cyber_agent.notebook import launch\n"
    f"from cyber_agent.notebook.tree_view_live import live_tree\nREPO = {str(REPO)!r}",
    "h = await launch(DEMO_TASK, mode='recursive', model='demo:latency=0.5', workspace=REPO, root_task_anchor=DEMO_ANCHOR,\n"
    "                 progress=False)\nlive_tree(h, interval=0.5, page_limit=1)",
    "r = await h.result()\nprint('status:', r.status)",
]
# In cell `index`'s tree view: the data-i and path of a shown row whose page is not embedded (null if none yet).
LEFT_OUT_ROW = """(index) => {
  const out = window.jupyterapp.shell.currentWidget.content.widgets[index].outputArea.node;
  const box = out.querySelector('.ca-tree-box');
  if (!box || !box.dataset.kernel) return null;
  const pages = JSON.parse(box.querySelector('script.ca-pages').textContent);
  const row = Array.from(box.querySelectorAll('.ca-row')).reverse().find(r => !(r.dataset.i in pages));
  return row ? [row.dataset.i, row.querySelector('.ca-name').textContent.split(' ')[0]] : null;
}"""
# Clicks the row of node `i` in cell `index`'s view at once (Playwright's click waits for a still element; a live
# view is drawn again every 0.5 s); true once clicked.
CLICK_ROW = """([index, i]) => {
  const out = window.jupyterapp.shell.currentWidget.content.widgets[index].outputArea.node;
  const row = out.querySelector('.ca-row[data-i="' + i + '"]');
  if (!row) return false;
  row.click();
  return true;
}"""
# In cell `index`'s view: the page shown is a kernel-built one (a brief section) whose headline starts with `path `.
PAGE_OF = """([index, path]) => {
  const out = window.jupyterapp.shell.currentWidget.content.widgets[index].outputArea.node;
  const h = out.querySelector('.ca-page .ca-headline');
  return !!h && h.textContent.startsWith(path + ' ') && !!out.querySelector('.ca-page .ca-sec-brief li')
    && !!out.querySelector('.ca-page .ca-sec-usage li');
}"""
# The live view's status line is still there (the run goes on).
LIVE_STATUS = """(index) => window.jupyterapp.shell.currentWidget.content.widgets[index].outputArea.node.innerText.includes('live · ')"""
SHUT_DOWN = """async () => {
  const panel = window.jupyterapp.shell.currentWidget;
  await panel.sessionContext.shutdown();
  return !panel.sessionContext.session;
}"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, str, str, Path]]:
    work = tmp_path_factory.mktemp("lab-tree-pages")
    store = work / "sample-store"
    tree = write_sample_tree(str(store), traces=60, seed=7)
    root = notebook_root(work)
    book = nbformat.v4.new_notebook()
    flag = work / "go-on"
    book.cells = [nbformat.v4.new_code_cell(
        f"from cyber_agent.notebook.tree_view import TreeView\nTreeView({str(store)!r}, {tree.root_trace_id!r}, page_limit={LIMIT})"),
        nbformat.v4.new_code_cell(  # busy until the test lets it go (at most a minute)
            f"import pathlib, time\nfor _ in range(600):\n    if pathlib.Path({str(flag)!r}).exists():\n        break\n"
            "    time.sleep(0.1)\nprint('went on')")]
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(book, root / "notebooks" / NOTEBOOK)
    live = nbformat.v4.new_notebook()
    live.cells = [nbformat.v4.new_code_cell(source) for source in LIVE_CELLS]
    live.metadata["kernelspec"] = book.metadata["kernelspec"]
    nbformat.write(live, root / "notebooks" / LIVE)
    with lab_server(root, work) as server:
        yield server, str(store), tree.root_trace_id, flag


def _left_out(view: TreeView) -> list[int]:
    """Indices of nodes whose page the view does not embed, deepest last."""
    embedded = view.pages_data()
    return [i for i in range(len(view)) if str(i) not in embedded]


def test_a_click_beyond_the_page_limit_fetches_the_page_from_the_kernel(setup: tuple[Lab, str, str, Path],
                                                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    lab, store, root_id, flag = setup
    view = TreeView(store, root_id, page_limit=LIMIT)
    nodes = view.nodes
    missing = _left_out(view)
    assert len(missing) == len(view) - LIMIT > 2
    first, third = missing[-1], missing[-2]
    # Clicked in its row: a left-out node shown once `first` is selected (its parent is on first's path).
    path_of_first, p = set(), nodes[first]["parent"]
    while p is not None:
        path_of_first.add(p)
        p = nodes[p]["parent"]
    second = next(i for i in reversed(missing) if i not in (first, third) and nodes[i]["parent"] in path_of_first)
    full = TreeView(store, root_id, page_limit=None)
    expected, later = full.page(nodes[first]["id"]), full.page(nodes[third]["id"])
    errors: list[str] = []
    with browser() as chromium:
        page = chromium.new_page(viewport={"width": 1500, "height": 1000})
        page.set_default_timeout(10_000)
        page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
        page.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
        page.goto(f"{lab.base}/lab/workspaces/pages/tree/{NOTEBOOK}?token={lab.token}", wait_until="domcontentloaded", timeout=30_000)
        page.wait_for_function(NOTEBOOK_READY, timeout=40_000, polling=250)
        try:
            run_cell(page, 0, 60)
            out = page.locator(".jp-Cell").nth(0).locator(".jp-OutputArea")
            box = out.locator(".ca-tree-box")
            box.locator(".ca-row").first.wait_for()
            assert box.get_attribute("data-kernel") and box.get_attribute("data-view")
            embedded = json.loads(box.locator("script.ca-pages").text_content() or "{}")
            assert str(first) not in embedded and str(second) not in embedded and len(embedded) == LIMIT

            # Search the deepest left-out node and select it: its page comes from the kernel.
            out.locator(".ca-find").fill(nodes[first]["path"])
            out.locator(".ca-find").press("Enter")
            headline = out.locator(".ca-page .ca-headline")
            page.wait_for_function(HEADLINE_IS, arg=expected.headline, timeout=30_000, polling=100)
            sections = dict(expected.sections)
            assert out.locator(".ca-page .ca-sec-brief li").first.text_content() == sections["brief"][0]
            assert out.locator(".ca-page .ca-sec-usage li").all_text_contents() == list(sections["usage"])
            assert out.locator(".ca-page .ca-nopage, .ca-page .ca-loading").count() == 0

            # A kernel busy in a cell answers once the cell ends; the page says so meanwhile.
            page.evaluate(RUN_CELL, 1)
            page.wait_for_function(BUSY, arg=1, timeout=30_000, polling=100)
            out.locator(".ca-find").fill(nodes[third]["path"])
            out.locator(".ca-find").press("Enter")
            page.wait_for_function(SAYS_BUSY, timeout=30_000, polling=100)
            assert headline.inner_text().startswith(nodes[third]["path"] + " ")
            flag.touch()
            page.wait_for_function(HEADLINE_IS, arg=later.headline, timeout=60_000, polling=100)
            page.wait_for_function(CELL_DONE, arg=1, timeout=30_000, polling=200)

            # Kernel gone: a click on another left-out node says how to get its page.
            assert page.evaluate(SHUT_DOWN) is True
            out.locator(f'.ca-row[data-i="{second}"]').click()
            note = out.locator(".ca-page .ca-nopage")
            note.wait_for(timeout=30_000)
            text = note.inner_text()
            assert "no page kept for this trace" in text and f"TreeView.page({json.dumps(nodes[second]['id'])})" in text, text
            assert headline.inner_text().startswith(nodes[second]["path"] + " ")
            # The page shown before is still in the page's cache: selecting it again shows it with no kernel.
            out.locator(".ca-find").fill(nodes[first]["path"])
            out.locator(".ca-find").press("Enter")
            assert headline.inner_text() == expected.headline
            ours = [e for e in errors if e.startswith("pageerror") or "caKernel" in e or "ca-tree" in e]
            assert not ours, ours
            print("console errors (the browser's own network lines allowed):", errors)
        except Exception:
            shot = tmp_path_factory.mktemp("shots") / "tree-pages.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot: {shot}\nerrors: {errors}\njupyter lab log (tail):\n{log_tail(lab.log)}")
            raise
        page.close()


def test_a_live_view_and_its_final_view_fetch_pages_beyond_the_limit(setup: tuple[Lab, str, str, Path],
                                                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    lab = setup[0]
    errors: list[str] = []
    with browser() as chromium:
        page = chromium.new_page(viewport={"width": 1500, "height": 1000})
        page.set_default_timeout(10_000)
        page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
        page.goto(f"{lab.base}/lab/workspaces/live/tree/{LIVE}?token={lab.token}", wait_until="domcontentloaded", timeout=30_000)
        page.wait_for_function(NOTEBOOK_READY, timeout=40_000, polling=250)
        try:
            for index in (0, 1):  # the launch cell returns once the root exists; the run goes on, the kernel idle
                run_cell(page, index, 60)
            out = page.locator(".jp-Cell").nth(1).locator(".jp-OutputArea")
            row = page.wait_for_function(LEFT_OUT_ROW, arg=1, timeout=60_000, polling=200).json_value()
            page.wait_for_function(CLICK_ROW, arg=[1, row[0]], timeout=10_000, polling=100)  # in the page: a redraw may come
            page.wait_for_function(PAGE_OF, arg=[1, row[1]], timeout=30_000, polling=100)
            print("page fetched while the run went on:", page.evaluate(LIVE_STATUS, 1))

            run_cell(page, 2, 150)
            said = page.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].outputArea.node.innerText", 2)
            assert "status: completed" in said, said
            page.wait_for_function(f"(index) => !({LIVE_STATUS})(index)", arg=1, timeout=20_000, polling=200)
            out.locator(".ca-collapse").click()  # the final view: a left-out node among the root's children
            final = page.wait_for_function(LEFT_OUT_ROW, arg=1, timeout=20_000, polling=200).json_value()
            page.wait_for_function(CLICK_ROW, arg=[1, final[0]], timeout=10_000, polling=100)
            page.wait_for_function(PAGE_OF, arg=[1, final[1]], timeout=30_000, polling=100)
            page.wait_for_timeout(1_000)  # room for JupyterLab's MathJax pass, were it to run on the view
            # Two "$" in a row's costs are not TeX: the drawn view opts out of MathJax (no typeset cost figures).
            assert out.locator(".ca-tree-box mjx-container").count() == 0 and "$" in out.locator(".ca-row").first.inner_text()
            assert not errors, errors
        except Exception:
            shot = tmp_path_factory.mktemp("shots") / "live-pages.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot: {shot}\nerrors: {errors}\njupyter lab log (tail):\n{log_tail(lab.log)}")
            raise
        page.close()
