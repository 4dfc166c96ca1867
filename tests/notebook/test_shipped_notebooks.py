"""The shipped notebooks reopen cleanly: every widget they show has its saved state, their kernelspec is the one
JupyterLab records (so opening one does not rewrite it), no magic is needed for figures, and no cell deletes data."""

from __future__ import annotations

import json
import re

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from nb_helpers import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
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
def test_every_widget_shown_has_its_state_saved(path):
    nb = _load(path)
    state = nb["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    shown = [o["data"][WIDGET_VIEW]["model_id"] for cell in nb["cells"] for o in cell.get("outputs", [])
             if WIDGET_VIEW in o.get("data", {})]
    missing = [model for model in shown if model not in state]
    assert not missing, f"{path.name}: widgets without saved state would read 'model not found': {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_magic_and_no_deletion(path):
    sources = ["".join(cell["source"]) for cell in _load(path)["cells"] if cell["cell_type"] == "code"]
    assert not any("%matplotlib" in s for s in sources), "figures display without magic"
    assert not [s for s in sources if DELETES.search(s)], "a reader explores the data after Run All"


def test_saved_progress_is_the_final_one():
    # A finished progress view replaced its widget by the static final snapshot (no widget to restore on reopen).
    nb = _load(REPO / "notebooks" / "02_recursive_tree.ipynb")
    outputs = [o["data"] for cell in nb["cells"] for o in cell.get("outputs", []) if "text/html" in o.get("data", {})]
    progress = ["".join(d["text/html"]) for d in outputs if ">LLM calls<" in "".join(d["text/html"])]
    assert len(progress) == 2 and all(">completed<" in v and ">running<" in v for v in progress)
    assert not [d for d in outputs if ">LLM calls<" in "".join(d["text/html"]) and WIDGET_VIEW in d]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_html_widget_outputs_fall_back_to_their_final_value(path):
    nb = _load(path)
    state = nb["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            model = state.get(view["model_id"], {}) if view else {}
            if model.get("model_name") == "HTMLModel":
                html = output["data"]["text/html"]  # nbformat stores text as a list of lines
                assert ("".join(html) if isinstance(html, list) else html) == model["state"]["value"]
