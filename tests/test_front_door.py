"""The front door: every package's `__init__` exports its public API, and the exports cannot drift.

The rule for what is public (docs/README.md "Start here"): the names in a package's
`__init__.__all__`. Like httpx's export test, each `__init__` must bind exactly the names of its
`__all__` (by import, by a lazy `_LAZY` table mirrored under `TYPE_CHECKING`, or by definition),
`__all__` is sorted, and every name resolves (a lazy one on first use).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cyber_agent"
PACKAGES = ["cyber_agent", *sorted(f"cyber_agent.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py"))]
SUBMODULE_HELPERS = {"annotations", "importlib", "TYPE_CHECKING", "Any"}


def _init_path(package: str) -> Path:
    return PACKAGE.joinpath(*package.split(".")[1:], "__init__.py")


def _bound_names(package: str) -> tuple[set[str], set[str] | None, set[str] | None]:
    """(public names the __init__ binds at import, names of its lazy table, names imported under TYPE_CHECKING)."""
    tree = ast.parse(_init_path(package).read_text(encoding="utf-8"))
    bound: set[str] = set()
    lazy: set[str] | None = None
    typed: set[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            bound.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            name = ast.unparse(target)
            if name == "_LAZY" and node.value is not None:
                table = ast.literal_eval(node.value)
                lazy = {n for names in table.values() for n in names}
            elif name.isidentifier():
                bound.add(name)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typed = {alias.asname or alias.name for sub in node.body if isinstance(sub, ast.ImportFrom) for alias in sub.names}
    public = {n for n in bound if not n.startswith("_") and n not in SUBMODULE_HELPERS}
    return public, lazy, typed


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_sorted_and_matches_what_the_init_binds(package: str):
    module = importlib.import_module(package)
    exported = list(module.__all__)
    assert exported == sorted(exported) and len(set(exported)) == len(exported), f"{package}.__all__ is not sorted/unique"
    public, lazy, typed = _bound_names(package)
    declared = public | (lazy or set())
    assert set(exported) == declared, (
        f"{package}: __all__ and the __init__ disagree; only in __all__: {sorted(set(exported) - declared)}, "
        f"bound but not exported: {sorted(declared - set(exported))}")
    if lazy is not None:
        assert typed == lazy, f"{package}: the TYPE_CHECKING imports must mirror _LAZY (mypy sees those)"
    unresolved = [name for name in exported if not hasattr(module, name)]
    assert not unresolved, f"{package} exports names that do not resolve: {unresolved}"


def test_the_front_door_names_the_first_things_a_program_needs():
    import cyber_agent

    assert {"AgentRunner", "RunConfig", "RunResult", "open_store", "ToolRegistry", "TaskBrief"} <= set(cyber_agent.__all__)
    assert cyber_agent.AgentRunner.__module__ == "cyber_agent.core.runner"


def test_an_export_wins_over_its_same_named_submodule_imported_first() -> None:
    """`cyber_agent.notebook.launch` is both a module and the function it exports.

    Loaded lazily, whichever code imports the submodule first must not leave the package's
    `launch` (or `budget_table`) pointing at the module.
    """
    import subprocess
    import sys

    code = ("import cyber_agent.notebook.launch, cyber_agent.notebook.budget_table\n"
            "from cyber_agent.notebook import launch, budget_table\n"
            "import types\n"
            "assert not isinstance(launch, types.ModuleType), launch\n"
            "assert not isinstance(budget_table, types.ModuleType), budget_table\n"
            "from cyber_agent.notebook.launch import RunHandle\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
