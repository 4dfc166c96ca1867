"""The import direction of the house style, checked between packages and inside core/ and protocol/.

Packages form layers (`LAYERS`): each imports only packages of lower layers — at module level,
inside functions and under `if TYPE_CHECKING:` alike — so no two packages import each other.
The only exemption is by exact path: the seed's `trace/api.py` and `trace/websocket.py`, which
only re-export `server/`. `llm/` is the lowest leaf, `tools/` imports neither `core/` nor
`protocol/`, HTTP routing lives in `server/`, nothing imports `notebook/`.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cyber_agent"
# The seed's paths of two server modules (seed 003); each only re-exports cyber_agent/server/.
TRACE_SEED_REEXPORTS = ("api.py", "websocket.py")
SEED_SHIMS = frozenset(f"trace/{name}" for name in TRACE_SEED_REEXPORTS)
"""Paths (relative to cyber_agent/) left out of the package graph, by exact name."""

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "_lazy"}),
    frozenset({"llm"}),
    frozenset({"trace"}),
    frozenset({"tools"}),
    frozenset({"protocol"}),
    frozenset({"core"}),
    frozenset({"analysis"}),
    frozenset({"experiments", "importers", "otel", "server"}),
    frozenset({"notebook"}),
    frozenset({"cli", "__init__"}),
)
"""Packages (and top-level modules) from the bottom up; a unit imports only units of lower layers."""


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


def all_imports_of(path: Path) -> set[str]:
    """Every `cyber_agent.*` module `path` imports: at top level, in functions and under `if TYPE_CHECKING:`.

    `from cyber_agent.core import runner` counts as an import of `cyber_agent.core.runner`.
    """
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.startswith("cyber_agent.")}


def unit_of_module(module: str) -> str | None:
    """The package (or top-level module) a dotted `cyber_agent.x...` name belongs to; None for `cyber_agent` itself."""
    parts = module.split(".")
    if len(parts) < 2:
        return "__init__"
    name = parts[1]
    if (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file():
        return name
    return None  # `from cyber_agent import X` resolves X (a module or a name of __init__): see below


def unit_of_path(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def package_graph():
    """Directed graph of units (packages, top-level modules); each edge holds the files that make it."""
    import networkx as nx

    graph = nx.DiGraph()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).as_posix() in SEED_SHIMS:
            continue
        source = unit_of_path(path)
        graph.add_node(source)
        for module in all_imports_of(path):
            target = unit_of_module(module)
            if target is None or target == source:
                continue
            if not graph.has_edge(source, target):
                graph.add_edge(source, target, files=set())
            graph.edges[source, target]["files"].add(path.relative_to(ROOT).as_posix())
    return graph


def _layer(unit: str) -> int:
    for index, layer in enumerate(LAYERS):
        if unit in layer:
            return index
    raise AssertionError(f"cyber_agent/{unit} is in no layer of tests/test_layout.py:LAYERS; add it where it belongs")


def test_packages_import_only_lower_layers():
    graph = package_graph()
    assert graph.has_edge("core", "protocol") and graph.has_edge("protocol", "tools")  # the graph sees real imports
    bad = [f"{a} -> {b} ({', '.join(sorted(graph.edges[a, b]['files']))})"
           for a, b in graph.edges if _layer(b) >= _layer(a)]
    assert not bad, "imports against the layer order:\n" + "\n".join(sorted(bad))


def test_no_import_circle_between_packages():
    """Type-only and function-level imports count: a circle through `if TYPE_CHECKING:` fails too."""
    import networkx as nx

    graph = package_graph()
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, "import circles between packages: " + "; ".join(" -> ".join([*c, c[0]]) for c in cycles)


def test_tools_import_neither_core_nor_protocol():
    for path in modules("tools"):
        bad = {n for n in all_imports_of(path)
               if n.startswith(("cyber_agent.core", "cyber_agent.protocol", "cyber_agent.notebook"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_protocol_never_imports_core():
    for path in modules("protocol"):
        bad = {n for n in all_imports_of(path) if n.startswith(("cyber_agent.core", "cyber_agent.server"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}: reach the runner through protocol/ports.py"


def test_the_package_graph_counts_type_only_and_function_imports(tmp_path: Path):
    source = tmp_path / "mod.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cyber_agent.core.runner import AgentRunner\n"
                      "def f():\n    from cyber_agent.core import turn\n    import cyber_agent.protocol.mode\n", encoding="utf-8")
    found = all_imports_of(source)
    assert {"cyber_agent.core.runner", "cyber_agent.core.turn", "cyber_agent.protocol.mode"} <= found
    assert {unit_of_module(m) for m in found} == {"core", "protocol"}


def modules(sub: str) -> list[Path]:
    return sorted((PACKAGE / sub).rglob("*.py"))


def test_trace_never_imports_core_tools_server_or_notebook():
    for path in modules("trace"):
        upper = ("cyber_agent.core", "cyber_agent.tools", "cyber_agent.protocol", "cyber_agent.server",
                 "cyber_agent.notebook")
        if path.name in TRACE_SEED_REEXPORTS:
            continue  # checked by test_trace_seed_paths_only_re_export_the_server
        bad = {n for n in all_imports_of(path) if n.startswith(upper)}
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


LEAF_MODULES = frozenset({"cyber_agent.errors", "cyber_agent._lazy"})
"""Top-level modules that import nothing of the package (the error tree; the lazy-export helper)."""


def test_llm_imports_only_errors_and_itself():
    for path in modules("llm"):
        bad = {n for n in imports_of(path) if not (n in LEAF_MODULES or n.startswith("cyber_agent.llm"))}
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


def module_graph(sub: str):
    """Directed graph of the modules of one package, every kind of import counted (see `all_imports_of`)."""
    import networkx as nx

    graph = nx.DiGraph()
    prefix = f"cyber_agent.{sub}."
    names = {f"{prefix}{path.stem}" for path in (PACKAGE / sub).glob("*.py")}
    for path in sorted((PACKAGE / sub).glob("*.py")):
        module = f"{prefix}{path.stem}"
        graph.add_node(module)
        graph.add_edges_from((module, target) for target in all_imports_of(path) if target in names and target != module)
    return graph


@pytest.mark.parametrize(("sub", "edge"), [("core", ("cyber_agent.core.runner", "cyber_agent.core.turn")),
                                           ("protocol", ("cyber_agent.protocol.delegation", "cyber_agent.protocol.ports"))])
def test_module_graph_is_acyclic(sub: str, edge: tuple[str, str]):
    """No module of core/ or protocol/ imports itself back, not even for types: collaborators get state, not the runner."""
    import networkx as nx

    graph = module_graph(sub)
    assert graph.has_edge(*edge)  # the graph sees the real imports
    if not nx.is_directed_acyclic_graph(graph):
        cycle = " -> ".join(a for a, _ in nx.find_cycle(graph))
        pytest.fail(f"import cycle in cyber_agent/{sub}: {cycle}")


def test_test_modules_have_unique_basenames():
    """pytest's default import mode puts each test directory on sys.path: two test files with one name clash."""
    names: dict[str, list[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    clashes = {name: paths for name, paths in names.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"


_STORE_TABLES = ("traces", "messages", "events", "side_records", "exchanges", "schema_versions")
_SQL_NAMING_A_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+(?:" + "|".join(_STORE_TABLES) + r")\b")


def test_the_notebook_layer_names_no_store_table():
    """Frames are read through the stores' read methods (`read_records`, `read_columns`): notebook/ holds no SQL
    over a store's tables and no database driver, so a store's schema has one owner (trace/)."""
    offenders = []
    for path in sorted((PACKAGE / "notebook").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in _SQL_NAMING_A_TABLE.finditer(text):
            offenders.append(f"{path.relative_to(ROOT)}: {match.group(0)!r}")
        drivers = {name for name in imports_of(path, prefix="") if name.split(".")[0] in ("sqlite3", "psycopg", "adbc_driver_sqlite")}
        offenders.extend(f"{path.relative_to(ROOT)} imports {name}" for name in sorted(drivers))
    assert not offenders, offenders


def test_the_table_check_sees_sql():
    assert _SQL_NAMING_A_TABLE.search("SELECT data FROM messages WHERE trace_id = ?")
    assert not _SQL_NAMING_A_TABLE.search("from messages of the cell it is executing")
