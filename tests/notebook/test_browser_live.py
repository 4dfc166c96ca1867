"""Real browser (JupyterLab + headless Chromium): the kernel's ■ stops a run in every documented form.

One notebook, one JupyterLab server for the module. The run is the recursive demo with each
model reply taking 1 s (left alone: 52 calls, about a minute), so a cell that ends within
`STOPPED_WITHIN` seconds of ■ was stopped by it. Each form launches afresh, runs its waiting
cell, waits until the kernel is busy in it, clicks the toolbar's interrupt button and expects
the cell to end with the one line `RunInterruptedError: stopped by interrupt: …` (never a bare
`CancelledError`), and the run `stopped`. Running the launch cell twice says the first run was
stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from browser_lab import NOTEBOOK_READY, Lab, browser, lab_server, log_tail, notebook_root
from nb_helpers import REPO

pytestmark = pytest.mark.timeout(300)

NOTEBOOK = "interrupt.ipynb"
STOPPED_WITHIN = 15  # seconds; the stop lands at the next model reply (1 s)

SETUP = f"""
from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.notebook import launch
REPO = {str(REPO)!r}"""
LAUNCH = "h = await launch(DEMO_TASK, mode='recursive', model='demo:latency=1', workspace=REPO, root_task_anchor=DEMO_ANCHOR)"
FORMS = {
    "await result": "r = await h.result()",
    "wait": "r = h.wait()",
    "mixed cell": "import asyncio\nawait asyncio.sleep(0)\nr = h.wait()",
}
CELLS = [SETUP, LAUNCH, *FORMS.values(), "print('status:', h.status)"]

# Run the code cell at `index` (its position among all cells); return at once (the command's promise ends with the cell).
RUN_CELL = """(index) => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  panel.content.activeCellIndex = index;
  void app.commands.execute('notebook:run-cell');
}"""

# The cell at `index` has finished (its execution count is set, its prompt no longer `[*]`).
CELL_DONE = """(index) => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cell = panel.content.widgets[index];
  return cell.model.executionCount !== null && !cell.node.querySelector('.jp-InputPrompt').textContent.includes('*');
}"""

# The cell at `index` is executing (JupyterLab marks its prompt `[*]`).
RUNNING = """(index) => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel.content.widgets[index].node.querySelector('.jp-InputPrompt').textContent.includes('*');
}"""

OUTPUT_TEXT = "(index) => window.jupyterapp.shell.currentWidget.content.widgets[index].outputArea.node.innerText"

CLEAR_COUNT = """(index) => { const cell = window.jupyterapp.shell.currentWidget.content.widgets[index];
  cell.model.executionCount = null; }"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    work = tmp_path_factory.mktemp("lab-live")
    root = notebook_root(work)
    book = nbformat.v4.new_notebook()
    book.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(book, root / "notebooks" / NOTEBOOK)
    with lab_server(root, work) as server:
        yield server


@pytest.fixture(scope="module")
def page(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with browser() as chromium:
        page = chromium.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(10_000)
        page.goto(lab.url(NOTEBOOK), wait_until="domcontentloaded", timeout=30_000)
        page.wait_for_function(NOTEBOOK_READY, timeout=40_000, polling=250)
        try:
            yield page
        except Exception:
            shot = tmp_path_factory.mktemp("shots") / "failure.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot: {shot}\njupyter lab log (tail):\n{log_tail(lab.log)}")
            raise


def _run(page: Any, index: int, seconds: float = 60) -> str:
    page.evaluate(CLEAR_COUNT, index)
    page.evaluate(RUN_CELL, index)
    page.wait_for_function(CELL_DONE, arg=index, timeout=seconds * 1000, polling=200)
    return str(page.evaluate(OUTPUT_TEXT, index))


def _interrupt(page: Any) -> None:
    """Click the notebook toolbar's ■ (JupyterLab's "Interrupt the kernel")."""
    page.locator('.jp-NotebookPanel-toolbar [data-jp-item-name="interrupt"]').first.click()


@pytest.mark.parametrize("form", list(FORMS))
def test_interrupt_stops_the_run(page: Any, lab: Lab, form: str) -> None:
    if form == "await result":
        _run(page, 0)
    launched = _run(page, 1)
    assert "Error" not in launched, launched
    index = 2 + list(FORMS).index(form)
    page.evaluate(CLEAR_COUNT, index)
    page.evaluate(RUN_CELL, index)
    page.wait_for_function(RUNNING, arg=index, timeout=20_000, polling=100)
    _interrupt(page)
    page.wait_for_function(CELL_DONE, arg=index, timeout=STOPPED_WITHIN * 1000, polling=200)
    text = str(page.evaluate(OUTPUT_TEXT, index))
    assert "RunInterruptedError: stopped by interrupt: run " in text, text
    assert " ended stopped after " in text, text
    assert "CancelledError" not in text and "Traceback" not in text, text
    assert "status: stopped" in _run(page, len(CELLS) - 1)


def test_running_the_launch_cell_twice_says_the_first_run_was_stopped(page: Any) -> None:
    _run(page, 1)
    text = _run(page, 1)
    assert "the previous run of this cell, " in text and "was still running: stopped it (subtree stop" in text, text
