"""The server stays responsive while the worst tool calls of the [hardening] issue run.

The scripted model of `server_factories.py` (`hostile: KIND`) makes one call each: a
`list_files` pattern leading out of the workspace, a bounded walk of the whole filesystem, the
big-integer division in a comprehension, and a sync tool that blocks its thread until released.
Before the fix each of them held the event loop for seconds; a GET must now answer in < 0.5 s.
"""

from __future__ import annotations

import time

import httpx
import pytest

from live_server import ServerProcess, start_run, wait_for, wait_idle

LIMIT_SECONDS = 0.5


def timed_get(http: httpx.Client) -> float:
    started = time.perf_counter()
    response = http.get("/api/traces")
    assert response.status_code == 200, response.text
    return time.perf_counter() - started


def tool_reply(http: httpx.Client, trace_id: str) -> str:
    messages = http.get(f"/api/traces/{trace_id}/messages").json()["messages"]
    return next(str(m["content"]) for m in messages if m["role"] == "tool")


@pytest.mark.parametrize(("kind", "expected"), [
    ("list_files_escape", "leads out of the workspace"),
    ("list_files_walk", "*.nothing"),  # no match in the repository, or the walk limit's marker
    ("evaluate_bigint", "too expensive"),
])
def test_a_get_answers_in_time_while_a_hostile_call_runs(client: httpx.Client, kind: str, expected: str) -> None:
    trace_id = start_run(client, f"hostile: {kind}")
    latencies = [timed_get(client)]
    while trace_id in client.get("/api/traces/running").json()["trace_ids"]:
        latencies.append(timed_get(client))
    wait_idle(client, trace_id)
    reply = tool_reply(client, trace_id)
    assert expected in reply or "stopped after visiting" in reply, reply
    assert max(latencies) < LIMIT_SECONDS, latencies


def test_a_get_answers_in_time_while_a_sync_tool_blocks(server: ServerProcess, client: httpx.Client) -> None:
    started, release = server.work / "slow_started", server.work / "release"
    started.unlink(missing_ok=True)
    release.unlink(missing_ok=True)
    trace_id = start_run(client, "hostile: slow_sync")
    try:
        wait_for(started.exists, "the slow sync tool to start")
        latencies = [timed_get(client) for _ in range(5)]
    finally:
        release.touch()
    wait_idle(client, trace_id)
    assert tool_reply(client, trace_id) == "slow done"
    assert max(latencies) < LIMIT_SECONDS, latencies
