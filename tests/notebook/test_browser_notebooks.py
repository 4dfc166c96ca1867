"""Real browser (JupyterLab + headless Chromium): first contact as a researcher has it.

- A new notebook created in JupyterLab, with no `%matplotlib` magic, shows a trace tree as one image.
- A shipped notebook reopens with its final progress and no "Error displaying widget", whether
  JupyterLab trusts it (you saved it here) or not (a fresh clone): the finished progress views
  replaced their widgets by the final snapshot as static HTML; opening it leaves it unmodified
  (its kernelspec is what JupyterLab records).

One server for the module; every notebook lives in a temporary root (see `browser_lab.py`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_lab import NOTEBOOK_READY, Lab, browser, lab_server, log_tail, notebook_root
from nb_helpers import REPO

SHIPPED = REPO / "notebooks" / "02_recursive_tree.ipynb"
STEPPER = REPO / "notebooks" / "04_reports_and_validators.ipynb"
EXPLORER = REPO / "notebooks" / "07_explore_a_run.ipynb"
UNTRUSTED = "02_fresh_clone.ipynb"  # the same notebook with one metadata key more: its signature is unknown
WIDGET_ERROR = "Error displaying widget"

pytestmark = pytest.mark.timeout(240)

# Make a new notebook on the python3 kernel and return its path (the page's current widget becomes it).
NEW_NOTEBOOK = """async () => {
  const app = window.jupyterapp;
  const panel = await app.commands.execute('notebook:create-new', {kernelName: 'python3'});
  await panel.context.ready;
  await panel.sessionContext.ready;
  return panel.context.path;
}"""

# Type `sources` into cells (the first exists), run each in turn; resolve when the kernel is idle after all.
RUN_CELLS = """async (sources) => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  const notebook = panel.content;
  for (let i = 0; i < sources.length; i++) {
    if (i > 0) await app.commands.execute('notebook:insert-cell-below');
    notebook.activeCell.model.sharedModel.setSource(sources[i]);
  }
  await app.commands.execute('notebook:run-all-cells');
}"""

CELLS_DONE = """(n) => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.widgets.filter(cell => cell.model.type === 'code');
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return cells.length === n && !!kernel && kernel.status === 'idle'
    && cells.every(cell => cell.model.executionCount !== null && cell.model.executionCount !== undefined);
}"""

# Per code cell of the current notebook: images in its outputs and its rendered text.
OUTPUTS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(cell => cell.model.type === 'code')
  .map(cell => ({images: cell.outputArea.node.querySelectorAll('img').length, text: cell.outputArea.node.innerText}))"""

DIRTY = "() => window.jupyterapp.shell.currentWidget.context.model.dirty"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, Path]]:
    work = tmp_path_factory.mktemp("lab")
    root = notebook_root(work, SHIPPED, STEPPER, EXPLORER)
    clone = json.loads(SHIPPED.read_text(encoding="utf-8"))
    clone["metadata"]["cloned"] = True
    (root / "notebooks" / UNTRUSTED).write_text(json.dumps(clone, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    with lab_server(root, work, trusted=[SHIPPED.name, STEPPER.name, EXPLORER.name]) as server:
        yield server, root / "notebooks"


@pytest.fixture
def page(lab: tuple[Lab, Path], tmp_path: Path) -> Iterator[Any]:
    server, _ = lab
    with browser() as chromium:
        page = chromium.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(10_000)
        try:
            yield page
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"screenshot: {tmp_path / 'failure.png'}\njupyter lab log (tail):\n{log_tail(server.log)}")
            raise


def _open_lab(page: Any, server: Lab) -> None:
    page.goto(f"{server.base}/lab?token={server.token}", wait_until="domcontentloaded", timeout=30_000)
    page.wait_for_function("() => !!(window.jupyterapp && window.jupyterapp.commands.hasCommand('notebook:create-new'))",
                           timeout=40_000, polling=250)
    page.evaluate("async () => { await window.jupyterapp.restored; }")


def _run(page: Any, sources: list[str], seconds: float = 90) -> list[dict[str, Any]]:
    page.evaluate(RUN_CELLS, sources)
    page.wait_for_function(CELLS_DONE, arg=len(sources), timeout=seconds * 1000, polling=250)
    return page.evaluate(OUTPUTS)


def test_a_new_notebook_without_magic_shows_a_trace_tree_image(lab: tuple[Lab, Path], page: Any) -> None:
    server, _ = lab
    _open_lab(page, server)
    page.evaluate(NEW_NOTEBOOK)
    outputs = _run(page, [
        "from cyber_agent.notebook import draw_trace_tree, load_export, to_frames\n"
        "source = load_export('../data/exports/legacy_demo.jsonl')\n"
        "root = to_frames(source).roots[0]",
        "draw_trace_tree(source, root)",
    ])
    assert [o["images"] for o in outputs] == [0, 1], outputs
    assert "Figure size" not in outputs[1]["text"]  # the image, not the text fallback


# Per code cell: (rendered as a widget, text) of each output.
RENDERED = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(cell => cell.model.type === 'code')
  .map(cell => Array.from(cell.outputArea.node.querySelectorAll('.jp-OutputArea-output'))
       .map(o => [!!o.querySelector('.jupyter-widgets'), o.textContent]))"""  # textContent: offscreen cells too


# Both progress tables are there (rendered from the saved state, or as text/html), or a widget error is.
PROGRESS_SHOWN = """() => {
  const outputs = Array.from(window.jupyterapp.shell.currentWidget.content.node.querySelectorAll('.jp-OutputArea-output'));
  const texts = outputs.map(o => o.textContent);
  return texts.filter(t => t.trim().startsWith('statusagents')).length >= 2
    || texts.some(t => t.includes('Error displaying widget'));
}"""


# Trusted or not, the progress outputs are static HTML: each view replaced its widget when the run ended.
@pytest.mark.parametrize("name, as_widget", [(SHIPPED.name, False), (UNTRUSTED, False)], ids=["trusted", "fresh clone"])
def test_a_shipped_notebook_reopens_with_its_final_progress_unmodified(lab: tuple[Lab, Path], page: Any, name: str,
                                                                      as_widget: bool) -> None:
    server, folder = lab
    before = (folder / name).read_bytes()
    page.goto(server.url(name), wait_until="domcontentloaded", timeout=30_000)
    page.wait_for_function(NOTEBOOK_READY, timeout=40_000, polling=250)
    page.wait_for_function(PROGRESS_SHOWN, timeout=30_000, polling=250)  # widget views render asynchronously
    time.sleep(3)  # the kernel's info has arrived: JupyterLab would have rewritten the metadata by now
    assert page.evaluate(DIRTY) is False
    outputs = [o for cell in page.evaluate(RENDERED) for o in cell]
    assert not [text for _, text in outputs if WIDGET_ERROR in text]
    progress = [(widget, text) for widget, text in outputs if text.lstrip().startswith("statusagents")]  # the tables
    assert len(progress) == 2, progress  # the launch cell's view and handle.progress()'s
    assert all(widget is as_widget and "completed6 agents + 10 validators" in text for widget, text in progress), progress
    assert (folder / name).read_bytes() == before


# The stepper and the explorer are HTML with a script: a trusted notebook (saved here) draws them again on opening.
@pytest.mark.parametrize("notebook, drawn, says", [
    (STEPPER, ".ca-stepper .cyber-agent-stepper-label", "36 / 36 · validation"),
    (EXPLORER, ".cyber-agent-explorer .ca-tree .ca-status", "traces shown"),
], ids=["stepper", "explorer"])
def test_the_stepper_and_explorer_notebooks_reopen_drawn_and_unmodified(lab: tuple[Lab, Path], page: Any,
                                                                        notebook: Path, drawn: str, says: str) -> None:
    server, folder = lab
    before = (folder / notebook.name).read_bytes()
    page.goto(server.url(notebook.name), wait_until="domcontentloaded", timeout=30_000)
    page.wait_for_function(NOTEBOOK_READY, timeout=40_000, polling=250)
    shown = page.locator(drawn).first
    shown.wait_for(state="attached", timeout=20_000)
    assert says in shown.text_content(), shown.text_content()
    time.sleep(3)
    assert page.evaluate(DIRTY) is False
    outputs = [o for cell in page.evaluate(RENDERED) for o in cell]
    assert not [text for _, text in outputs if WIDGET_ERROR in text]
    assert not [text for widget, text in outputs if widget], "no output is a widget"
    assert (folder / notebook.name).read_bytes() == before
