"""Real browser (JupyterLab + headless Chromium): ■ stops a run; saved progress reopens readable.

One notebook, one JupyterLab server for the module. The run is the recursive demo with each
model reply taking 1 s (left alone: 52 calls, about a minute), so a cell that ends within
`STOPPED_WITHIN` seconds of ■ was stopped by it. Each form launches afresh, runs its waiting
cell, waits until the kernel is busy in it, clicks the toolbar's interrupt button and expects
the cell to end with the one line `RunInterruptedError: stopped by interrupt: …` (never a bare
`CancelledError`), and the run `stopped`. Running the launch cell twice says the first run was
stopped.

Saved means readable, mid-run too: a notebook showing a running launch's progress, its live tree
and a sweep's view is saved while both runs go on and the kernel is idle, its kernel shut down;
the file and the reopened page hold the latest snapshot of each as HTML (what the page showed at
save time, past what it showed a second before), and no widget.

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

from browser_lab import CELL_DONE, NOTEBOOK_READY, RUN_CELL, Lab, browser, lab_server, log_tail, notebook_root, run_cell
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
MIDRUN = "midrun.ipynb"
SWEEP_CELLS = 6
MIDRUN_CELLS = [
    SETUP + "\nimport asyncio\nfrom pathlib import Path\nfrom cyber_agent.experiments import Sweep, load_tasks, run_sweep\n"
    "from cyber_agent.notebook.sweep_view import SweepProgressView\nfrom cyber_agent.notebook.tree_view_live import live_tree\n"
    "from cyber_agent.trace import InMemoryTraceStore",
    "h = await launch(DEMO_TASK, mode='recursive', model='demo:latency=0.5', workspace=REPO, root_task_anchor=DEMO_ANCHOR)",
    "live_tree(h, interval=0.5)",
    f"grid = Sweep(name='midrun', tasks=load_tasks(Path(REPO) / 'data' / 'tasks' / 'tasks.jsonl')[:{SWEEP_CELLS}],\n"
    "             models=['demo:latency=0.5'], modes=['legacy'], repeats=1, workspace=REPO)\n"
    "view = SweepProgressView()\ndisplay(view)\n"
    "sweep = asyncio.ensure_future(run_sweep(grid, InMemoryTraceStore(), on_progress=view, concurrency=1))",
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
    midrun = nbformat.v4.new_notebook()
    midrun.cells = [nbformat.v4.new_code_cell(source) for source in MIDRUN_CELLS]
    midrun.metadata["kernelspec"] = book.metadata["kernelspec"]
    nbformat.write(midrun, root / "notebooks" / MIDRUN)
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
    run_cell(page, index, seconds)
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
    # Costs print as "$0.0012": two on a page are TeX to JupyterLab's MathJax unless the outputs opt out.
    first.wait_for_timeout(1_000)
    assert first.locator(".jp-OutputArea mjx-container").count() == 0
    assert first.evaluate(SAVE_AND_SHUT_DOWN) is False
    first.close()

    again = chromium.new_page(viewport={"width": 1400, "height": 1000})
    again.set_default_timeout(10_000)
    again.goto(f"{lab.base}/lab/workspaces/reopened/tree/{SAVED}?token={lab.token}",
               wait_until="domcontentloaded", timeout=30_000)
    again.wait_for_function(OPENED, timeout=40_000, polling=250)
    again.wait_for_timeout(2_000)  # let any widget renderer fail, if one were asked to render
    outputs = again.evaluate(RENDERED)
    assert again.locator(".jp-OutputArea mjx-container").count() == 0
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


# Every code cell's outputs as the page's notebook model holds them (what a save writes).
MODEL_OUTPUTS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(cell => cell.model.type === 'code')
  .map(cell => { const out = []; for (let i = 0; i < cell.model.outputs.length; i++) out.push(cell.model.outputs.get(i).toJSON()); return out; })"""

# Mid-run, with the kernel idle: the progress has counted calls, the tree marks a running trace, the sweep is part-way.
MIDWAY = """(n) => {
  const cells = window.jupyterapp.shell.currentWidget.content.widgets.filter(c => c.model.type === 'code');
  const text = i => cells[i].outputArea.node.textContent;
  const progress = text(1).startsWith('statusagentsrunningdepthLLM callstokenscostelapsedrunning')
    && text(1).includes('running now');
  const tree = !!cells[2].outputArea.node.querySelector('.ca-run');
  const m = /midrun: (\\d+)\\/(\\d+) cells/.exec(text(3));
  return progress && tree && !!m && Number(m[1]) >= 1 && Number(m[1]) < n;
}"""


SAVE = "async () => { await window.jupyterapp.shell.currentWidget.context.save(); }"
SHUT_DOWN = "async () => { await window.jupyterapp.shell.currentWidget.sessionContext.shutdown(); }"


def _html_of(output: dict[str, Any]) -> str:
    html = output.get("data", {}).get("text/html", "")
    return "".join(html) if isinstance(html, list) else str(html)


def _llm_calls(progress_html: str) -> int:
    """The LLM calls of a progress view's summary row (status, agents, running, depth, LLM calls, ...)."""
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", progress_html)
    return int(cells[4])


def test_a_notebook_saved_mid_run_reopens_with_the_latest_snapshots(lab: Lab, lab_root: Path, chromium: Any) -> None:
    """Progress, live tree and sweep view saved while their runs go on (kernel idle): HTML, the latest snapshot, no widget."""
    first = chromium.new_page(viewport={"width": 1400, "height": 1000})
    first.set_default_timeout(10_000)
    first.goto(f"{lab.base}/lab/workspaces/midrun/tree/{MIDRUN}?token={lab.token}", wait_until="domcontentloaded",
               timeout=30_000)
    first.wait_for_function(NOTEBOOK_READY, timeout=40_000, polling=250)
    for index in range(len(MIDRUN_CELLS)):  # each cell returns at once: the runs go on with the kernel idle
        run_cell(first, index, 60)
    first.wait_for_function(MIDWAY, arg=SWEEP_CELLS, timeout=60_000, polling=200)
    seen = first.evaluate(MODEL_OUTPUTS)
    first.wait_for_timeout(1_200)  # more updates arrive with no cell running
    before = first.evaluate(MODEL_OUTPUTS)
    first.evaluate(SAVE)  # mid-run: the runs go on (updates keep coming, so the notebook is dirty again at once)
    after = first.evaluate(MODEL_OUTPUTS)
    first.evaluate(SHUT_DOWN)
    first.close()

    saved = nbformat.read(lab_root / "notebooks" / MIDRUN, as_version=4)
    outputs = [[dict(o) for o in cell.get("outputs", [])] for cell in saved.cells]
    assert not [o for cell in outputs for o in cell if WIDGET_VIEW in o.get("data", {})], outputs
    (progress,), (tree,), (sweep,) = outputs[1], outputs[2], outputs[3]
    # The latest snapshots: what the page held while it saved, past what it held 1.2 s before (no cell ran between).
    calls = [_llm_calls(_html_of(cell[1][0])) for cell in (seen, before, after)]
    assert 0 < calls[0] < calls[1] <= _llm_calls(_html_of(progress)) <= calls[2], (calls, _html_of(progress))
    assert _html_of(tree) in (_html_of(before[2][0]), _html_of(after[2][0]))
    assert _html_of(sweep) in (_html_of(before[3][0]), _html_of(after[3][0]))
    assert "<td" in _html_of(progress) and ">running<" in _html_of(progress)
    assert 'class="ca-tree-box"' in _html_of(tree) and "live · " in _html_of(tree) and "running" in _html_of(tree)
    done = int(re.search(r"midrun: (\d+)/(\d+) cells", _html_of(sweep)).group(1))  # type: ignore[union-attr]
    assert 1 <= done < SWEEP_CELLS

    again = chromium.new_page(viewport={"width": 1400, "height": 1000})
    again.set_default_timeout(10_000)
    again.goto(f"{lab.base}/lab/workspaces/midrun-reopened/tree/{MIDRUN}?token={lab.token}",
               wait_until="domcontentloaded", timeout=30_000)
    again.wait_for_function(OPENED, timeout=40_000, polling=250)
    again.wait_for_timeout(2_000)  # let any widget renderer fail, if one were asked to render
    shown = again.evaluate(RENDERED)
    texts = [t for cell in shown for _, t in cell]
    assert not [t for t in texts if WIDGET_ERROR in t], shown
    assert not [w for cell in shown for w, _ in cell if w], shown
    assert shown[1][0][1].startswith("statusagents") and "running now" in shown[1][0][1], shown[1]
    cell = again.locator(".jp-Cell").nth(2).locator(".jp-OutputArea")
    assert cell.locator(".ca-tree-box").count() == 1 and cell.locator(".ca-row").count() > 1, cell.inner_text()
    assert cell.locator(".ca-run").count() >= 1 and "live · " in cell.inner_text()  # the snapshot as saved: mid-run
    assert f"midrun: {done}/{SWEEP_CELLS} cells" in shown[3][0][1], shown[3]
    again.close()

    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(saved)
    assert "model not found" not in body and f"midrun: {done}/{SWEEP_CELLS} cells" in body and "running now" in body
