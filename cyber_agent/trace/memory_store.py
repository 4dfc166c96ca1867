"""InMemoryTraceStore: the TraceStore kept in process memory (tests, notebooks, benchmarks).

Records are kept as the same JSON text the file store writes, so both stores normalise values
alike (a payload that cannot be persisted fails here too) and every read returns a fresh,
independent object without a deep copy. An event is kept as its parts (id, type, payload JSON,
time) and its line is built on its first read, the same line `encode_event` gives at write time:
a run writes three events a step and most are never read in process.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cyber_agent.trace.clock import utc_now
from cyber_agent.trace.events import TraceEvent, encode_event, encode_json
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.errors import CorruptRecordError
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.record_fields import TraceProjection
from cyber_agent.trace.records import JSONRecord, TraceRecord, share_message_events
from cyber_agent.trace.store_base import _Hot
from cyber_agent.trace.store_deferred import DeferredEventStore
from cyber_agent.trace.trace_id import validate_trace_id

__all__ = ["InMemoryTraceStore"]

_Event = tuple[int, str, str, datetime]
"""An event not yet read: id, type, payload JSON and creation time (`InMemoryTraceStore._emit`)."""


class InMemoryTraceStore(DeferredEventStore):
    """Keep every record in dictionaries; returned objects are copies."""

    # The kept trace and goal tree are the live objects an add updates in place (a write that replaces
    # one stores the new object itself): a checkpoint after each add would store them again.
    _checkpoint_every = sys.maxsize
    _checkpoint_interval = math.inf

    def __init__(self) -> None:
        super().__init__()
        # The live trace and goal tree of a trace are its write-side state; nothing else to persist.
        self._records: dict[str, tuple[Trace, GoalTree]] = {}
        self._messages: dict[str, list[str]] = {}
        self._events: dict[str, list[str | _Event]] = {}
        self._side: dict[tuple[str, str], str] = {}
        self._exchanges: dict[str, list[str]] = {}

    def _load_for_write(self, trace_id: str) -> _Hot:
        hot = self._hot.get(trace_id)
        if hot is not None:
            return hot
        # A trace written here before (an import) is loaded as copies: keep those live objects from now
        # on, so the kept records stay current without a checkpoint per add.
        hot = super()._load_for_write(trace_id)
        self._records[trace_id] = (hot.trace, hot.tree)
        return hot

    def _trace_exists(self, trace_id: str) -> bool:
        return trace_id in self._records

    def _create_record(self, trace: Trace, tree: GoalTree) -> None:
        self._messages[trace.trace_id] = []
        self._events[trace.trace_id] = []
        self._records[trace.trace_id] = (trace, tree)

    def _read_trace(self, trace_id: str) -> Trace | None:
        record = self._records.get(trace_id)
        return Trace.model_validate_json(record[0].model_dump_json()) if record is not None else None

    def _write_trace(self, trace: Trace) -> None:
        self._records[trace.trace_id] = (trace, self._records[trace.trace_id][1])

    def _read_goals(self, trace_id: str) -> GoalTree | None:
        record = self._records.get(trace_id)
        return GoalTree.model_validate_json(record[1].model_dump_json()) if record is not None else None

    def _write_goals(self, trace_id: str, tree: GoalTree) -> None:
        self._records[trace_id] = (self._records[trace_id][0], tree)

    def _read_message(self, trace_id: str, sequence: int) -> Message | None:
        messages = self._messages.get(trace_id)
        if messages is None or not 0 < sequence <= len(messages):
            return None
        return Message.model_validate_json(messages[sequence - 1])

    def _write_message(self, trace_id: str, sequence: int, data: str) -> None:
        messages = self._messages[trace_id]
        if sequence == len(messages) + 1:
            messages.append(data)
        else:
            messages[sequence - 1] = data

    def _read_all_messages(self, trace_id: str) -> list[Message]:
        return [Message.model_validate_json(data) for data in self._messages.get(trace_id, [])]

    def _delete_message(self, trace_id: str, sequence: int) -> None:
        messages = self._messages.get(trace_id)
        if messages is not None and sequence == len(messages):  # only the newest is ever rolled back
            messages.pop()

    def _append_event_line(self, trace_id: str, line: str) -> None:
        self._events[trace_id].append(line)

    def _emit(self, hot: _Hot, event_type: str, payload_json: str) -> int:
        # The parts, not the line (`_event_lines` builds it): a list append cannot fail, so no repair path.
        event_id = hot.last_event_id + 1
        self._events[hot.trace.trace_id].append((event_id, event_type, payload_json, utc_now()))
        hot.last_event_id = event_id
        return event_id

    def _event_lines(self, trace_id: str, start: int = 0) -> list[str]:
        """The trace's event lines from index `start`; each kept event's line is built once, on its first read."""
        entries = self._events.get(trace_id, [])
        lines: list[str] = []
        for index in range(start, len(entries)):
            entry = entries[index]
            if type(entry) is tuple:
                event_id, event_type, payload_json, created_at = entry
                entry = entries[index] = encode_event(event_id, trace_id, event_type, payload_json,
                                                      created_at=created_at.isoformat().replace("+00:00", "Z"))
            lines.append(entry)  # type: ignore[arg-type]  # a str now
        return lines

    def _read_events(self, trace_id: str, since_event_id: int) -> list[TraceEvent]:
        # Event ids are dense from 1, so id n sits at index n - 1.
        return [TraceEvent.model_validate_json(line) for line in self._event_lines(trace_id, max(since_event_id, 0))]

    def _read_side_record(self, trace_id: str, name: str) -> dict[str, Any] | None:
        data = self._side.get((trace_id, name))
        return json.loads(data) if data is not None else None

    def _write_side_record(self, trace_id: str, name: str, data: str) -> None:
        self._side[(trace_id, name)] = data

    async def append_exchange(self, trace_id: str, record: Mapping[str, Any]) -> int:
        """`BaseTraceStore.append_exchange` under the trace's lock alone: a side scope's writer hooks do nothing here."""
        validate_trace_id(trace_id)
        text = encode_json(dict(record), "exchange")  # the copy and the write-time check
        with self._lock(trace_id):
            self._require_exists(trace_id)
            return self._append_exchange_line(trace_id, text)

    def _append_exchange_line(self, trace_id: str, line: str) -> int:
        lines = self._exchanges.setdefault(trace_id, [])
        lines.append(line)
        return len(lines) - 1

    def _read_exchange_lines(self, trace_id: str) -> list[str]:
        return list(self._exchanges.get(trace_id, []))

    def _read_record(self, meta: JSONRecord, *, messages: bool, events: bool, goals: bool = True,
                     fields: TraceProjection | None = None) -> TraceRecord:
        # The stored JSON text parsed directly: no pydantic, each message once (see trace/records.py).
        trace_id = meta["trace_id"]
        trace, tree = self._meta_and_tree(trace_id, goals=goals, fields=fields)
        if not messages and not events:  # the tree view's read: nothing else to parse
            return TraceRecord(trace=trace, goal_tree=tree, resource_usage=self._read_side_record(trace_id, "resource_usage"),
                               tool_approvals=self._read_side_record(trace_id, "tool_approvals"))
        with self._lock(trace_id):
            raw = list(self._messages.get(trace_id, [])) if messages else []
            lines = self._event_lines(trace_id) if events else []
        parsed = [json.loads(data) for data in raw]
        by_sequence = {m["sequence"]: m for m in parsed}
        raw_by_sequence = {m["sequence"]: data for m, data in zip(parsed, raw, strict=True)}

        def corrupt(number: int, exc: json.JSONDecodeError) -> Exception:
            return CorruptRecordError(f"<memory>/{trace_id}/events", f"line {number} is not JSON ({exc.msg})")

        return TraceRecord(
            trace=trace, goal_tree=tree, messages=parsed,
            events=share_message_events(enumerate(lines, start=1), raw_by_sequence, by_sequence, corrupt),
            resource_usage=self._read_side_record(trace_id, "resource_usage"),
            tool_approvals=self._read_side_record(trace_id, "tool_approvals"),
        )

    def _all_traces(self) -> list[Trace]:
        return [record[0] for record in list(self._records.values())]
