"""WebSocket `/api/traces/{trace_id}/watch?since_event_id=N` (seed 003 "WebSocket 事件"; SPEC T10).

A watcher receives, in this order:

1. one `connected` message (`ConnectedMessage`): trace_id, current_event_id, trace_status,
   is_running, goal_tree, sub_traces;
2. the replay: every persisted event with `since_event_id < event_id <= current_event_id`;
3. live events, as the store persists them, for as long as the socket stays open.

Each event is sent as the persisted `TraceEvent` (`event_id`, `trace_id`, `type`, `payload`,
`created_at`). There is no gap and no duplicate at the replay/live boundary because both
parts come from the same dense, append-only event log: the watcher remembers the last id it
sent and asks the store only for later ids — after every step of a run in this server (the
RunManager wakes it) and at least every 100 ms otherwise (events written by sub-agents or by
another process). A store that pushes its events (`listen(trace_id, since_event_id)`, the
PostgreSQL store's LISTEN/NOTIFY feed) is streamed from instead of polled. A `since_event_id` above the current id is treated as the current id.

`goal_updated` payloads also carry `updates` (= `patch`), the name the seed uses for replayed
history, so clients written against either name work.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, WebSocket
from pydantic import BaseModel
from starlette.responses import JSONResponse
from starlette.websockets import WebSocketDisconnect

from cyber_agent.errors import InvalidIdError
from cyber_agent.server.json_body import JSONBodyRoute
from cyber_agent.server.query_api import SubTrace, sub_traces_of
from cyber_agent.server.state import ServerState, server_state
from cyber_agent.trace.events import TraceEvent
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import TraceStatus
from cyber_agent.trace.trace_id import validate_trace_id

__all__ = ["POLL_SECONDS", "ConnectedMessage", "router", "wire_event"]

POLL_SECONDS = 0.1
"""Longest wait between two reads of the event log while nothing in this server wakes the watcher."""

router = APIRouter(route_class=JSONBodyRoute)


class ConnectedMessage(BaseModel):
    """First message on a watch socket."""

    type: Literal["connected"] = "connected"
    """Always `connected`."""
    trace_id: str
    """The watched trace."""
    current_event_id: int
    """Id of the last persisted event at connection time (0 when there is none)."""
    trace_status: TraceStatus
    """Status of the trace at connection time."""
    is_running: bool
    """True when a run of this trace is active in this server."""
    goal_tree: GoalTree | None
    """The goal tree at connection time."""
    sub_traces: list[SubTrace]
    """Direct sub-traces (agents and validators) at connection time."""


def wire_event(event: TraceEvent) -> dict[str, Any]:
    """Return the JSON a watcher receives for one persisted event."""
    data = event.model_dump(mode="json")
    if event.type == "goal_updated" and "patch" in data["payload"] and "updates" not in data["payload"]:
        data["payload"]["updates"] = data["payload"]["patch"]
    return data


async def _deny(websocket: WebSocket, status: int, error: str, detail: str) -> None:
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(JSONResponse({"error": error, "detail": detail}, status_code=status))
    else:  # pragma: no cover - servers without the denial-response extension
        await websocket.close(code=1008, reason=detail[:120])


@router.websocket("/api/traces/{trace_id}/watch")
async def watch(websocket: WebSocket, trace_id: str, since_event_id: Annotated[int, Query(ge=0)] = 0) -> None:
    """Send `connected`, replay events after `since_event_id`, then stream new events."""
    state: ServerState = server_state(websocket)
    try:
        validate_trace_id(trace_id)
    except InvalidIdError as exc:
        await _deny(websocket, 422, "unprocessable", str(exc))
        return
    trace = await state.store.get_trace(trace_id)
    if trace is None:
        await _deny(websocket, 404, "not_found", f"trace {trace_id!r} not found")
        return
    await websocket.accept()
    backlog = await state.store.get_events(trace_id, 0)
    current = backlog[-1].event_id if backlog else 0
    since = min(since_event_id, current)
    hello = ConnectedMessage(
        trace_id=trace_id, current_event_id=current, trace_status=trace.status,
        is_running=state.runs.is_running(trace_id), goal_tree=await state.store.get_goal_tree(trace_id),
        sub_traces=await sub_traces_of(state.store, trace_id),
    )
    async with asyncio.TaskGroup() as group:
        stream = group.create_task(_stream(websocket, state, hello, [e for e in backlog if e.event_id > since]))
        listen = group.create_task(_listen(websocket))
        # Whichever ends first (client gone, or sending failed) ends the other.
        stream.add_done_callback(lambda _task: listen.cancel())
        listen.add_done_callback(lambda _task: stream.cancel())


async def _stream(websocket: WebSocket, state: ServerState, hello: ConnectedMessage, replay: list[TraceEvent]) -> None:
    trace_id = hello.trace_id
    last_sent = hello.current_event_id
    with contextlib.suppress(WebSocketDisconnect, OSError, RuntimeError):  # the client went away
        await websocket.send_json(hello.model_dump(mode="json"))
        for event in replay:
            await websocket.send_json(wire_event(event))
        listen = getattr(state.store, "listen", None)
        if listen is not None:  # the store pushes its events (PostgreSQL: LISTEN/NOTIFY); no polling
            async for event in listen(trace_id, last_sent):
                await websocket.send_json(wire_event(event))
            return
        while True:
            await state.runs.changed(POLL_SECONDS)
            for event in await state.store.get_events(trace_id, last_sent):
                await websocket.send_json(wire_event(event))
                last_sent = event.event_id


async def _listen(websocket: WebSocket) -> None:
    """Read (and ignore) client messages until the client disconnects."""
    with contextlib.suppress(WebSocketDisconnect, OSError, RuntimeError):
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
