"""Events that ride with a trace's next write, for the stores without transactions (memory, file).

`defer_event` is `append_event` written at the start of the trace's next write, in order, with
the ids it would have had: for a record that may go with what follows it, such as the
`tool_call_started` marker of an inline tool (no side effects, run without yielding) written
with the tool's result (`cyber_agent/core/turn_tools.py:execute_calls`). A write takes one writer
lock instead of two (the file store: one `flock` cycle and one event-file open fewer per tool
call). A kill between the two leaves neither, which for an inline tool is what it was in effect.
Reads of this instance (`get_events`, `read_records`, `read_columns`, `flush`) write what is
pending first; other processes see it with the next write. The SQL stores defer in their own
transaction (`cyber_agent/trace/sql_store.py:SQLTraceStore.defer_event`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from cyber_agent.trace.columnar import ColumnarRead
from cyber_agent.trace.events import EventType, TraceEvent
from cyber_agent.trace.records import TraceRecord
from cyber_agent.trace.store_base import BaseTraceStore, _Hot
from cyber_agent.trace.trace_id import validate_trace_id

__all__ = ["DeferredEventStore"]


class DeferredEventStore(BaseTraceStore):
    """A `BaseTraceStore` whose `defer_event` waits for the trace's next write (no transaction needed)."""

    def __init__(self) -> None:
        super().__init__()
        self._pending_events: dict[str, list[tuple[str, str]]] = {}  # trace -> (type, payload JSON), in order

    async def defer_event(self, trace_id: str, event_type: EventType, payload: dict[str, Any]) -> None:
        """`append_event`, written (ids in order) at the start of the trace's next write."""
        payload_json = self._event_json(trace_id, event_type, payload)
        with self._lock(trace_id):
            self._require_exists(trace_id)
            self._pending_events.setdefault(trace_id, []).append((event_type, payload_json))

    def _write_deferred(self, trace_id: str, hot: _Hot | None) -> list[Any] | None:
        if hot is None or not self._pending_events:
            return None  # a side write leaves events for the next full write
        pending = self._pending_events.pop(trace_id, None)
        for index, (event_type, payload_json) in enumerate(pending or ()):
            try:
                self._emit(hot, event_type, payload_json)
            except BaseException:
                assert pending is not None
                self._pending_events[trace_id] = pending[index:] + self._pending_events.get(trace_id, [])
                raise
        return None  # written for good (no transaction): nothing to put back if the write fails later

    def _settle_events(self, trace_id: str | None = None) -> None:
        """Write the pending events of `trace_id` (of every trace when None), one write each."""
        for pending in [trace_id] if trace_id is not None else list(self._pending_events):
            if self._pending_events.get(pending):
                with self._writing(pending):
                    pass

    async def get_events(self, trace_id: str, since_event_id: int = 0) -> list[TraceEvent]:
        """Events with id greater than `since_event_id`, in order (this instance's pending ones written first)."""
        if self._pending_events and validate_trace_id(trace_id) in self._pending_events:
            self._settle_events(trace_id)
        return await super().get_events(trace_id, since_event_id)

    async def read_records(self, root_ids: Sequence[str] | None = None, *, messages: bool = True, events: bool = True,
                           exchanges: bool = False, goals: bool = True, fields: Collection[str] | None = None,
                           subtrees: bool = True) -> list[TraceRecord]:
        """`BaseTraceStore.read_records`, this instance's pending events written first."""
        if self._pending_events:
            self._settle_events()
        return await super().read_records(root_ids, messages=messages, events=events, exchanges=exchanges, goals=goals,
                                          fields=fields, subtrees=subtrees)

    def read_columns(self, root_ids: Sequence[str] | None = None, *, messages: bool = True,
                     events: bool = True) -> ColumnarRead:
        """`BaseTraceStore.read_columns`, this instance's pending events written first."""
        if self._pending_events:
            self._settle_events()
        return super().read_columns(root_ids, messages=messages, events=events)

    async def flush(self) -> None:
        """Write every pending event, then checkpoint (see `BaseTraceStore.flush`)."""
        if self._pending_events:
            self._settle_events()
        await super().flush()
