"""Reflect (seed 003, 8–9): a side branch, lessons held for review, approved ones reach experiences."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pytest

from cyber_agent.cli import main
from live_server import ServerProcess, start_run, wait_for, wait_idle
from server_factories import LESSONS


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """`cyber-agent extractions ...` run in this process, on the log the server process writes."""

    def run(server: ServerProcess, *args: str) -> CliResult:
        code = main(["extractions", *args, "--experiences", str(server.experiences)])
        out = capsys.readouterr()
        return CliResult(code, out.out, out.err)

    return run


def extractions(http: httpx.Client, **params: str) -> list[dict]:
    response = http.get("/api/extractions", params=params)
    assert response.status_code == 200, response.text
    return response.json()["extractions"]


def reflect(http: httpx.Client, trace_id: str, focus: str | None = "data sources") -> str:
    response = http.post(f"/api/traces/{trace_id}/reflect", json={"focus": focus})
    assert response.status_code == 202, response.text
    assert response.json()["side_branch"] == "reflection"
    wait_idle(http, trace_id)
    return response.json()["reflection_id"]


def test_reflection_runs_on_a_side_branch_and_queues_lessons_for_review(server: ServerProcess, client: httpx.Client):
    trace_id = start_run(client, "echo")
    before = wait_idle(client, trace_id)
    reflection_id = reflect(client, trace_id)
    after = wait_idle(client, trace_id)
    # The main path, head and status did not move.
    assert (after["head_sequence"], after["status"], after["result_summary"]) == (
        before["head_sequence"], before["status"], before["result_summary"])
    main = client.get(f"/api/traces/{trace_id}/messages").json()["messages"]
    assert [m["sequence"] for m in main] == [1, 2, 3]
    every = client.get(f"/api/traces/{trace_id}/messages", params={"mode": "all"}).json()["messages"]
    side = [m for m in every if m["branch"] == "reflection"]
    assert [m["role"] for m in side] == ["user", "assistant"] and "Focus: data sources" in side[0]["content"]
    assert after["side_branches"]["reflection"]["status"] == "completed"

    pending = extractions(client, trace_id=trace_id)
    assert [e["lesson"] for e in pending] == list(LESSONS)
    assert all(e["status"] == "extraction_pending" and e["reflection_id"] == reflection_id for e in pending)
    assert all(e["focus"] == "data sources" for e in pending)
    # Nothing reaches the experiences file before review.
    experiences = client.get("/api/experiences").json()["content"]
    assert all(e["extraction_id"] not in experiences for e in pending)


def test_review_through_the_api_and_the_cli_gates_the_experiences_file(server: ServerProcess, client: httpx.Client, cli):
    trace_id = start_run(client, "echo")
    wait_idle(client, trace_id)
    reflect(client, trace_id, focus=None)
    first, second = extractions(client, trace_id=trace_id)

    approved = client.post(f"/api/extractions/{first['extraction_id']}", json={"decision": "approve", "note": "good"})
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    again = client.post(f"/api/extractions/{first['extraction_id']}", json={"decision": "reject"})
    assert again.status_code == 409 and "already approved" in again.json()["detail"]
    assert client.post("/api/extractions/nope", json={"decision": "approve"}).status_code == 404
    assert client.post(f"/api/extractions/{second['extraction_id']}", json={"decision": "maybe"}).status_code == 422

    # The CLI reviews the same log the server writes.
    listed = cli(server, "list", "--status", "extraction_pending")
    assert listed.returncode == 0 and second["extraction_id"] in listed.stdout
    assert first["extraction_id"] not in listed.stdout
    rejected = cli(server, "reject", second["extraction_id"], "--note", "too vague")
    assert rejected.returncode == 0 and "rejected" in rejected.stdout
    repeat = cli(server, "reject", second["extraction_id"])
    assert repeat.returncode == 2 and "already rejected" in repeat.stderr

    content = client.get("/api/experiences").json()["content"]
    assert f"- {first['lesson']} (trace {trace_id})" in content and first["extraction_id"] in content
    assert second["extraction_id"] not in content
    statuses = {e["extraction_id"]: e["status"] for e in extractions(client, trace_id=trace_id)}
    assert statuses == {first["extraction_id"]: "approved", second["extraction_id"]: "rejected"}
    assert {e["extraction_id"] for e in extractions(client, status="rejected")} >= {second["extraction_id"]}


def test_cli_approval_appends_to_the_file_the_api_serves(server: ServerProcess, client: httpx.Client, cli):
    trace_id = start_run(client, "echo")
    wait_idle(client, trace_id)
    reflect(client, trace_id)
    entry = extractions(client, trace_id=trace_id)[0]
    done = cli(server, "approve", entry["extraction_id"])
    assert done.returncode == 0 and "approved" in done.stdout
    wait_for(lambda: entry["extraction_id"] in client.get("/api/experiences").json()["content"], "the approved lesson")
    assert cli(server, "approve").returncode == 2  # an id is required


def test_reflect_refusals(client: httpx.Client):
    assert client.post("/api/traces/00000000-0000-4000-8000-000000000000/reflect", json={}).status_code == 404
    trace_id = start_run(client, "deploy: reflect-target")
    assert wait_idle(client, trace_id)["status"] == "waiting_confirmation"
    blocked = client.post(f"/api/traces/{trace_id}/reflect", json={})
    assert blocked.status_code == 409 and "approval" in blocked.json()["detail"]
    assert client.post(f"/api/traces/{trace_id}/reflect", json={"focus": "x", "extra": 1}).status_code == 422
    client.post(f"/api/traces/{trace_id}/stop")
