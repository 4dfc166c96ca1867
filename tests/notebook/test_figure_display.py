"""Charts show as images in a fresh kernel with no `%matplotlib` magic, exactly once, and still with `widget`.

Each test executes a small notebook in a new kernel with nbclient and counts the image/png
outputs per cell, as JupyterLab would render them.
"""

from __future__ import annotations

import os

import pytest
from matplotlib.figure import Figure
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from cyber_agent.notebook import enable_figure_display, plot_budget

from nb_helpers import REPO

LEGACY_EXPORT = REPO / "data" / "exports" / "legacy_demo.jsonl"

pytestmark = pytest.mark.timeout(180)

LOAD = f"""\
from cyber_agent.notebook import budget_frame, draw_trace_tree, load_export, plot_budget, to_frames
SOURCE = load_export({str(LEGACY_EXPORT)!r})
ROOT = to_frames(SOURCE).roots[0]"""


def _execute(*sources: str) -> list[list[dict]]:
    """Run the cells in a new kernel; return each cell's outputs."""
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # the kernel picks its default, as in Lab
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(REPO)}})
    with client.setup_kernel(env=env):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
    return [list(cell.outputs) for cell in nb.cells]


def _images(outputs: list[dict]) -> int:
    return sum("image/png" in output.get("data", {}) for output in outputs)


def test_a_fresh_kernel_without_magic_shows_each_figure_once():
    cells = _execute(
        LOAD,
        "draw_trace_tree(SOURCE, ROOT)",                      # returned by the cell
        "fig = plot_budget(SOURCE, ROOT)\ndisplay(fig)",     # displayed explicitly, nothing returned
        "import matplotlib.pyplot as plt\nplot_budget(SOURCE, ROOT)",  # pyplot imported: still once
        "%matplotlib inline\nplot_budget(SOURCE, ROOT)",     # the inline backend's own formatter: still once
    )
    assert [_images(outputs) for outputs in cells] == [0, 1, 1, 1, 1]
    assert cells[1][0]["output_type"] == "execute_result"
    assert "Figure size" in cells[1][0]["data"]["text/plain"]  # the text fallback stays beside the image


def test_the_widget_backend_still_shows_our_figures():
    pytest.importorskip("ipympl", reason="the `widget` backend is ipympl (in the notebook extra)")
    cells = _execute("%matplotlib widget\n" + LOAD, "draw_trace_tree(SOURCE, ROOT)", "display(plot_budget(SOURCE, ROOT))")
    assert [_images(outputs) for outputs in cells] == [0, 1, 1]


def test_outside_ipython_nothing_is_registered_and_figures_save(tmp_path, demo_store, demo_root):
    assert enable_figure_display() is False
    fig = plot_budget(demo_store, demo_root)
    assert isinstance(fig, Figure)
    fig.savefig(tmp_path / "budget.png")
    assert (tmp_path / "budget.png").stat().st_size > 1000


def test_a_backend_formatter_is_never_replaced():
    """With a fake shell: an existing Figure formatter (any image type) is left alone; otherwise PNG is added."""
    from IPython.core.formatters import DisplayFormatter

    class Shell:
        display_formatter = DisplayFormatter()

    shell = Shell()
    assert enable_figure_display(shell) is True
    png = shell.display_formatter.formatters["image/png"]
    fig = Figure()
    fig.add_subplot().plot([1, 2])
    assert png(fig)  # base64 text of a PNG
    assert enable_figure_display(shell) is False  # already there

    other = Shell()
    other.display_formatter = DisplayFormatter()
    other.display_formatter.formatters["image/svg+xml"].for_type(Figure, lambda f: "<svg/>")
    assert enable_figure_display(other) is False
    with pytest.raises(KeyError):
        other.display_formatter.formatters["image/png"].lookup_by_type(Figure)
