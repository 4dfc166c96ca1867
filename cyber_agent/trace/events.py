"""Persisted trace events (SPEC T10): the stream a WebSocket watcher replays and follows.

Stores write each event as one JSON line (`encode_event`) and read it back as a `TraceEvent`.
Payloads are encoded and checked against their model (`event_payloads.py`) once, before an
event id is taken, so a payload that cannot be encoded or does not fit never leaves a gap in
the dense id sequence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field
from pydantic_core import PydanticSerializationError, to_json

from cyber_agent.errors import InvalidUpdateError
from cyber_agent.trace.models import utc_now

if TYPE_CHECKING:
    from cyber_agent.trace.event_payloads import EventPayload
    from cyber_agent.trace.goal_models import Goal, GoalStats

__all__ = [
    "EVENT_TYPES",
    "EventType",
    "TraceEvent",
    "encode_event",
    "encode_json",
    "message_added_payload",
]

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
    "llm_retry",
    "usage_invalid",
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
    """Event data as persisted; its model is `PAYLOAD_MODELS[type]` (`typed_payload`)."""
    created_at: datetime = Field(default_factory=utc_now)
    """When it happened (UTC)."""

    def typed_payload(self) -> EventPayload:
        """Return the payload as its type's model (`cyber_agent/trace/event_payloads.py:PAYLOAD_MODELS`).

        Reading never validates payloads, so an old stream always loads; this validates on
        demand and raises pydantic's ValidationError for a payload that does not fit.
        """
        from cyber_agent.trace.event_payloads import PAYLOAD_MODELS  # imports this module

        return PAYLOAD_MODELS[self.type].model_validate(self.payload)


def encode_json(value: Any, what: str) -> str:
    """Return `value` as JSON text; raise InvalidUpdateError naming `what` if it cannot be encoded.

    The text rule of every store (issue 29): a string holding U+0000 (NUL) or a lone surrogate is
    refused here, at the one place every write is encoded, so a run behaves the same on a file,
    SQLite, memory or PostgreSQL store (PostgreSQL cannot keep a NUL in text at all)."""
    try:
        text = value.model_dump_json() if isinstance(value, BaseModel) else to_json(value).decode()
    except PydanticSerializationError as exc:
        raise InvalidUpdateError(f"{what} is not JSON-serializable: {exc}; text must be valid Unicode "
                                 "(no lone surrogates such as '\\ud800')") from None
    if "\\u0000" in text and (found := _NUL.search(text)) is not None:
        raise InvalidUpdateError(f"{what} contains a NUL character (U+0000) near {text[max(0, found.start() - 40):found.end()]!r}; "
                                 "no store keeps one (PostgreSQL cannot): remove it first, e.g. text.replace('\\x00', '')")
    return text


_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # an escaped NUL, not a literal backslash before "u0000"


def encode_event(event_id: int, trace_id: str, event_type: str, payload_json: str, *, created_at: str | None = None) -> str:
    """Return the JSON line (without newline) of a `TraceEvent` whose payload is already JSON text (`created_at`: now)."""
    # Built by hand: the payload may embed a message already serialized for its own file.
    if created_at is None:
        created_at = utc_now().isoformat().replace("+00:00", "Z")
    return (
        f'{{"event_id":{event_id},"trace_id":{_quoted(trace_id)},"type":"{event_type}",'
        f'"payload":{payload_json},"created_at":"{created_at}"}}'
    )


_BARE = re.compile(r"[A-Za-z0-9_.@-]+")


def _quoted(text: str) -> str:
    """`json.dumps(text)`; an id of plain characters (every valid trace id) needs no escaping."""
    return f'"{text}"' if _BARE.fullmatch(text) else json.dumps(text)


def message_added_payload(message_json: str, affected: Iterable[Goal], *, recovered: bool = False) -> str:
    """Return the `message_added` payload: the message and every affected goal's self/cumulative stats."""
    # Formatted by hand: json.dumps of these small dicts costs more than the rest of an add.
    goals = ",".join(
        f'{{"goal_id":{_string(goal.id)},"self_stats":{_stats(goal.self_stats)},'
        f'"cumulative_stats":{_stats(goal.cumulative_stats)}}}'
        for goal in affected
    )
    extra = ',"recovered":true' if recovered else ""
    return f'{{"message":{message_json},"affected_goals":[{goals}]{extra}}}'


def _string(value: str) -> str:
    return f'"{value}"' if value.isdigit() else json.dumps(value)


def _stats(stats: GoalStats) -> str:
    cost = float(stats.total_cost)
    # repr() of a finite float is its JSON; inf and nan (where cost - cost is nan) go through json.
    cost_json = repr(cost) if cost - cost == 0 else json.dumps(cost)
    return f'{{"message_count":{int(stats.message_count)},"total_tokens":{int(stats.total_tokens)},"total_cost":{cost_json}}}'
