"""The import direction of the house style: llm is the lowest leaf, trace never imports core or
server, tools depend on trace and llm, HTTP routing lives in server, nothing imports notebook."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cyber_agent"
# The runner's own tools start children and validators, so they may reach into core/.
TOOLS_ALLOWED_TO_USE_CORE = {"subagent.py", "protocol_tools.py", "web_tools.py", "self_heal.py"}
# The seed's paths of two server modules (seed 003); each only re-exports cyber_agent/server/.
TRACE_SEED_REEXPORTS = ("api.py", "websocket.py")


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """All nodes except those under `if TYPE_CHECKING:` (type-only imports create no dependency)."""
    out: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def imports_of(path: Path, prefix: str = "cyber_agent") -> set[str]:
    names: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.startswith(prefix)}


def modules(sub: str) -> list[Path]:
    return sorted((PACKAGE / sub).rglob("*.py"))


def test_trace_never_imports_core_tools_server_or_notebook():
    for path in modules("trace"):
        upper = ("cyber_agent.core", "cyber_agent.tools", "cyber_agent.server", "cyber_agent.notebook")
        if path.name in TRACE_SEED_REEXPORTS:
            continue  # checked by test_trace_seed_paths_only_re_export_the_server
        bad = {n for n in imports_of(path) if n.startswith(upper)}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_trace_seed_paths_only_re_export_the_server():
    """trace/api.py and trace/websocket.py: a docstring, imports from server/ and `__all__`, nothing else."""
    for name in TRACE_SEED_REEXPORTS:
        tree = ast.parse((PACKAGE / "trace" / name).read_text(encoding="utf-8"))
        body = tree.body
        assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant), f"trace/{name}: no docstring"
        for node in body[1:]:
            if isinstance(node, ast.ImportFrom):
                assert node.module and node.module.startswith("cyber_agent.server."), f"trace/{name} imports {node.module}"
            else:
                assert isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__", (
                    f"trace/{name} holds more than a re-export: {ast.unparse(node)[:80]}")


def test_http_routing_lives_in_server():
    for path in PACKAGE.rglob("*.py"):
        if "server" in path.relative_to(PACKAGE).parts or path.name in TRACE_SEED_REEXPORTS:
            continue
        bad = {n for n in imports_of(path, prefix="") if n.split(".")[0] in ("fastapi", "starlette")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}: routes belong in cyber_agent/server/"


def test_llm_imports_only_errors_and_itself():
    for path in modules("llm"):
        bad = {n for n in imports_of(path) if not (n == "cyber_agent.errors" or n.startswith("cyber_agent.llm"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_tools_do_not_import_core_except_the_runner_tools():
    for path in modules("tools"):
        if path.name in TOOLS_ALLOWED_TO_USE_CORE:
            continue
        bad = {n for n in imports_of(path) if n.startswith(("cyber_agent.core", "cyber_agent.notebook"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


ENTRY_POINTS_USING_NOTEBOOK = {"cli/_store.py"}
"""The CLI is an entry point on top of the package, like the server: its export/import commands
use the notebook's export format (loaded inside the command, never at import)."""


def test_nothing_imports_notebook():
    for path in PACKAGE.rglob("*.py"):
        if "notebook" in path.relative_to(PACKAGE).parts or path.relative_to(PACKAGE).as_posix() in ENTRY_POINTS_USING_NOTEBOOK:
            continue
        bad = {n for n in imports_of(path) if n.startswith("cyber_agent.notebook")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_importing_the_cli_loads_no_notebook_module():
    code = "import sys, cyber_agent.cli; print(sorted(m for m in sys.modules if m.startswith('cyber_agent.notebook')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_modules_stay_under_the_defect_size():
    for path in PACKAGE.rglob("*.py"):
        lines = path.read_text(encoding="utf-8").count("\n")
        assert lines <= 800, f"{path.relative_to(ROOT)} has {lines} lines; split it by responsibility"


PROVIDER_MODULES = ("cyber_agent.llm.openai_compat", "cyber_agent.llm.anthropic", "cyber_agent.llm.http_retry",
                    "cyber_agent.llm.resolve", "cyber_agent.core")


@pytest.mark.parametrize("leaf", ["cyber_agent.trace.models", "cyber_agent.llm.types"])
def test_importing_a_leaf_type_loads_neither_httpx_nor_a_provider(leaf):
    code = f"import {leaf}, sys, json; print(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=ROOT)
    loaded = set(json.loads(out.stdout))
    assert leaf in loaded  # the probe really imported it
    heavy = sorted(m for m in loaded if m == "httpx" or m.startswith(PROVIDER_MODULES))
    assert not heavy, f"import {leaf} also loads {heavy}"


def test_lazy_package_exports_still_resolve_in_a_fresh_process():
    code = ("import cyber_agent, cyber_agent.llm as llm; "
            "assert cyber_agent.AgentRunner.__module__ == 'cyber_agent.core.runner'; "
            "assert llm.OpenAICompatModel.__module__ == 'cyber_agent.llm.openai_compat'; "
            "from cyber_agent.llm import ScriptedModel, AnthropicModel; from cyber_agent import RunConfig")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def _core_imports(path: Path) -> set[str]:
    """Every `cyber_agent.core.*` module `path` imports: at top level, in functions and under `if TYPE_CHECKING:`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module == "cyber_agent.core":  # `from cyber_agent.core import runner`
                names.update(f"cyber_agent.core.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.startswith("cyber_agent.core.")}


def core_import_graph():
    import networkx as nx

    graph = nx.DiGraph()
    for path in sorted((PACKAGE / "core").glob("*.py")):
        module = f"cyber_agent.core.{path.stem}"
        graph.add_node(module)
        graph.add_edges_from((module, target) for target in _core_imports(path) if target != module)
    return graph


def test_core_import_graph_is_acyclic():
    """No module of core/ imports itself back, not even for types: collaborators get state, not the runner."""
    import networkx as nx

    graph = core_import_graph()
    assert graph.has_edge("cyber_agent.core.runner", "cyber_agent.core.turn")  # the graph sees the real imports
    if not nx.is_directed_acyclic_graph(graph):
        cycle = " -> ".join(a for a, _ in nx.find_cycle(graph))
        pytest.fail(f"import cycle in cyber_agent/core: {cycle}")


def test_core_import_graph_counts_type_only_imports(tmp_path: Path):
    """An import under `if TYPE_CHECKING:` is an edge, so a type-only cycle fails the test above."""
    source = tmp_path / "mod.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cyber_agent.core.runner import AgentRunner\n"
                      "def f():\n    from cyber_agent.core import turn\n", encoding="utf-8")
    assert _core_imports(source) == {"cyber_agent.core.runner", "cyber_agent.core.turn"}


def test_test_modules_have_unique_basenames():
    """pytest's default import mode puts each test directory on sys.path: two test files with one name clash."""
    names: dict[str, list[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    clashes = {name: paths for name, paths in names.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
