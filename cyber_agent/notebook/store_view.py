"""ReadOnlyTraceStore: loaded traces behind the TraceStore protocol, with every write refused.

The writes are not written out one by one: every name in
`cyber_agent/trace/protocols.py:WRITE_METHODS` raises the same StoreError.

`load_export` returns one, so an exported tree can be inspected with the same helpers (and the
same `TraceStore` calls) as a live store, without anything being able to run on it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Coroutine, Iterable, Sequence
from dataclasses import replace
from typing import Any, NoReturn

from pydantic import ValidationError

from cyber_agent.errors import CorruptRecordError, InvalidUpdateError, MessageNotFoundError, StoreError, TraceNotFoundError
from cyber_agent.notebook.display import RichDisplay, html_table
from cyber_agent.trace.budget_limits import ResourceUsage
from cyber_agent.trace.events import EVENT_TYPES, TraceEvent
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocols import WRITE_METHODS
from cyber_agent.trace.record_fields import project_meta, trace_projection
from cyber_agent.trace.records import TraceRecord, parse_time, select_trees
from cyber_agent.trace.side_records import StopRequest, ToolApprovals, tool_approvals_from, usage_from
from cyber_agent.trace.trace_filter import TraceFilter
from cyber_agent.trace.trace_id import parse_message_id

__all__ = ["ReadOnlyTraceStore"]


class ReadOnlyTraceStore(RichDisplay):
    """A TraceReader over loaded records; every TraceStore write raises StoreError."""

    def __init__(self, records: Iterable[TraceRecord], *, source: str = "<records>") -> None:
        self.source = source
        """Where the records came from (an export path), for messages and reprs."""
        self._records: dict[str, TraceRecord] = {}
        self._traces: dict[str, Trace] = {}
        self._goals: dict[str, GoalTree | None] = {}
        self._messages: dict[str, list[Message]] = {}
        self._events: dict[str, list[TraceEvent]] = {}
        for record in records:
            self._add(record)

    def _add(self, record: TraceRecord) -> None:
        trace_id = record.trace_id
        what = "trace"
        try:
            self._traces[trace_id] = Trace.model_validate(record.trace)
            what = "goal tree"
            self._goals[trace_id] = GoalTree.model_validate(record.goal_tree) if record.goal_tree is not None else None
            what = "messages"
            self._messages[trace_id] = [Message.model_validate(m) for m in record.messages]
            what = "events"
            self._events[trace_id] = [_event(e) for e in record.events]
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            raise CorruptRecordError(self.source, f"trace {trace_id!r}: {what} invalid at {where!r}: {error['msg']}") from None
        self._records[trace_id] = record

    def __repr__(self) -> str:
        return f"ReadOnlyTraceStore(source={self.source!r}, traces={len(self._records)})"

    def _roots(self) -> list[tuple[str, str, int]]:
        counts: dict[str, int] = {}
        for trace in self._traces.values():
            root = trace.root_id
            counts[root] = counts.get(root, 0) + 1
        return [(t.trace_id, t.task or "", counts.get(t.trace_id, 1)) for t in self._traces.values() if t.parent_trace_id is None]

    def to_text(self) -> str:
        """The source and one line per tree: root id, number of traces, task."""
        lines = [repr(self)]
        lines += [f"  {root} ({count} traces): {task[:80]}" for root, task, count in self._roots()]
        return "\n".join(lines)

    def to_html(self) -> str:
        """A table of the trees."""
        return html_table([[root, count, task] for root, task, count in self._roots()], ["root trace", "traces", "task"],
                          caption=f"read-only traces from {self.source}")

    # ---- TraceStore: bulk read -----------------------------------------------------------
    async def read_records(
        self, root_ids: Sequence[str] | None = None, *, messages: bool = True, events: bool = True,
        goals: bool = True, fields: Collection[str] | None = None, subtrees: bool = True,
    ) -> list[TraceRecord]:
        """The loaded records of the trees under `root_ids` (all when None), parents first (the options of
        `cyber_agent/trace/protocols.py:TraceReader.read_records`)."""
        if isinstance(root_ids, str):
            raise InvalidUpdateError(f"root_ids must be a sequence of trace ids, got the string {root_ids!r}")
        projection = trace_projection(fields) if fields is not None else None
        if root_ids is not None and not subtrees:
            out = [self._require(trace_id) for trace_id in dict.fromkeys(root_ids)]
        else:
            selected = select_trees([r.trace for r in self._records.values()], root_ids)
            out = [self._records[m["trace_id"]] for m in selected]
        if messages and events and goals and projection is None:
            return out
        return [replace(r, messages=r.messages if messages else [], events=r.events if events else [],
                        goal_tree=r.goal_tree if goals else None,
                        trace=r.trace if projection is None else project_meta(r.trace, projection)) for r in out]

    def _require(self, trace_id: str) -> TraceRecord:
        record = self._records.get(trace_id)
        if record is None:
            raise TraceNotFoundError(trace_id)
        return record

    # ---- TraceStore: reads ------------------------------------------------------------
    async def get_trace(self, trace_id: str) -> Trace | None:
        """Return the trace, or None."""
        trace = self._traces.get(trace_id)
        return trace.model_copy(deep=True) if trace is not None else None

    async def list_traces(self, where: TraceFilter | None = None, /, **filters: Any) -> list[Trace]:
        """Newest first; every filter (`TraceFilter`, or its fields as keywords) is applied before `limit`."""
        return [t.model_copy(deep=True) for t in TraceFilter.of(where, filters).select(self._traces.values())]

    async def get_resource_usage(self, root_trace_id: str) -> ResourceUsage | None:
        """Return the root's usage, or None; CorruptRecordError when the record is incomplete or invalid."""
        return usage_from(self._require(root_trace_id).resource_usage, f"{root_trace_id}/resource_usage.json")

    async def get_stop_requests(self, trace_ids: Sequence[str]) -> dict[str, StopRequest]:
        """An export keeps no stop requests: always empty (unknown ids raise nothing either)."""
        return {}

    async def get_tool_approvals(self, trace_id: str) -> ToolApprovals | None:
        """Return the approval state, or None; CorruptRecordError when a batch does not fit."""
        return tool_approvals_from(self._require(trace_id).tool_approvals, f"{trace_id}/tool_approvals.json")

    async def get_goal_tree(self, trace_id: str) -> GoalTree | None:
        """Return the goal tree (None for an unknown trace)."""
        if trace_id not in self._traces:
            return None
        tree = self._goals.get(trace_id)
        return tree.model_copy(deep=True) if tree is not None else GoalTree(mission=self._traces[trace_id].task)

    async def get_message(self, message_id: str) -> Message | None:
        """Return the message, or None."""
        trace_id, sequence = parse_message_id(message_id)
        for message in self._messages.get(trace_id, []):
            if message.sequence == sequence:
                return message.model_copy(deep=True)
        return None

    async def get_trace_messages(self, trace_id: str) -> list[Message]:
        """All messages in sequence order."""
        self._require(trace_id)
        return [m.model_copy(deep=True) for m in sorted(self._messages[trace_id], key=lambda m: m.sequence)]

    async def get_main_path_messages(self, trace_id: str, head_sequence: int | None = None) -> list[Message]:
        """Messages from the first one to `head_sequence` (default: the trace's head) along `parent_sequence`."""
        self._require(trace_id)
        if head_sequence is None:
            head_sequence = self._traces[trace_id].head_sequence
        by_sequence = {m.sequence: m for m in self._messages[trace_id]}
        path: list[Message] = []
        sequence: int | None = head_sequence or None
        while sequence is not None and len(path) <= len(by_sequence):
            message = by_sequence.get(sequence)
            if message is None:
                raise MessageNotFoundError(f"{trace_id}-{sequence:04d}")
            path.append(message.model_copy(deep=True))
            sequence = message.parent_sequence
        path.reverse()
        return path

    async def get_messages_by_goal(self, trace_id: str, goal_id: str) -> list[Message]:
        """Messages recorded under a goal."""
        return [m for m in await self.get_trace_messages(trace_id) if m.goal_id == goal_id]

    async def get_events(self, trace_id: str, since_event_id: int = 0) -> list[TraceEvent]:
        """Events with id greater than `since_event_id`."""
        self._require(trace_id)
        return [e.model_copy(deep=True) for e in self._events[trace_id] if e.event_id > since_event_id]

def _refuse_write(name: str) -> Callable[..., Coroutine[Any, Any, NoReturn]]:
    async def refuse(self: ReadOnlyTraceStore, *_: Any, **__: Any) -> NoReturn:
        raise StoreError(
            f"{self!r} is read-only: it holds loaded traces and nothing can run on it ({name} refused); "
            "run again with a FileSystemTraceStore or an InMemoryTraceStore"
        )

    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = "Refused: read-only."
    return refuse


# Every write of the protocol, refused in one place (so a new write method is refused too).
for _name in WRITE_METHODS:
    setattr(ReadOnlyTraceStore, _name, _refuse_write(_name))
del _name


def _event(raw: dict[str, Any]) -> TraceEvent:
    if raw.get("type") in EVENT_TYPES:
        return TraceEvent.model_validate(raw)
    # An event type from a newer version: keep it as data instead of refusing the whole export.
    return TraceEvent.model_construct(
        event_id=int(raw.get("event_id", 0)), trace_id=str(raw.get("trace_id", "")), type=raw.get("type"),  # type: ignore[arg-type]  # a type outside EventType on purpose (see above)
        payload=dict(raw.get("payload") or {}), created_at=parse_time(raw.get("created_at")),
    )
