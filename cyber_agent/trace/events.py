"""Persisted trace events (SPEC T10): the stream a WebSocket watcher replays and follows."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from cyber_agent.trace.models import utc_now

__all__ = ["EVENT_TYPES", "EventType", "TraceEvent"]

EventType = Literal[
    "goal_added",
    "goal_updated",
    "message_added",
    "sub_trace_started",
    "sub_trace_completed",
    "rewind",
    "trace_completed",
    "trace_status_changed",
    "compaction",
    "progress",
    "tool_approval_requested",
    "tool_approval_decided",
]
EVENT_TYPES: frozenset[str] = frozenset(EventType.__args__)  # type: ignore[attr-defined]


class TraceEvent(BaseModel):
    """One event of a trace's stream; ids are dense per trace, starting at 1."""

    event_id: int
    """Position in the trace's stream."""
    trace_id: str
    """Trace the event belongs to."""
    type: EventType
    """What happened."""
    payload: dict[str, Any] = Field(default_factory=dict)
    """Event data (see docs/trace.md for each type)."""
    created_at: datetime = Field(default_factory=utc_now)
    """When it happened (UTC)."""
