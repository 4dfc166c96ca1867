"""InMemoryTraceStore: the TraceStore kept in process memory (tests, notebooks, benchmarks)."""

from __future__ import annotations

import copy
from typing import Any

from cyber_agent.trace.events import TraceEvent
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.store_base import BaseTraceStore

__all__ = ["InMemoryTraceStore"]


class InMemoryTraceStore(BaseTraceStore):
    """Keep every record in dictionaries; returned objects are copies."""

    def __init__(self) -> None:
        super().__init__()
        self._traces: dict[str, Trace] = {}
        self._goals: dict[str, GoalTree] = {}
        self._messages: dict[str, list[Message]] = {}
        self._events: dict[str, list[TraceEvent]] = {}
        self._side: dict[tuple[str, str], dict[str, Any]] = {}

    def _trace_exists(self, trace_id: str) -> bool:
        return trace_id in self._traces

    def _create_record(self, trace: Trace, tree: GoalTree) -> None:
        self._traces[trace.trace_id] = trace
        self._goals[trace.trace_id] = tree
        self._messages[trace.trace_id] = []
        self._events[trace.trace_id] = []

    def _read_trace(self, trace_id: str) -> Trace | None:
        trace = self._traces.get(trace_id)
        return trace.model_copy(deep=True) if trace is not None else None

    def _write_trace(self, trace: Trace) -> None:
        # The hot copy is the stored object; nothing to do.
        self._traces[trace.trace_id] = trace

    def _read_goals(self, trace_id: str) -> GoalTree | None:
        return self._goals.get(trace_id)

    def _write_goals(self, trace_id: str, tree: GoalTree) -> None:
        self._goals[trace_id] = tree

    def _read_message(self, trace_id: str, sequence: int) -> Message | None:
        messages = self._messages.get(trace_id)
        if messages is None or not 0 < sequence <= len(messages):
            return None
        return messages[sequence - 1].model_copy()

    def _write_message(self, message: Message) -> None:
        messages = self._messages[message.trace_id]
        stored = message.model_copy()
        if message.sequence == len(messages) + 1:
            messages.append(stored)
        else:
            messages[message.sequence - 1] = stored

    def _read_all_messages(self, trace_id: str) -> list[Message]:
        return [m.model_copy() for m in self._messages.get(trace_id, [])]

    def _append_event_record(self, event: TraceEvent) -> None:
        self._events[event.trace_id].append(event)

    def _read_events(self, trace_id: str) -> list[TraceEvent]:
        return list(self._events.get(trace_id, []))

    def _read_side_record(self, trace_id: str, name: str) -> dict[str, Any] | None:
        record = self._side.get((trace_id, name))
        return copy.deepcopy(record) if record is not None else None

    def _write_side_record(self, trace_id: str, name: str, data: dict[str, Any]) -> None:
        self._side[(trace_id, name)] = copy.deepcopy(data)

    def _all_traces(self) -> list[Trace]:
        return list(self._traces.values())
