"""Real browser (JupyterLab + headless Chromium): the live tree view of a launch, then its saved snapshot.

A notebook launches the recursive demo with each model reply taking 0.4 s (about 25 s in all)
and shows `live_tree(h)` in the same cell, which then ends (the kernel is idle while the run
goes on). The view must mark a running child with its tool while the run goes on (each update
is a new output bundle by display id, drawn while no cell runs), keep a node the user expanded
and the find box being typed in across updates, and show the final tree once `await h.result()` returns: no running mark, every trace,
and no widget left in the cell. Saved, kernel shut down and reopened in a new page, the cell
shows that snapshot and no "Error displaying widget".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import nbformat
import pytest

from browser_lab import NOTEBOOK_READY, Lab, browser, lab_server, log_tail, notebook_root, run_cell
from nb_helpers import REPO

pytestmark = pytest.mark.timeout(300)

NOTEBOOK = "live_tree.ipynb"
CELLS = [
    f"from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK\nfrom cyber_agent.notebook import launch\n"
    f"from cyber_agent.notebook.tree_view_live import live_tree\nREPO = {str(REPO)!r}",
    "h = await launch(DEMO_TASK, mode='recursive', model='demo:latency=0.4', workspace=REPO, root_task_anchor=DEMO_ANCHOR,\n"
    "                 progress=False)\nlive_tree(h, interval=0.5)",
    "r = await h.result()\nprint('status:', r.status)",
]

OUTPUT = "(index) => window.jupyterapp.shell.currentWidget.content.widgets[index].outputArea.node"
# A child row (its path starts with a digit) marked running with a tool, in cell `index`'s tree view.
RUNNING_CHILD = """(index) => {
  const out = window.jupyterapp.shell.currentWidget.content.widgets[index].outputArea.node;
  return Array.from(out.querySelectorAll('.ca-row')).some(r => /^·?[▸▾·]?\\d/.test(r.textContent.trim())
    && r.querySelector('.ca-run') && r.querySelector('.ca-run').textContent.includes('running: '));
}"""
SAVE_AND_SHUT_DOWN = """async () => {
  const panel = window.jupyterapp.shell.currentWidget;
  await panel.context.save();
  await panel.sessionContext.shutdown();
  return panel.context.model.dirty;
}"""
OPENED = """() => { const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  return !!(panel && panel.context && panel.context.isReady && panel.content && panel.content.widgets.length); }"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    work = tmp_path_factory.mktemp("lab-tree-live")
    root = notebook_root(work)
    book = nbformat.v4.new_notebook()
    book.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(book, root / "notebooks" / NOTEBOOK)
    with lab_server(root, work) as server:
        yield server


def _text(page: Any, index: int) -> str:
    return str(page.evaluate(f"(index) => ({OUTPUT})(index).innerText", index))


def test_the_live_tree_marks_running_children_then_saves_its_final_snapshot(lab: Lab,
                                                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    with browser() as chromium:
        page = chromium.new_page(viewport={"width": 1500, "height": 1000})
        page.set_default_timeout(10_000)
        page.goto(lab.url(NOTEBOOK), wait_until="domcontentloaded", timeout=30_000)
        page.wait_for_function(NOTEBOOK_READY, timeout=40_000, polling=250)
        try:
            run_cell(page, 0)
            run_cell(page, 1)  # returns once the root exists; the run goes on with the kernel idle
            out = page.locator(".jp-Cell").nth(1).locator(".jp-OutputArea")
            assert "Error" not in _text(page, 1), _text(page, 1)
            page.wait_for_function(RUNNING_CHILD, arg=1, timeout=60_000, polling=200)
            assert "live · " in _text(page, 1) and " running · updated " in _text(page, 1)
            # Expand delegate 1 (once it has children): it stays expanded across the next updates.
            page.wait_for_function(
                f"(index) => ({OUTPUT})(index).querySelector('.ca-row') && "
                f"Array.from(({OUTPUT})(index).querySelectorAll('.ca-row')).some(r => r.textContent.includes('▸1 delegate'))",
                arg=1, timeout=60_000, polling=200)
            out.locator(".ca-row", has_text="1 delegate").first.locator(".ca-tog").click()
            page.wait_for_timeout(2_000)  # several updates (every 0.5 s), each a new output bundle drawn again
            assert out.locator(".ca-row", has_text="1.1 explore").count() == 1, _text(page, 1)
            # Typing in the find box across redraws: the focus, the caret and the text stay.
            paints = page.evaluate("() => window.__caTreePaint.length")
            out.locator(".ca-find").click()
            page.keyboard.type("1.")
            page.wait_for_function("(n) => window.__caTreePaint.length >= n + 2", arg=paints, timeout=10_000, polling=100)
            page.keyboard.type("1")
            assert out.locator(".ca-find").input_value() == "1.1"
            assert page.evaluate("() => document.activeElement && document.activeElement.classList.contains('ca-find')")
            page.keyboard.press("Enter")
            assert "1.1 selected" in out.locator(".ca-status").inner_text()

            run_cell(page, 2, seconds=150)
            assert "status: completed" in _text(page, 2)
            page.wait_for_function(f"(index) => !({OUTPUT})(index).querySelector('.jupyter-widgets')", arg=1,
                                   timeout=20_000, polling=200)
            final = _text(page, 1)
            assert out.locator(".ca-run").count() == 0 and "of 16 traces shown" in final, final
            assert out.locator(".ca-row", has_text="1.1 explore").count() == 1  # still expanded in the final snapshot
            assert page.evaluate(SAVE_AND_SHUT_DOWN) is False
        except Exception:
            shot = tmp_path_factory.mktemp("shots") / "tree-live.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot: {shot}\njupyter lab log (tail):\n{log_tail(lab.log)}")
            raise
        page.close()

        again = chromium.new_page(viewport={"width": 1500, "height": 1000})
        again.set_default_timeout(10_000)
        again.goto(f"{lab.base}/lab/workspaces/reopened/tree/{NOTEBOOK}?token={lab.token}",
                   wait_until="domcontentloaded", timeout=30_000)
        again.wait_for_function(OPENED, timeout=40_000, polling=250)
        again.wait_for_timeout(2_000)  # let any widget renderer fail, if one were asked to render
        cell = again.locator(".jp-Cell").nth(1).locator(".jp-OutputArea")
        text = cell.inner_text()
        assert "Error displaying widget" not in again.locator(".jp-Notebook").inner_text()
        assert cell.locator(".jupyter-widgets").count() == 0, text
        assert cell.locator(".ca-tree-box").count() == 1 and "running" not in text
        # Trusted (saved from this session): the script draws the tree; else the static outline shows.
        assert "of 16 traces shown" in text or "root main" in text, text
        again.close()
