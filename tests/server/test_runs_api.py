"""Control endpoints (seed 003, 4–7): create-and-run, continue, rewind, regenerate, stop, running."""

from __future__ import annotations

import uuid

import httpx
import pytest

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from live_server import ServerProcess, start_run, trace_of, wait_for, wait_idle


def gated_task(steps: int = 3) -> tuple[str, str]:
    name = f"gate-{uuid.uuid4().hex[:8]}"
    return name, f"gated: {name} {steps}"


def messages_of(http: httpx.Client, trace_id: str, **params: str) -> list[dict]:
    response = http.get(f"/api/traces/{trace_id}/messages", params=params)
    assert response.status_code == 200, response.text
    return response.json()["messages"]


def test_create_answers_with_the_id_at_once_and_runs_in_the_background(server: ServerProcess, client: httpx.Client):
    name, task = gated_task()
    response = client.post("/api/traces", json={"messages": [{"role": "user", "content": task}], "name": "bg"})
    assert response.status_code == 202
    body = response.json()
    trace_id = body["trace_id"]
    uuid.UUID(trace_id)  # a root id is a UUID (T2)
    assert body["status"] == "running" and body["trace"]["name"] == "bg"
    # The run is parked at the gate: the answer came before the run ended.
    assert trace_id in client.get("/api/traces/running").json()["trace_ids"]
    assert trace_of(client, trace_id)["status"] == "running"
    (server.work / name).touch()
    trace = wait_idle(client, trace_id)
    assert trace["status"] == "completed" and trace["result_summary"].startswith(f"gated {name} done")
    assert trace["run_config"]["hash"]


def test_create_takes_provider_settings_and_the_snapshot_records_them(server: ServerProcess, client: httpx.Client):
    body = {"messages": [{"role": "user", "content": DEMO_TASK}], "tool_dialect": "native",
            "provider": {"timeout": 5, "retries": 1, "stream": False, "prices": {"demo": {"input": 1, "output": 2}}}}
    response = client.post("/api/traces", json=body)
    assert response.status_code == 202, response.text
    trace = wait_idle(client, response.json()["trace_id"])
    config = trace["run_config"]["config"]
    assert (config["provider"]["timeout"], config["provider"]["retries"], config["provider"]["stream"]) == (5.0, 1, False)
    assert config["provider"]["prices"] == {"demo": {"input": 1.0, "output": 2.0, "cached_input": None}}
    assert config["tool_dialect"] == "native"


@pytest.mark.parametrize(("body", "field"), [
    ({"root_completion_criteria": ["x"]}, "root_completion_criteria"),
    ({"root_completion_criteria": None}, "root_completion_criteria"),
    ({"agent_mode": "recursive"}, "root_task_anchor"),
    ({"agent_mode": "recursive", "root_task_anchor": {"objective": "  ", "completion_criteria": ["c"]}}, "root_task_anchor"),
    ({"agent_mode": "recursive", "root_task_anchor": {"objective": "o", "completion_criteria": []}}, "root_task_anchor"),
    ({"agent_mode": "turbo"}, "agent_mode"),
    ({"max_parallel_children": 3}, "max_parallel_children"),
    ({"temperature": 7}, "temperature"),
    ({"max_iterations": 0}, "max_iterations"),
    ({"surprise": 1}, "surprise"),
    ({"messages": [{"role": "system", "content": "only a system prompt"}]}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "role"),
    ({"provider": {"timeout": 0}}, "timeout"),
    ({"provider": {"price_file": "/etc/passwd"}}, "price_file"),
    ({"tool_dialect": "json"}, "tool_dialect"),
])
def test_invalid_create_bodies_are_422_naming_the_field(client: httpx.Client, body: dict, field: str):
    response = client.post("/api/traces", json={"messages": [{"role": "user", "content": "echo"}], **body})
    assert response.status_code == 422, response.text
    assert field in response.text


def test_legacy_ignores_the_anchor_and_recursive_requires_it(client: httpx.Client):
    anchor = {"objective": "say echo", "completion_criteria": ["it says echo"]}
    trace_id = start_run(client, "echo", agent_mode="legacy", root_task_anchor=anchor)
    trace = wait_idle(client, trace_id)
    assert trace["status"] == "completed" and trace["root_setup"] is None


def test_continue_appends_after_the_head_and_keeps_the_snapshot(client: httpx.Client):
    trace_id = start_run(client, "echo", temperature=0.5)
    first = wait_idle(client, trace_id)
    assert first["result_summary"] == "echo 1" and first["head_sequence"] == 3
    response = client.post(f"/api/traces/{trace_id}/run", json={"messages": [{"role": "user", "content": "again"}]})
    assert response.status_code == 202 and response.json()["status"] == "running"
    second = wait_idle(client, trace_id)
    assert second["result_summary"] == "echo 2" and second["head_sequence"] == 5
    assert second["run_config"] == first["run_config"]
    assert [m["role"] for m in messages_of(client, trace_id)] == ["system", "user", "assistant", "user", "assistant"]


def test_rewind_and_regenerate_move_the_head_and_delete_nothing(client: httpx.Client):
    trace_id = start_run(client, "echo")
    wait_idle(client, trace_id)
    client.post(f"/api/traces/{trace_id}/run", json={"messages": [{"role": "user", "content": "again"}]})
    wait_idle(client, trace_id)
    path = messages_of(client, trace_id)
    user_task, first_answer = path[1], path[2]
    # Rewind after the first answer with a different follow-up.
    response = client.post(f"/api/traces/{trace_id}/run", json={
        "messages": [{"role": "user", "content": "other"}], "after_message_id": first_answer["message_id"]})
    assert response.status_code == 202, response.text
    trace = wait_idle(client, trace_id)
    main = messages_of(client, trace_id)
    assert [m["sequence"] for m in main] == [1, 2, 3, 6, 7] and main[3]["parent_sequence"] == 3
    assert trace["head_sequence"] == 7
    # Regenerate the first answer: no new messages, rewind to the user task.
    response = client.post(f"/api/traces/{trace_id}/run", json={"messages": [], "after_message_id": user_task["message_id"]})
    assert response.status_code == 202
    trace = wait_idle(client, trace_id)
    main = messages_of(client, trace_id)
    assert [m["sequence"] for m in main] == [1, 2, 8] and main[-1]["role"] == "assistant"
    assert len(messages_of(client, trace_id, mode="all")) == 8  # nothing deleted
    events = client.get(f"/api/traces/{trace_id}")  # the rewind is also in the event log (see test_watch)
    assert events.status_code == 200 and trace["status"] == "completed"


def test_invalid_rewind_points_are_422(client: httpx.Client):
    trace_id = start_run(client, "echo")
    wait_idle(client, trace_id)
    client.post(f"/api/traces/{trace_id}/run", json={"messages": [{"role": "user", "content": "again"}]})
    wait_idle(client, trace_id)
    client.post(f"/api/traces/{trace_id}/run", json={"messages": [], "after_message_id": f"{trace_id}-0002"})
    wait_idle(client, trace_id)  # main path is now 1, 2, 6; 3..5 are on a side of the tree
    other = start_run(client, "echo")
    wait_idle(client, other)
    for message_id, hint in [(f"{other}-0002", "belongs to trace"), (f"{trace_id}-0009", "after the head"),
                             (f"{trace_id}-0004", "not on the main path"), ("not-a-message", "message id"),
                             (f"../{trace_id}-0001", "invalid trace id")]:
        response = client.post(f"/api/traces/{trace_id}/run", json={"messages": [], "after_message_id": message_id})
        assert response.status_code == 422, (message_id, response.text)
        assert hint in response.json()["detail"], response.json()
    system = client.post(f"/api/traces/{trace_id}/run", json={"messages": [{"role": "system", "content": "new rules"}]})
    assert system.status_code == 422 and "system message" in system.json()["detail"]


def test_run_while_running_is_409_and_stop_ends_it_without_running_its_tools(server: ServerProcess, client: httpx.Client):
    name, task = gated_task(steps=5)
    trace_id = start_run(client, task)
    wait_for(lambda: trace_of(client, trace_id)["total_messages"] >= 4, "the first turn")  # parked at the gate
    again = client.post(f"/api/traces/{trace_id}/run", json={"messages": [{"role": "user", "content": "x"}]})
    assert again.status_code == 409 and "already running" in again.json()["detail"]
    assert client.post(f"/api/traces/{trace_id}/reflect", json={}).status_code == 409
    stop = client.post(f"/api/traces/{trace_id}/stop")
    assert stop.status_code == 200
    assert stop.json()["stopped"] == [trace_id] and stop.json()["cancelled_batch_id"] is None
    (server.work / name).touch()  # the in-flight model call returns; its tool call must not run
    trace = wait_idle(client, trace_id)
    assert trace["status"] == "stopped" and "stopped through the API" in trace["error_message"]
    last = messages_of(client, trace_id)[-1]
    assert last["role"] == "assistant" and last["content"]["tool_calls"], "the in-flight reply is recorded"
    assert not any(m["role"] == "tool" and m["tool_call_id"] == "n1" for m in messages_of(client, trace_id, mode="all"))
    # A stopped trace can continue; the unexecuted call gets a "not executed" result first.
    assert client.post(f"/api/traces/{trace_id}/run", json={}).status_code == 202
    assert wait_idle(client, trace_id)["status"] == "completed"


def test_stop_of_an_idle_trace_changes_nothing(client: httpx.Client):
    trace_id = start_run(client, "echo")
    wait_idle(client, trace_id)
    stop = client.post(f"/api/traces/{trace_id}/stop").json()
    assert stop == {"trace_id": trace_id, "stopped": [], "cancelled_batch_id": None, "status": "completed"}


def test_the_demo_task_runs_through_the_api_with_sub_traces(client: httpx.Client):
    trace_id = start_run(client, DEMO_TASK)
    trace = wait_idle(client, trace_id)
    assert trace["status"] == "completed" and "North" in trace["result_summary"]
    subs = client.get(f"/api/traces/{trace_id}").json()["sub_traces"]
    assert subs and all(s["status"] == "completed" for s in subs)


def test_a_recursive_stop_reaches_the_running_subtree(server: ServerProcess, client: httpx.Client):
    hold = server.work / "hold_children"
    hold.touch()  # every recursive child's model call waits while this file exists
    try:
        root = start_run(client, DEMO_TASK, agent_mode="recursive", root_task_anchor=DEMO_ANCHOR)
        child = wait_for(lambda: next((t for t in client.get("/api/traces/running").json()["trace_ids"]
                                       if t.startswith(f"{root}@")), None), "a child to start")
        stop = client.post(f"/api/traces/{root}/stop").json()
        assert stop["stopped"][0] == root and child in stop["stopped"]
    finally:
        hold.unlink()
    assert wait_idle(client, root)["status"] == "stopped"
    subs = client.get(f"/api/traces/{root}").json()["sub_traces"]
    agents = [s for s in subs if s["created_by_tool"] == "agent"]
    assert agents and all(s["status"] == "stopped" for s in agents)
    # The stopped child's reply was recorded but started no grandchildren.
    assert client.get("/api/traces", params={"parent_trace_id": child}).json()["traces"] == []
