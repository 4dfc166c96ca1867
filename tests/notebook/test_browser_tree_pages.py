"""Real browser (JupyterLab + headless Chromium): a click on a node beyond the page limit fetches its page from the kernel.

A notebook cell displays `TreeView(store, root, page_limit=20)` of a 60-trace sample tree (so 40
pages are left out of the HTML). Searching a node whose page is not embedded and selecting it
shows its headline and sections (brief, usage, ...) as the kernel builds them
(`cyber_agent/notebook/tree_view_pages.py`: the output's script asks the kernel over its own
websocket). While a cell keeps the kernel busy, the page says the answer comes when it ends,
and it does. With the kernel shut down, a click on another left-out node shows the note naming
`TreeView.page(...)`, and no script error reaches the page.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from browser_lab import NOTEBOOK_READY, Lab, browser, lab_server, log_tail, notebook_root

from cyber_agent.notebook.sample_tree import write_sample_tree
from cyber_agent.notebook.tree_view import TreeView

pytestmark = pytest.mark.timeout(300)

NOTEBOOK = "tree_pages.ipynb"
LIMIT = 20
RUN_CELL = """(index) => {
  const app = window.jupyterapp;
  app.shell.currentWidget.content.activeCellIndex = index;
  void app.commands.execute('notebook:run-cell');
}"""
CELL_DONE = """(index) => {
  const cell = window.jupyterapp.shell.currentWidget.content.widgets[index];
  return cell.model.executionCount !== null && !cell.node.querySelector('.jp-InputPrompt').textContent.includes('*');
}"""
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
        page.goto(lab.url(NOTEBOOK), wait_until="domcontentloaded", timeout=30_000)
        page.wait_for_function(NOTEBOOK_READY, timeout=40_000, polling=250)
        try:
            page.evaluate(RUN_CELL, 0)
            page.wait_for_function(CELL_DONE, arg=0, timeout=60_000, polling=200)
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
