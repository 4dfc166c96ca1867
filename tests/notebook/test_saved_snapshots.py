"""Saved means readable (#36 item 2): what the shipped notebooks keep needs no kernel and no widget state.

Every rich output of the toolkit saves as HTML: the live views (progress, the live tree, sweep and
import bars) are display-id HTML that each update replaces (`cyber_agent/notebook/display.py:LiveDisplay`),
and the stepper, the explorer and the budget views are HTML too. So no saved output can reopen as "Error displaying widget: model not found"
(JupyterLab draws a widget output only from a live kernel or saved widget state), and
nbconvert's HTML — what GitHub and nbviewer show — holds every snapshot. The real-browser
reopen is `test_browser_live.py::test_saved_progress_and_sweep_views_reopen_as_their_final_snapshot`.
"""

from __future__ import annotations

import json

import nbformat
import pytest
from nbconvert import HTMLExporter

from nb_helpers import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_saved_output_is_a_widget(path):
    book = json.loads(path.read_text(encoding="utf-8"))
    widgets = [cell["source"][:80] for cell in book["cells"] for output in cell.get("outputs", [])
               if WIDGET_VIEW in output.get("data", {})]
    assert not widgets, f"{path.name}: these outputs need a kernel or widget state to show: {widgets}"


def _html(name: str) -> str:
    body, _ = HTMLExporter().from_notebook_node(nbformat.read(REPO / "notebooks" / name, as_version=4))
    return str(body)


def test_the_stepper_notebook_as_github_shows_it_every_step():
    page = _html("04_reports_and_validators.ipynb")
    assert "model not found" not in page and WIDGET_VIEW not in page
    assert "36 protocol steps" in page and page.count('class="ca-stepper-static"') == 1
    assert "36 / 36 · validation" in page  # the cells after it moved it to the last step: the saved output followed


def test_the_explorer_notebook_as_github_shows_the_tree_and_the_page():
    page = _html("07_explore_a_run.ipynb")
    assert "model not found" not in page and WIDGET_VIEW not in page
    assert 'class="ca-static"' in page and "<details" in page  # the tree view's outline
    assert "cyber-agent-explorer-body" in page and "validation 2 (criteria)" in page  # the page last selected


class _Shown:
    """What `IPython.display.display(..., display_id=True)` returns: updates are recorded."""

    def __init__(self, obj: object) -> None:
        self.first, self.updates = obj, []

    def update(self, obj: object, raw: bool = False) -> None:
        self.updates.append(obj)


def test_the_import_bar_ends_as_one_line(monkeypatch, tmp_path):
    import importlib

    import IPython.display

    from cyber_agent.notebook import load_runs

    imports = importlib.import_module("cyber_agent.notebook.imports")
    shown: list[_Shown] = []

    def display(obj, **_):
        shown.append(_Shown(obj))

    def update_display(obj, **_):
        shown[-1].update(obj)

    monkeypatch.setattr(imports, "in_notebook", lambda: True)
    monkeypatch.setattr(IPython.display, "display", display)
    monkeypatch.setattr(IPython.display, "update_display", update_display)
    runs = load_runs(REPO / "tests" / "data" / "redel" / "06d8809127b9e72d")
    assert runs.roots
    (bar,) = shown
    assert WIDGET_VIEW not in bar.first and 'class="ca-bar"' in bar.first["text/html"]  # live: an HTML bar, no widget
    assert bar.updates == [{"text/plain": "import done: 1/1 files read", "text/html": "<code>import done: 1/1 files read</code>"}]
