"""The shipped notebooks reopen cleanly: their kernelspec is the one JupyterLab records (so opening one does not
rewrite it), no magic is needed for figures, no cell deletes data, and the saved progress is the final one (no
output is a widget: `test_saved_snapshots.py::test_no_saved_output_is_a_widget`)."""

from __future__ import annotations

import json
import re

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from nb_helpers import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
DELETES = re.compile(r"\.cleanup\(\)|rmtree|\.unlink\(|os\.remove\(")


def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_notebooks_are_there():
    assert [p.name[:2] for p in NOTEBOOKS][:6] == ["01", "02", "03", "04", "05", "06"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_kernelspec_is_what_jupyterlab_records(path):
    installed = KernelSpecManager().get_kernel_spec("python3")
    spec = _load(path)["metadata"]["kernelspec"]
    assert spec == {"name": "python3", "display_name": installed.display_name, "language": installed.language}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_magic_and_no_deletion(path):
    sources = ["".join(cell["source"]) for cell in _load(path)["cells"] if cell["cell_type"] == "code"]
    assert not any("%matplotlib" in s for s in sources), "figures display without magic"
    assert not [s for s in sources if DELETES.search(s)], "a reader explores the data after Run All"


def test_saved_progress_is_the_final_one():
    # The progress views' outputs hold the final snapshot (display-id HTML, re-sent by the cell awaiting the run).
    nb = _load(REPO / "notebooks" / "02_recursive_tree.ipynb")
    outputs = [o["data"] for cell in nb["cells"] for o in cell.get("outputs", []) if "text/html" in o.get("data", {})]
    progress = ["".join(d["text/html"]) for d in outputs if ">LLM calls<" in "".join(d["text/html"])]
    assert len(progress) == 2 and all(">completed<" in v and ">running<" in v for v in progress)
    assert not [d for d in outputs if ">LLM calls<" in "".join(d["text/html"]) and WIDGET_VIEW in d]
