"""The format-neutral result of reading a source: trees of traces with their messages and links.

Each reader (`_redel.py`, `_inspect.py`, `_otel.py`) turns its files into `TracePlan`s; only
`_write.py` touches a store. A plan holds the trace as it must end up (status, answer, times,
provenance) and its messages in order; the store still assigns sequences and counts totals.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.provenance import ImportSource

__all__ = ["ChildLink", "TracePlan", "import_trace_id", "iter_plans", "ordered_times"]

_NAMESPACE = uuid.UUID("5b0f8f0e-6c57-4b1e-9f43-2f1d1c0a7e11")


def import_trace_id(source: ImportSource, key: str) -> str:
    """The trace id of an imported trace: a UUID5 of the source and its own key, so re-imports find it."""
    return str(uuid.uuid5(_NAMESPACE, f"{source}:{key}"))


@dataclass(frozen=True, kw_only=True)
class ChildLink:
    """A tool call of a parent message that started a child trace."""

    message_index: int
    """Index (in `TracePlan.messages`) of the assistant message holding the call."""
    call_id: str
    """The call's id."""
    tool: str
    """The tool's name (e.g. ReDel's `delegate`)."""
    child: TracePlan
    """The trace it started."""


@dataclass(kw_only=True)
class TracePlan:
    """One trace to write: its final record, its messages in order, the calls that started its children."""

    trace: Trace
    """The trace as it must read once written (totals 0: the store counts them)."""
    messages: list[Message] = field(default_factory=list)
    """Its messages in order (each becomes the parent of the next: one main path)."""
    links: list[ChildLink] = field(default_factory=list)
    """Calls that started children (each child also appears in `children`)."""
    children: list[TracePlan] = field(default_factory=list)
    """Its children, in the order they started."""


def iter_plans(plan: TracePlan) -> Iterator[TracePlan]:
    """The plan and every descendant, parents first."""
    stack = [plan]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def ordered_times(base: datetime | None, count: int) -> list[datetime]:
    """`count` times one microsecond apart from `base` (the epoch when None): order kept, no duration invented."""
    start = base or datetime(1970, 1, 1, tzinfo=UTC)
    return [start + timedelta(microseconds=i) for i in range(count)]
