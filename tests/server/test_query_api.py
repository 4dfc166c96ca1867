"""Query endpoints (seed 003, 1–3) over a finished legacy and a finished recursive demo run."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from live_server import ServerProcess, start_run, wait_idle


@pytest.fixture(scope="module")
def demo_runs(server: ServerProcess) -> dict[str, Any]:
    """One legacy and one recursive demo run on the shared server, finished."""
    with server.client() as http:
        legacy = start_run(http, DEMO_TASK, agent_mode="legacy", name="legacy demo", uid="u-query")
        recursive = start_run(http, DEMO_TASK, agent_mode="recursive", root_task_anchor=DEMO_ANCHOR, uid="u-query")
        return {"legacy": wait_idle(http, legacy), "recursive": wait_idle(http, recursive)}


def test_both_demo_runs_complete_with_the_right_answer(demo_runs: dict[str, Any]):
    for trace in demo_runs.values():
        assert trace["status"] == "completed", trace["error_message"]
        assert "North" in trace["result_summary"]
    assert demo_runs["recursive"]["lineage"]["mode"] == "recursive"
    assert demo_runs["legacy"]["lineage"]["mode"] == "legacy"


def test_list_filters_apply_before_the_limit(client: httpx.Client, demo_runs: dict[str, Any]):
    root = demo_runs["recursive"]["trace_id"]
    children = client.get("/api/traces", params={"parent_trace_id": root, "limit": 1000}).json()["traces"]
    assert children and all(t["parent_trace_id"] == root for t in children)
    agents = client.get("/api/traces", params={"parent_trace_id": root, "created_by_tool": "agent"}).json()["traces"]
    validators = client.get("/api/traces", params={"parent_trace_id": root, "created_by_tool": "validator"}).json()["traces"]
    assert agents and validators and len(agents) + len(validators) == len(children)
    one = client.get("/api/traces", params={"parent_trace_id": root, "limit": 1}).json()["traces"]
    assert len(one) == 1 and one[0]["parent_trace_id"] == root
    mine = client.get("/api/traces", params={"uid": "u-query", "mode": "agent", "status": "completed"}).json()["traces"]
    assert {t["trace_id"] for t in mine} == {demo_runs["legacy"]["trace_id"], root}


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 100000}, {"status": "sleeping"}, {"mode": "robot"}])
def test_invalid_list_parameters_are_422(client: httpx.Client, params: dict[str, Any]):
    assert client.get("/api/traces", params=params).status_code == 422


def test_trace_detail_holds_the_goal_tree_and_sub_traces_with_validators_marked(client: httpx.Client, demo_runs):
    root = demo_runs["recursive"]["trace_id"]
    detail = client.get(f"/api/traces/{root}").json()
    assert detail["trace"]["trace_id"] == root
    assert detail["goal_tree"]["goals"], "the goal tree is returned"
    tools = {s["created_by_tool"] for s in detail["sub_traces"]}
    assert tools == {"agent", "validator"}
    for sub in detail["sub_traces"]:
        assert sub["parent_trace_id"] == root and sub["created_by_tool"] == sub["lineage"]["created_by_tool"]
        if sub["created_by_tool"] == "validator":
            assert sub["agent_type"] == "validator"


def test_messages_main_path_all_head_and_goal(client: httpx.Client, demo_runs: dict[str, Any]):
    trace = demo_runs["legacy"]
    trace_id, head = trace["trace_id"], trace["head_sequence"]
    main = client.get(f"/api/traces/{trace_id}/messages").json()
    assert main["mode"] == "main_path" and main["head_sequence"] == head
    assert [m["sequence"] for m in main["messages"]][-1] == head
    assert main["messages"][0]["role"] == "system"
    every = client.get(f"/api/traces/{trace_id}/messages", params={"mode": "all"}).json()
    assert every["head_sequence"] is None and len(every["messages"]) == trace["total_messages"]
    short = client.get(f"/api/traces/{trace_id}/messages", params={"head": 3}).json()
    assert [m["sequence"] for m in short["messages"]] == [1, 2, 3]
    goal = next(m["goal_id"] for m in main["messages"] if m["goal_id"])
    by_goal = client.get(f"/api/traces/{trace_id}/messages", params={"goal_id": goal}).json()["messages"]
    assert by_goal and all(m["goal_id"] == goal for m in by_goal)
    assert client.get(f"/api/traces/{trace_id}/messages", params={"goal_id": "no-such-goal"}).json()["messages"] == []
    beyond = client.get(f"/api/traces/{trace_id}/messages", params={"head": trace["total_messages"] + 1})
    assert beyond.status_code == 422 and "head" in beyond.json()["detail"]


def test_unknown_traces_are_404(client: httpx.Client):
    missing = "00000000-0000-4000-8000-000000000000"
    for path in ("", "/messages", "/tool-approvals/pending"):
        response = client.get(f"/api/traces/{missing}{path}")
        assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert client.post(f"/api/traces/{missing}/stop").status_code == 404


@pytest.mark.parametrize("raw", [
    "..", "...", "a..b", "..%2F..%2Fetc", "%2e%2e", "%2e%2e%2fmeta", "x%00y", "-leading-dash", "a" * 300,
    "..%5C..%5Cwin", "%252e%252e",
])
def test_ids_that_could_escape_the_store_are_refused_with_4xx(server: ServerProcess, client: httpx.Client, raw: str):
    for suffix in ("", "/messages"):
        response = client.get(f"/api/traces/{raw}{suffix}")
        assert 400 <= response.status_code < 500, (raw, response.status_code, response.text)
    assert 400 <= client.post(f"/api/traces/{raw}/run", json={}).status_code < 500
    # Nothing outside the store was created or read as a trace.
    assert not (server.store_path.parent / "meta.json").exists()
