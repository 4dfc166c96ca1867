"""What every endpoint of one server shares: the store, the runner, the runs and the review log."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Path as PathParam
from starlette.requests import HTTPConnection

from cyber_agent.server.runs import RunManager
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.reflection import CognitionLog
from cyber_agent.trace.trace_id import MAX_TRACE_ID_LENGTH, validate_trace_id

__all__ = ["ServerState", "State", "TraceId", "server_state"]


@dataclass(frozen=True, kw_only=True)
class ServerState:
    """The objects one server's endpoints work with (set on `app.state.cyber_agent`)."""

    store: TraceStore
    """Where traces live."""
    runner: Any
    """The AgentRunner that executes runs (typed Any: only run_api needs its type)."""
    runs: RunManager
    """Background runs of this server."""
    cognition: CognitionLog
    """Review queue of reflection lessons."""
    experiences_path: Path
    """The experiences file approved lessons are appended to."""


def server_state(connection: HTTPConnection) -> ServerState:
    """FastAPI dependency: the state of the server answering this request or WebSocket."""
    state: ServerState = connection.app.state.cyber_agent
    return state


def _trace_id(
    trace_id: Annotated[str, PathParam(
        min_length=1, max_length=MAX_TRACE_ID_LENGTH, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$",
        description="A root UUID or a sub-trace id `{parent}@{mode}-{YYYYmmddHHMMSS}-{seq}`.",
    )],
) -> str:
    # The pattern documents the alphabet; validate_trace_id also refuses '..' (422, never a path).
    return validate_trace_id(trace_id)


State = Annotated[ServerState, Depends(server_state)]
"""Endpoint parameter type for the server state."""
TraceId = Annotated[str, Depends(_trace_id)]
"""Endpoint parameter type for a validated `{trace_id}` path parameter."""
