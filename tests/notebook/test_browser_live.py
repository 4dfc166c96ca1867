"""Real browser (JupyterLab + headless Chromium): ■ stops a run; saved progress reopens readable.

One notebook, one JupyterLab server for the module. The run is the recursive demo with each
model reply taking 1 s (left alone: 52 calls, about a minute), so a cell that ends within
`STOPPED_WITHIN` seconds of ■ was stopped by it. Each form launches afresh, runs its waiting
cell, waits until the kernel is busy in it, clicks the toolbar's interrupt button and expects
the cell to end with the one line `RunInterruptedError: stopped by interrupt: …` (never a bare
`CancelledError`), and the run `stopped`. Running the launch cell twice says the first run was
stopped.

Saved means readable: a notebook showing a run's progress (the launch cell's view and
`handle.progress()`), a sweep's view, the report stepper, the explorer, the budget frame and
chart and the finished handle is run, saved, its kernel shut down and the page closed; reopened
in a new page, every output shows its final snapshot and none reads "Error displaying widget"
(the progress views replaced their widget by static HTML when they finished; the stepper and
the explorer are HTML with a script, which draws them again without a kernel).
"""

from __future__ import annotations

import re
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

SAVED = "saved.ipynb"
SAVED_CELLS = [
    SETUP,
    "h = await launch(DEMO_TASK, mode='recursive', model='demo', workspace=REPO, root_task_anchor=DEMO_ANCHOR)",
    "r = await h.result()",
    "h.progress()",
    "from cyber_agent.experiments import Sweep, load_tasks, run_sweep\n"
    "from cyber_agent.notebook.sweep_view import SweepProgressView\n"
    "from cyber_agent.trace import InMemoryTraceStore\n"
    "from pathlib import Path\n"
    "grid = Sweep(name='saved', tasks=load_tasks(Path(REPO) / 'data' / 'tasks' / 'tasks.jsonl')[:2], models=['demo'],\n"
    "             modes=['legacy'], repeats=1, workspace=REPO)\n"
    "view = SweepProgressView()\n"
    "display(view)\n"
    "report = await run_sweep(grid, InMemoryTraceStore(), on_progress=view)",
    "from cyber_agent.notebook import ReportStepper, TraceExplorer, budget_frame, plot_budget, plot_usage_by_agent\n"
    "ReportStepper(h.store, h.trace_id)",
    "TraceExplorer(h.store, h.trace_id)",
    "budget_frame(h.store, h.trace_id)",
    "plot_budget(h.store, h.trace_id)",
    "h",
]
WIDGET_ERROR = "Error displaying widget"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

RUN_ALL_AND_SAVE = """async () => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  await panel.sessionContext.ready;
  await app.commands.execute('notebook:run-all-cells');
}"""

SAVE_AND_SHUT_DOWN = """async () => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  await panel.context.save();
  await panel.sessionContext.shutdown();
  return panel.context.model.dirty;
}"""

ALL_DONE = """(n) => {
  const cells = window.jupyterapp.shell.currentWidget.content.widgets.filter(c => c.model.type === 'code');
  return cells.length === n && cells.every(c => c.model.executionCount !== null && c.model.executionCount !== undefined
    && !c.node.querySelector('.jp-InputPrompt').textContent.includes('*'));
}"""

# Per code cell: [rendered as a widget, text] of each output (textContent: offscreen cells too).
RENDERED = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(cell => cell.model.type === 'code')
  .map(cell => Array.from(cell.outputArea.node.querySelectorAll('.jp-OutputArea-output'))
       .map(o => [!!o.querySelector('.jupyter-widgets'), o.textContent]))"""

OPENED = """() => { const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  return !!(panel && panel.context && panel.context.isReady && panel.content && panel.content.widgets.length); }"""

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
def lab_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's root (a copy of data/ beside notebooks/ holding the module's two notebooks)."""
    root = notebook_root(tmp_path_factory.mktemp("lab-live"))
    book = nbformat.v4.new_notebook()
    book.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(book, root / "notebooks" / NOTEBOOK)
    saved = nbformat.v4.new_notebook()
    saved.cells = [nbformat.v4.new_code_cell(source) for source in SAVED_CELLS]
    saved.metadata["kernelspec"] = book.metadata["kernelspec"]
    nbformat.write(saved, root / "notebooks" / SAVED)
    return root


@pytest.fixture(scope="module")
def lab(lab_root: Path) -> Iterator[Lab]:
    with lab_server(lab_root, lab_root.parent) as server:
        yield server


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium for the module (playwright's sync API allows one driver at a time)."""
    with browser() as launched:
        yield launched


@pytest.fixture(scope="module")
def page(lab: Lab, chromium: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
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


def test_saved_progress_and_sweep_views_reopen_as_their_final_snapshot(lab: Lab, lab_root: Path, chromium: Any) -> None:
    first = chromium.new_page(viewport={"width": 1400, "height": 1000})
    first.set_default_timeout(10_000)
    # A workspace of its own: the module's other page keeps the default one (and its notebook) open.
    first.goto(f"{lab.base}/lab/workspaces/saved/tree/{SAVED}?token={lab.token}", wait_until="domcontentloaded",
               timeout=30_000)
    first.wait_for_function(NOTEBOOK_READY, timeout=40_000, polling=250)
    first.evaluate(RUN_ALL_AND_SAVE)
    first.wait_for_function(ALL_DONE, arg=len(SAVED_CELLS), timeout=120_000, polling=250)
    live = first.evaluate(RENDERED)
    assert not [t for cell in live for _, t in cell if WIDGET_ERROR in t], live
    assert first.evaluate(SAVE_AND_SHUT_DOWN) is False
    first.close()

    again = chromium.new_page(viewport={"width": 1400, "height": 1000})
    again.set_default_timeout(10_000)
    again.goto(f"{lab.base}/lab/workspaces/reopened/tree/{SAVED}?token={lab.token}",
               wait_until="domcontentloaded", timeout=30_000)
    again.wait_for_function(OPENED, timeout=40_000, polling=250)
    again.wait_for_timeout(2_000)  # let any widget renderer fail, if one were asked to render
    outputs = again.evaluate(RENDERED)
    texts = [t for cell in outputs for _, t in cell]
    assert not [t for t in texts if WIDGET_ERROR in t], outputs
    assert not [w for cell in outputs for w, _ in cell if w], outputs  # static snapshots, no widget
    progress = [t for t in texts if t.lstrip().startswith("statusagents")]
    assert len(progress) == 3 and all("completed6 agents + 10 validators" in t for t in progress), progress
    assert any(t.startswith("saved: 2/2 cells") for t in texts), texts
    # The stepper and the explorer are HTML: reopened in a trusted notebook, their scripts draw them again, no kernel.
    stepper = again.locator(".ca-stepper")
    assert stepper.count() == 1
    label = stepper.locator(".cyber-agent-stepper-label")
    assert re.fullmatch(r"1 / \d+ · brief", label.inner_text()), label.inner_text()
    stepper.scroll_into_view_if_needed()
    stepper.get_by_role("button", name="next ▶").click()
    assert re.fullmatch(r"2 / \d+ · \w+", label.inner_text()), label.inner_text()
    explorer = again.locator(".cyber-agent-explorer")
    assert explorer.count() == 1 and explorer.locator(".ca-tree-box").count() == 1
    assert "root main" in explorer.locator(".cyber-agent-explorer-body").inner_text()
    assert any("Tree budget (recursive" in t and "% used" in t and "e+0" not in t for t in texts), texts
    assert any("answer" in t and "Top region" in t for t in texts), texts  # the finished handle: final table and answer
    again.close()

    # What GitHub and nbviewer show of the file JupyterLab saved: nbconvert's HTML, no kernel, no widget state.
    from nbconvert import HTMLExporter

    saved = nbformat.read(lab_root / "notebooks" / SAVED, as_version=4)
    assert not [o for cell in saved.cells for o in cell.get("outputs", []) if WIDGET_VIEW in o.get("data", {})]
    body, _ = HTMLExporter().from_notebook_node(saved)
    assert "model not found" not in body and body.count("completed") >= 3
    assert re.search(r"\d+ protocol steps", body) and "cyber-agent-explorer-body" in body and "saved: 2/2 cells" in body
