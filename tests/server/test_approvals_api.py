"""Tool approvals over the API (SPEC T8), including server crashes (SIGKILL) and restarts."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx

from cyber_agent.core.approvals import CallDecision, current_batch, decide_batch
from live_server import ServerProcess, start_run, trace_of, wait_for, wait_idle


def side_effects(server: ServerProcess) -> list[str]:
    path = server.work / "side_effects.log"
    return path.read_text().splitlines() if path.exists() else []


def waiting_batch(http: httpx.Client, task: str) -> tuple[str, dict[str, Any]]:
    trace_id = start_run(http, task)
    assert wait_idle(http, trace_id)["status"] == "waiting_confirmation"
    batch = http.get(f"/api/traces/{trace_id}/tool-approvals/pending").json()["batch"]
    assert batch is not None and batch["status"] == "pending"
    return trace_id, batch


def approve_all(batch: dict[str, Any], **edits: dict[str, Any]) -> dict[str, Any]:
    return {"decisions": [{"call_id": c["call_id"], "decision": "approve", "arguments": edits.get(c["name"], {})}
                          for c in batch["calls"]]}


def test_a_batch_waits_and_only_a_complete_legal_decision_resumes_it(server: ServerProcess, client: httpx.Client):
    tag = uuid.uuid4().hex[:8]
    trace_id, batch = waiting_batch(client, f"deploy: prod-{tag}")
    assert [(c["name"], c["requires_confirmation"], c["editable_params"]) for c in batch["calls"]] == [
        ("look", False, []), ("deploy", True, ["target"])]
    assert not any(tag in line for line in side_effects(server)), "nothing of the batch ran before the decision"
    url = f"/api/traces/{trace_id}/tool-approvals/{batch['batch_id']}"

    blocked = client.post(f"/api/traces/{trace_id}/run", json={"messages": [{"role": "user", "content": "go"}]})
    assert blocked.status_code == 409 and "waiting for tool approval" in blocked.json()["detail"]
    partial = client.post(url, json={"decisions": approve_all(batch)["decisions"][:1]})
    assert partial.status_code == 422 and "every call" in partial.json()["detail"]
    illegal = client.post(url, json=approve_all(batch, deploy={"force": True}))
    assert illegal.status_code == 422 and "force" in illegal.json()["detail"]
    twice = {"decisions": approve_all(batch)["decisions"] * 2}
    assert client.post(url, json=twice).status_code == 422
    assert client.post(f"/api/traces/{trace_id}/tool-approvals/nosuchbatch", json=approve_all(batch)).status_code == 404
    assert client.post(url, json={"decisions": [{"call_id": "x", "decision": "maybe"}]}).status_code == 422
    misnamed = approve_all(batch)  # `edits` is not a field (it is `arguments`): refused, never approved unedited
    misnamed["decisions"][0]["edits"] = {"target": "elsewhere"}
    refused = client.post(url, json=misnamed)
    assert refused.status_code == 422 and "edits" in json.dumps(refused.json()), refused.text

    decided = client.post(url, json=approve_all(batch, deploy={"target": f"staging-{tag}"}))
    assert decided.status_code == 200, decided.text
    assert decided.json()["resumed"] is True and decided.json()["batch"]["status"] == "decided"
    again = client.post(url, json=approve_all(batch))
    assert again.status_code == 409 and "already decided" in again.json()["detail"]

    trace = wait_idle(client, trace_id)
    assert trace["status"] == "completed" and f"deployed staging-{tag}" in trace["result_summary"]
    assert [line for line in side_effects(server) if tag in line] == [f"deploy staging-{tag} force=False"]
    assert client.get(f"/api/traces/{trace_id}/tool-approvals/pending").json()["batch"] is None
    kinds = [e.type for e in asyncio.run(server.store().get_events(trace_id))]
    assert kinds.count("tool_approval_requested") == 1 and kinds.count("tool_approval_decided") == 1


def test_a_rejected_call_reaches_the_model_as_a_rejection(server: ServerProcess, client: httpx.Client):
    trace_id, batch = waiting_batch(client, "deploy: rejected-target")
    decisions = [{"call_id": c["call_id"], "decision": "reject" if c["name"] == "deploy" else "approve",
                  "feedback": "not today"} for c in batch["calls"]]
    assert client.post(f"/api/traces/{trace_id}/tool-approvals/{batch['batch_id']}", json={"decisions": decisions}).status_code == 200
    trace = wait_idle(client, trace_id)
    assert trace["status"] == "completed" and "rejected by the reviewer: not today" in trace["result_summary"]
    assert not any("rejected-target" in line for line in side_effects(server))


def test_stop_cancels_a_pending_batch_and_stops_the_trace(server: ServerProcess, client: httpx.Client):
    trace_id, batch = waiting_batch(client, "deploy: stopped-target")
    stop = client.post(f"/api/traces/{trace_id}/stop").json()
    assert stop["cancelled_batch_id"] == batch["batch_id"] and stop["status"] == "stopped"
    assert client.get(f"/api/traces/{trace_id}/tool-approvals/pending").json()["batch"] is None
    late = client.post(f"/api/traces/{trace_id}/tool-approvals/{batch['batch_id']}", json=approve_all(batch))
    assert late.status_code == 409 and "cancelled" in late.json()["detail"]
    assert not any("stopped-target" in line for line in side_effects(server))


async def test_a_crash_keeps_pending_batches_and_resumes_decided_ones_on_restart(fresh_server: ServerProcess):
    server = fresh_server.start()
    with server.client() as http:
        pending_id, pending = waiting_batch(http, "deploy: after-crash")
        decided_id, decided = waiting_batch(http, "deploy: decided-offline")
        stale = start_run(http, "gated: never-opened 3")
        wait_for(lambda: trace_of(http, stale)["total_messages"] >= 4, "the gated run to park")
    server.kill()
    # One decision was persisted, but the process died before its batch started.
    await decide_batch(server.store(), decided_id, decided["batch_id"], [
        CallDecision(call_id=c["call_id"], decision="approve") for c in decided["calls"]])
    assert side_effects(server) == []
    server.start()
    with server.client() as http:
        # The decided batch resumes by itself.
        trace = wait_for(lambda: (t := trace_of(http, decided_id))["status"] == "completed" and t, "the resumed run")
        assert "deployed decided-offline" in trace["result_summary"]
        # The pending batch is still pending, with the same id.
        again = http.get(f"/api/traces/{pending_id}/tool-approvals/pending").json()["batch"]
        assert again["batch_id"] == pending["batch_id"] and again["status"] == "pending"
        assert trace_of(http, pending_id)["status"] == "waiting_confirmation"
        # The killed server's run is not running anywhere; stop marks it stopped.
        assert stale not in http.get("/api/traces/running").json()["trace_ids"]
        assert trace_of(http, stale)["status"] == "running"
        assert http.post(f"/api/traces/{stale}/stop").json()["status"] == "stopped"
        url = f"/api/traces/{pending_id}/tool-approvals/{pending['batch_id']}"
        assert http.post(url, json=approve_all(pending)).status_code == 200
        assert wait_idle(http, pending_id)["status"] == "completed"
    assert sorted(side_effects(server)) == ["deploy after-crash force=False", "deploy decided-offline force=False"]


async def test_a_crash_during_an_approved_side_effect_fails_closed_and_never_retries(fresh_server: ServerProcess):
    server = fresh_server.start()
    with server.client() as http:
        trace_id, batch = waiting_batch(http, "deploy_slow: prod")
        decided = http.post(f"/api/traces/{trace_id}/tool-approvals/{batch['batch_id']}", json=approve_all(batch))
        assert decided.status_code == 200
        wait_for(lambda: side_effects(server) == ["deploy_slow started prod"], "the side effect to start")
    server.kill()  # mid side effect
    server.start()
    with server.client() as http:
        trace = trace_of(http, trace_id)
        assert trace["status"] == "failed" and "unknown" in trace["error_message"]
        retry = http.post(f"/api/traces/{trace_id}/run", json={"messages": [{"role": "user", "content": "retry"}]})
        assert retry.status_code == 409 and "fails closed" in retry.json()["detail"]
        assert http.get(f"/api/traces/{trace_id}/tool-approvals/pending").json()["batch"] is None
    assert (await current_batch(server.store(), trace_id)).status == "execution_unknown"
    server.kill()
    server.start()  # a second restart does not retry it either
    with server.client() as http:
        assert trace_of(http, trace_id)["status"] == "failed"
    assert side_effects(server) == ["deploy_slow started prod"]


def test_an_unreadable_approval_file_is_a_500_naming_the_file(server: ServerProcess, client: httpx.Client):
    trace_id = start_run(client, "echo")
    wait_idle(client, trace_id)
    path = server.store_path / trace_id / "tool_approvals.json"
    path.write_text("{not json")
    response = client.get(f"/api/traces/{trace_id}/tool-approvals/pending")
    assert response.status_code == 500
    body = response.json()
    assert body["error"] == "corrupt_record" and body["path"].endswith(f"{trace_id}/tool_approvals.json")
    path.unlink()
    assert client.get(f"/api/traces/{trace_id}/tool-approvals/pending").json()["batch"] is None
