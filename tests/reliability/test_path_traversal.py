"""Ids and paths that try to leave their directory are refused at every entry point.

Next to the store's base directory lies `outside/` holding a secret and a copy of a real
`meta.json` whose task is the secret: a store that joined `../outside` to its base would
serve it. Every entry point below gets traversal ids and must refuse them, never serve the
secret, and never create a file:

- every public method of both stores (the list is taken from the class, so a new method
  without coverage fails `test_every_public_store_method_is_covered`);
- `cyber-agent show`;
- every route of the REST API with an id in its path (taken from the app), the WebSocket watch,
  the query filters and the `after_message_id` rewind point, and a symlink planted under the base;
- the tools: `read_file`, `list_files`, `read_context_ref`, `read_artifact`, `read_trajectory`,
  `submit_report` artifacts, `review_task` child ids, `agent(continue_from=...)` and the
  `context_refs` a brief grants; ids of another task tree in the same store are refused too.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from reliability_helpers import ROOT, PlanModel, brief, clean_agent_env, recursive_config, tool_context  # noqa: F401

from cyber_agent import cli
from cyber_agent.core.runner import AgentRunner
from cyber_agent.errors import InvalidIdError
from cyber_agent.trace import FileSystemTraceStore, Goal, GoalTree, InMemoryTraceStore, Message, Trace
from cyber_agent.trace.records import TraceRecord
from cyber_agent.trace.sqlite_store import SQLiteTraceStore
from cyber_agent.trace.store_base import BaseTraceStore
from cyber_agent.trace.store_url import open_store
from tests import pg_server

SECRET = "TOP-SECRET-7f3a9c"
BAD_TRACE_IDS = ["..", "../outside", "../../etc", "outside/../..", "/etc/passwd", "a/../../outside", ".",
                 "..\\outside", "x\x00y", "%2e%2e", ".outside", "", "a" * 400]
BAD_MESSAGE_IDS = ["../outside-0001", "..-0001", "/etc/passwd-0001", "a/../../outside-0001", "x\x00-0001", "-0001"]


def _snapshot(tmp: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if "__pycache__" not in p.parts)


class Tree:
    """Two finished recursive trees in one file store, next to a planted `outside/` directory."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.base, self.workspace = tmp, tmp / "store", tmp / "workspace"
        self.workspace.mkdir()
        (self.workspace / "data.txt").write_text("inside\n")
        self.loop = asyncio.new_event_loop()
        self.store = FileSystemTraceStore(self.base)
        self.model = PlanModel(lambda o: ["child a", "child b"] if o == ROOT else [])
        self.runner = AgentRunner(trace_store=self.store, llm_call=self.model.llm, workspace=self.workspace)
        self.roots = [self.run(recursive_config()).trace for _ in range(2)]
        traces = self.run_coro(self.store.list_traces(limit=None))
        self.root = self.roots[0]
        self.child = next(t for t in traces if t.parent_trace_id == self.root.trace_id
                          and t.lineage.created_by_tool == "agent")
        self.validator = next(t for t in traces if t.parent_trace_id == self.child.trace_id
                              and t.lineage.created_by_tool == "validator")
        self.other_child = next(t for t in traces if t.parent_trace_id == self.roots[1].trace_id
                                and t.lineage.created_by_tool == "agent")
        outside = tmp / "outside"
        (outside / "messages").mkdir(parents=True)
        (outside / "secret.txt").write_text(SECRET)
        meta = json.loads((self.base / self.root.trace_id / "meta.json").read_text())
        (outside / "meta.json").write_text(json.dumps({**meta, "task": SECRET}))
        self.run_coro(self.store.flush())
        self.calls_after_setup = self.model.calls.total()

    def run(self, config: Any) -> Any:
        return self.run_coro(self.runner.run_result([{"role": "user", "content": ROOT}], config))

    def run_coro(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def tool(self, name: str, arguments: dict[str, Any], trace: Trace) -> Any:
        ctx = tool_context(self.runner, trace, self.root if trace.trace_id.startswith(self.root.trace_id)
                           else self.roots[1], self.workspace)
        allowed = frozenset(self.runner.tool_registry.names())
        return self.run_coro(self.runner.tool_registry.execute(name, arguments, allowed=allowed, context=ctx))


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    import os

    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("AGENT_")}
    try:
        tree = Tree(tmp_path_factory.mktemp("traversal"))
    finally:
        os.environ.update(saved)
    yield tree
    tree.loop.close()


# ---- stores ---------------------------------------------------------------------------------------
STORE_CALLS: dict[str, Callable[[BaseTraceStore, str], Any]] = {
    "create_trace": lambda s, bad: s.create_trace(Trace.model_construct(trace_id=bad, task="x")),
    "get_trace": lambda s, bad: s.get_trace(bad),
    "require_trace": lambda s, bad: s.require_trace(bad),
    "update_trace": lambda s, bad: s.update_trace(bad, status="failed"),
    "end_trace": lambda s, bad: s.end_trace(bad, {"status": "completed"}, goal=("1", {"status": "completed"})),
    "get_resource_usage": lambda s, bad: s.get_resource_usage(bad),
    "replace_resource_usage": lambda s, bad: s.replace_resource_usage(bad, {"llm_calls": 1}),
    "get_tool_approvals": lambda s, bad: s.get_tool_approvals(bad),
    "replace_tool_approvals": lambda s, bad: s.replace_tool_approvals(bad, {"batches": []}),
    "get_goal_tree": lambda s, bad: s.get_goal_tree(bad),
    "update_goal_tree": lambda s, bad: s.update_goal_tree(bad, GoalTree()),
    "add_goal": lambda s, bad: s.add_goal(bad, Goal(id="1", description="g")),
    "update_goal": lambda s, bad: s.update_goal(bad, "1", status="completed"),
    "add_message": lambda s, bad: s.add_message(Message.model_construct(trace_id=bad, role="user", content="x")),
    "add_messages": lambda s, bad: s.add_messages([Message.model_construct(trace_id=bad, role="user", content="x")]),
    "get_trace_messages": lambda s, bad: s.get_trace_messages(bad),
    "get_main_path_messages": lambda s, bad: s.get_main_path_messages(bad),
    "get_messages_by_goal": lambda s, bad: s.get_messages_by_goal(bad, "1"),
    "append_event": lambda s, bad: s.append_event(bad, "progress", {}),
    "get_events": lambda s, bad: s.get_events(bad),
    "append_exchange": lambda s, bad: s.append_exchange(bad, {"key": "k"}),
    "get_exchanges": lambda s, bad: s.get_exchanges(bad),
    "read_records": lambda s, bad: s.read_records([bad]),
    "get_message": lambda s, bad: s.get_message(f"{bad}-0001"),
    "update_message": lambda s, bad: s.update_message(f"{bad}-0001", description="x"),
    "update_resource_usage": lambda s, bad: s.update_resource_usage(bad, lambda current: {"llm_calls": 1}),
    "request_stop": lambda s, bad: s.request_stop(bad, "stop"),
    "clear_stop": lambda s, bad: s.clear_stop(bad),
    "get_stop_requests": lambda s, bad: s.get_stop_requests(["ok-id", bad]),
    "import_records": lambda s, bad: s.import_records(
        [TraceRecord(trace={**Trace.create(task="x").model_dump(mode="json"), "trace_id": bad})]),
}
NOT_ID_TAKING = {"list_traces", "list_traces_report", "flush"}
"""Public methods without an id argument: list filters are compared, never joined to a path."""


def test_every_public_store_method_is_covered():
    public = {name for name, fn in inspect.getmembers(BaseTraceStore, inspect.iscoroutinefunction)
              if not name.startswith("_")}
    assert public - NOT_ID_TAKING == set(STORE_CALLS), "cover the new store method here"


@pytest.mark.parametrize("kind", ["file", "memory", "sqlite"] + (["postgres"] if pg_server.available() or pg_server.required() else []))
@pytest.mark.parametrize("method", sorted(STORE_CALLS))
def test_store_methods_refuse_traversal_ids(tree, kind, method, tmp_path_factory):
    store: BaseTraceStore
    if kind == "postgres":
        store = open_store(pg_server.server().schema_url(pg_server.schema_for(f"traversal-{method}")))
    elif kind == "sqlite":  # the database lives outside the snapshotted tree (its WAL files change on reads)
        store = SQLiteTraceStore(tmp_path_factory.mktemp("db") / "runs.db")
    else:
        store = FileSystemTraceStore(tree.base) if kind == "file" else InMemoryTraceStore()
    before = _snapshot(tree.tmp)
    for bad in BAD_TRACE_IDS:
        with pytest.raises(InvalidIdError):
            tree.run_coro(STORE_CALLS[method](store, bad))
    if method in ("get_message", "update_message"):
        for bad in BAD_MESSAGE_IDS:
            call = store.get_message(bad) if method == "get_message" else store.update_message(bad, description="x")
            with pytest.raises(InvalidIdError):
                tree.run_coro(call)
    assert _snapshot(tree.tmp) == before


def test_list_filters_never_reach_outside(tree):
    store = FileSystemTraceStore(tree.base)
    for bad in BAD_TRACE_IDS:
        traces = tree.run_coro(store.list_traces(parent_trace_id=bad, created_by_tool=bad, uid=bad, limit=None))
        assert traces == []
        report = tree.run_coro(store.list_traces_report(parent_trace_id=bad, created_by_tool=bad, uid=bad, limit=None))
        assert report.traces == []
    assert SECRET not in json.dumps([t.model_dump(mode="json") for t in tree.run_coro(store.list_traces(limit=None))])


# ---- command line ---------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["../outside", "..", "/etc/passwd", "a/../../outside"])
def test_cli_show_refuses_traversal_ids(tree, bad, capsys):
    code = cli.main(["--store", str(tree.base), "show", bad])
    out = capsys.readouterr()
    assert code != 0 and SECRET not in out.out + out.err
    assert "invalid trace id" in out.err or "no trace" in out.err


# ---- REST API -------------------------------------------------------------------------------------
api = pytest.importorskip("cyber_agent.server.app", reason="the REST API (cyber_agent/server/query_api.py) is not there yet")
URL_IDS = ["..", "%2e%2e", "..%2Foutside", "%2E%2E%2F%2E%2E%2Foutside", "..%5Coutside", "outside%00", "....",
           "a%2F..%2F..%2Foutside", ".outside"]


def _client(tree: Tree) -> tuple[httpx.AsyncClient, Any]:
    app = api.create_app(store=tree.store, runner=tree.runner)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost"), app


def test_every_api_route_with_an_id_refuses_traversal(tree):
    client, app = _client(tree)
    # From the OpenAPI document: every HTTP route the app serves, whatever router holds it.
    routes = [(path, sorted(m.upper() for m in ops)) for path, ops in app.openapi()["paths"].items() if "{" in path]
    assert any("{trace_id}" in path for path, _ in routes)
    bodies = {"POST": {"messages": [{"role": "user", "content": "x"}], "decisions": []}}

    async def sweep() -> list[str]:
        problems = []
        async with client:
            for path, methods in routes:
                for method in methods:
                    for bad in URL_IDS:
                        url = path.replace("{trace_id}", bad).replace("{batch_id}", bad).replace("{extraction_id}", bad)
                        response = await client.request(method, url, json=bodies.get(method))
                        if response.status_code < 400 or response.status_code >= 500 or SECRET in response.text:
                            problems.append(f"{method} {url} -> {response.status_code} {response.text[:120]}")
        return problems

    before = _snapshot(tree.tmp)
    assert tree.run_coro(sweep()) == []
    assert _snapshot(tree.tmp) == before


def test_api_query_filters_and_rewind_points_never_reach_outside(tree):
    client, _app = _client(tree)

    async def probe() -> list[httpx.Response]:
        async with client:
            out = [await client.get("/api/traces", params={"parent_trace_id": bad, "created_by_tool": bad})
                   for bad in ["../outside", "..", "/etc"]]
            for bad in BAD_MESSAGE_IDS[:4]:
                out.append(await client.post(f"/api/traces/{tree.root.trace_id}/run",
                                             json={"messages": [], "after_message_id": bad}))
            return out
    for response in tree.run_coro(probe()):
        assert SECRET not in response.text
        assert response.status_code == 422 or response.json().get("traces") == [], response.text[:200]


def test_api_refuses_a_symlink_planted_under_the_base(tree):
    planted = tree.base / "planted"
    planted.symlink_to(tree.tmp / "outside", target_is_directory=True)
    try:
        client, _app = _client(tree)

        async def get() -> httpx.Response:
            async with client:
                return await client.get("/api/traces/planted")
        response = tree.run_coro(get())
        assert response.status_code in (404, 422) and SECRET not in response.text
    finally:
        planted.unlink()


def test_websocket_watch_refuses_traversal_ids(tree):
    from starlette.testclient import TestClient, WebSocketDenialResponse
    from starlette.websockets import WebSocketDisconnect

    app = api.create_app(store=tree.store, runner=tree.runner)
    with TestClient(app, base_url="http://localhost") as client:
        for bad in URL_IDS:
            try:
                with client.websocket_connect(f"ws://localhost/api/traces/{bad}/watch"):
                    pytest.fail(f"watch accepted the id {bad!r}")
            except WebSocketDenialResponse as denied:  # the id reached the endpoint and was refused
                assert denied.status_code in (404, 422) and SECRET not in denied.text, (bad, denied.text)
            except WebSocketDisconnect:  # the decoded path holds a '/': no route, closed before accepting
                pass


# ---- tools ----------------------------------------------------------------------------------------
def _refused(result: Any) -> None:
    assert result.is_error, result.content[:300]
    assert SECRET not in result.content and "inside" != result.content.strip()


@pytest.mark.parametrize("path", ["../outside/secret.txt", "../../etc/passwd", "/etc/passwd", "~/.bashrc",
                                  "data.txt/../../outside/secret.txt", "data.txt\x00", "link/secret.txt"])
def test_read_file_refuses_paths_outside_the_workspace(tree, path):
    link = tree.workspace / "link"
    if not link.exists():
        link.symlink_to(tree.tmp / "outside", target_is_directory=True)
    _refused(tree.tool("read_file", {"path": path}, tree.child))


@pytest.mark.parametrize("arguments", [{"path": ".."}, {"path": "../outside"}, {"path": "/"}, {"path": "link"},
                                       {"path": ".", "pattern": "../*"}, {"path": ".", "pattern": "../outside/*"},
                                       {"path": ".", "pattern": "**/../../*"}, {"path": ".", "pattern": "/etc/*"},
                                       {"path": ".", "pattern": "link/*"}])
def test_list_files_never_lists_outside_the_workspace(tree, arguments):
    link = tree.workspace / "link"
    if not link.exists():
        link.symlink_to(tree.tmp / "outside", target_is_directory=True)
    result = tree.tool("list_files", arguments, tree.child)
    assert "secret.txt" not in result.content and SECRET not in result.content
    if not result.is_error and not result.content.startswith("(no entries"):
        root = tree.workspace.resolve()
        for entry in result.content.splitlines():
            resolved = (root / entry).resolve()
            assert resolved == root or resolved.is_relative_to(root), f"listed {entry!r}, outside the workspace"


@pytest.mark.parametrize(("tool", "role", "make_args"), [
    ("read_context_ref", "child", lambda t, bad: {"ref_id": bad}),
    ("read_artifact", "validator", lambda t, bad: {"message_id": f"{bad}-0001"}),
    ("read_trajectory", "validator", lambda t, bad: {"trace_id": bad}),
    ("read_trajectory", "validator", lambda t, bad: {"trace_id": f"{t.child.trace_id}@{bad}"}),
    ("submit_report", "child", lambda t, bad: {"outcome": "completed", "summary": "s",
                                               "artifacts": [{"message_id": f"{bad}-0002"}]}),
    ("review_task", "root", lambda t, bad: {"child_trace_id": bad, "decision": "accept"}),
    ("agent", "root", lambda t, bad: {"task_brief": brief("revise"), "continue_from": bad}),
    ("agent", "child", lambda t, bad: {"task_brief": {**brief("granted"), "context_refs": [{"message_id": f"{bad}-0001"}]}}),
    ("agent", "child", lambda t, bad: {"task_brief": {**brief("granted"), "context_refs": [{"report_of": bad}]}}),
])
def test_protocol_tools_refuse_traversal_and_foreign_ids(tree, tool, role, make_args):
    caller = {"root": tree.root, "child": tree.child, "validator": tree.validator}[role]
    before = _snapshot(tree.tmp)
    for bad in ["../outside", "..", "/etc/passwd", "a/../../outside", tree.other_child.trace_id,
                tree.roots[1].trace_id]:
        _refused(tree.tool(tool, make_args(tree, bad), caller))
    assert _snapshot(tree.tmp) == before
    assert tree.model.calls.total() == tree.calls_after_setup, "a refused call reached the model"


def test_nothing_was_created_or_run_by_refused_tool_calls(tree):
    traces = tree.run_coro(FileSystemTraceStore(tree.base).list_traces(limit=None))
    business = [t for t in traces if t.lineage.created_by_tool != "validator"]
    assert len(business) == 6, "two roots with two children each, plus nothing from refused calls"
