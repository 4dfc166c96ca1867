"""Every notebook is what its generator builds: the `notebooks/build_*.py` scripts are the source.

A notebook edited in Jupyter and not in its generator would be overwritten by the next build;
this test fails first. It compares cell types and sources only (outputs come from executing),
and needs no kernel.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _generator(path: Path) -> ModuleType:
    if str(NOTEBOOKS) not in sys.path:
        sys.path.insert(0, str(NOTEBOOKS))  # the generators import each other by module name
    spec = importlib.util.spec_from_file_location(f"_nb_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _built() -> dict[str, tuple[str, Any]]:
    """Notebook name → (generator file, cells function), over every generator."""
    out: dict[str, tuple[str, Any]] = {}
    for path in sorted(NOTEBOOKS.glob("build_*.py")):
        for name, cells in _generator(path).NOTEBOOKS.items():
            assert name not in out, f"{name} is built by both {out[name][0]} and {path.name}"
            out[name] = (path.name, cells)
    return out


BUILT = _built()


def test_every_notebook_has_exactly_one_generator():
    committed = {path.name for path in NOTEBOOKS.glob("*.ipynb")}
    assert committed == set(BUILT), (f"without a generator: {sorted(committed - set(BUILT))}; "
                                     f"generated but not committed: {sorted(set(BUILT) - committed)}")


@pytest.mark.parametrize("name", sorted(BUILT))
def test_the_notebook_equals_what_its_generator_builds(name: str):
    generator, cells = BUILT[name]
    expected = [(cell.cell_type, cell.source) for cell in cells()]
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    actual = [(cell.cell_type, cell.source) for cell in notebook.cells]
    if actual != expected:
        diff = next((i for i, (a, e) in enumerate(zip(actual, expected)) if a != e), min(len(actual), len(expected)))
        pytest.fail(f"{name} differs from what notebooks/{generator} builds (first at cell {diff}; "
                    f"{len(actual)} vs {len(expected)} cells): edit the generator and rebuild with "
                    f"`.venv/bin/python notebooks/{generator} {name[:2]}`")
