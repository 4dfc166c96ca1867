"""WebSocket watch (seed 003 "WebSocket 事件", SPEC T10): connected, replay, then live — gapless."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from cyber_agent.cli import DEMO_TASK
from cyber_agent.server.watch_api import wire_event
from live_server import WAIT_TIMEOUT, ServerProcess, start_run, trace_of, wait_for, wait_idle


async def receive_until(ws: Any, last_type: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Return the connected message and every event up to and including the first of `last_type`."""
    hello = json.loads(await asyncio.wait_for(ws.recv(), WAIT_TIMEOUT))
    assert hello["type"] == "connected"
    events: list[dict[str, Any]] = []
    while not events or events[-1]["type"] != last_type:
        events.append(json.loads(await asyncio.wait_for(ws.recv(), WAIT_TIMEOUT)))
    return hello, events


async def stored_events(server: ServerProcess, trace_id: str) -> list[dict[str, Any]]:
    return [wire_event(e) for e in await server.store().get_events(trace_id, 0)]


async def test_watchers_joining_mid_run_get_every_event_exactly_once_in_order(server: ServerProcess, client: httpx.Client):
    gate = f"gate-{uuid.uuid4().hex[:8]}"
    trace_id = start_run(client, f"gated: {gate} 6")
    wait_for(lambda: trace_of(client, trace_id)["total_messages"] >= 4, "the run to park at its gate")
    before = await stored_events(server, trace_id)
    since = len(before) // 2
    url = f"{server.ws_url}/api/traces/{trace_id}/watch"
    async with websockets.connect(f"{url}?since_event_id={since}") as parked:
        (server.work / gate).touch()
        async with websockets.connect(url) as racing:  # joins while the run goes on: replay meets live
            hello, from_middle = await receive_until(parked, "trace_completed")
            _, from_start = await receive_until(racing, "trace_completed")
    assert hello["trace_id"] == trace_id and hello["current_event_id"] >= len(before)
    assert hello["trace_status"] == "running" and hello["is_running"] is True
    assert hello["goal_tree"]["goals"] and hello["sub_traces"] == []
    wait_idle(client, trace_id)
    stored = await stored_events(server, trace_id)
    assert stored[-1]["type"] == "trace_completed", "nothing follows the end of a legacy run"
    # Exactly the persisted stream: no gap, no duplicate, same payloads, at both boundaries.
    assert from_middle == stored[since:]
    assert from_start == stored
    assert [e["event_id"] for e in from_start] == list(range(1, len(stored) + 1))


async def test_a_late_watcher_gets_the_replay_and_then_live_events(server: ServerProcess, client: httpx.Client):
    trace_id = start_run(client, "echo")
    wait_idle(client, trace_id)
    stored = await stored_events(server, trace_id)
    url = f"{server.ws_url}/api/traces/{trace_id}/watch?since_event_id=0"
    async with websockets.connect(url) as ws:
        hello, replay = await receive_until(ws, "trace_completed")
        assert hello["trace_status"] == "completed" and hello["is_running"] is False
        assert hello["current_event_id"] == len(stored) and replay == stored
        # Live: continuing the trace streams its new events on the same socket.
        client.post(f"/api/traces/{trace_id}/run", json={"messages": [{"role": "user", "content": "more"}]})
        live = []
        while not live or live[-1]["type"] != "trace_completed":
            live.append(json.loads(await asyncio.wait_for(ws.recv(), WAIT_TIMEOUT)))
    assert live == (await stored_events(server, trace_id))[len(stored):]
    statuses = [e["payload"]["status"] for e in live if e["type"] == "trace_status_changed"]
    assert statuses == ["running", "completed"]


async def test_since_event_id_beyond_the_stream_is_clamped_to_the_current_id(server: ServerProcess, client: httpx.Client):
    trace_id = start_run(client, "echo")
    wait_idle(client, trace_id)
    count = len(await stored_events(server, trace_id))
    async with websockets.connect(f"{server.ws_url}/api/traces/{trace_id}/watch?since_event_id=99999") as ws:
        hello = json.loads(await ws.recv())
        assert hello["current_event_id"] == count
        client.post(f"/api/traces/{trace_id}/run", json={"messages": [{"role": "user", "content": "more"}]})
        first_live = json.loads(await asyncio.wait_for(ws.recv(), WAIT_TIMEOUT))
    assert first_live["event_id"] == count + 1


async def test_sub_trace_and_rewind_events_carry_the_seed_payloads(server: ServerProcess, client: httpx.Client):
    trace_id = start_run(client, DEMO_TASK)
    wait_idle(client, trace_id)
    client.post(f"/api/traces/{trace_id}/run", json={"messages": [], "after_message_id": f"{trace_id}-0002"})
    wait_idle(client, trace_id)
    async with websockets.connect(f"{server.ws_url}/api/traces/{trace_id}/watch") as ws:
        hello = json.loads(await ws.recv())
        events = [json.loads(await asyncio.wait_for(ws.recv(), WAIT_TIMEOUT)) for _ in range(hello["current_event_id"])]
    assert len(hello["sub_traces"]) >= 2 and all(s["created_by_tool"] == "agent" for s in hello["sub_traces"])
    by_type: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_type.setdefault(event["type"], []).append(event["payload"])
    started = by_type["sub_trace_started"][0]
    assert {"trace_id", "parent_goal_id", "agent_type", "task"} <= set(started)
    assert {"trace_id", "status", "summary", "stats"} <= set(by_type["sub_trace_completed"][0])
    assert {"message", "affected_goals"} <= set(by_type["message_added"][0])
    assert "goal" in by_type["goal_added"][0]
    updated = by_type["goal_updated"][0]
    assert {"goal_id", "patch", "affected_goals"} <= set(updated) and updated["updates"] == updated["patch"]
    assert {"after_sequence", "head_sequence", "goal_tree_snapshot"} <= set(by_type["rewind"][0])
    assert by_type["rewind"][0]["after_sequence"] == 2
    assert {"trace_id", "total_messages"} <= set(by_type["trace_completed"][0])


@pytest.mark.parametrize(("trace_id", "status"), [("00000000-0000-4000-8000-000000000000", 404), ("a..b", 422)])
async def test_watching_an_unknown_or_invalid_trace_is_refused(server: ServerProcess, trace_id: str, status: int):
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(f"{server.ws_url}/api/traces/{trace_id}/watch"):
            pass
    assert refused.value.response.status_code == status
