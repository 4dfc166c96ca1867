"""Columnar reads of messages and events (`TraceStore.read_columns`): what the analysis frames are built from.

A store answers `read_columns(records)` with one Arrow table of its messages and one of its events
(`ColumnarRead`), in the records' order: the SQL stores with SQL (`cyber_agent/trace/sql_store.py:
SQLTraceStore.read_columns`; SQLite through ADBC, Arrow built in C), every other store from its
parsed records one trace at a time (`BaseTraceStore.read_columns`, `add_record` here), so the
parsed dicts of a trace are freed before the next is read. Readers (the notebook frames) build
their columns from these tables and never know how a store lays out its rows.

The message columns are the store's typed message values (`cyber_agent/trace/sqlite_schema.py:
MESSAGE_COLUMNS`) with `trace_id` and `sequence` in front; the nested values that can only be
Python objects (tool-call arguments, event payloads) come parsed beside the tables.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cyber_agent.trace.models import refusal_kind
from cyber_agent.trace.records import TraceRecord
from cyber_agent.trace.sqlite_schema import MESSAGE_COLUMNS
from cyber_agent.trace.store_listing import DamagedEntry

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "EVENT_FIELDS",
    "MESSAGE_FIELDS",
    "ColumnBuilder",
    "ColumnarRead",
    "arrow_available",
    "arrow_schema",
    "columns_of_records",
    "in_order",
    "json_values",
    "typed",
]

_SUB_TRACE_EVENTS = ("sub_trace_started", "sub_trace_completed")
_SQL_TYPES = {"TEXT": "string", "INTEGER": "int64", "REAL": "float64"}
MESSAGE_FIELDS: tuple[tuple[str, str], ...] = (
    ("trace_id", "string"), ("sequence", "int64"),
    *((name, _SQL_TYPES[kind]) for name, kind in MESSAGE_COLUMNS if name != "tool_calls"),
)
"""Columns of `ColumnarRead.messages` and their Arrow types: the typed message values, without the tool-call JSON."""
EVENT_FIELDS: tuple[tuple[str, str], ...] = (
    ("trace_id", "string"), ("event_id", "int64"), ("type", "string"), ("created_at", "string"),
    ("message_sequence", "int64"), ("goal_id", "string"), ("sub_trace_id", "string"), ("status", "string"),
)
"""Columns of `ColumnarRead.events`: `message_sequence` is the sequence a `message_added` event announces;
`goal_id` (the payload's, or its goal's id), `sub_trace_id` (a `sub_trace_*` event's) and `status` are lifted
from the payload."""


def arrow_available() -> bool:
    """Whether pyarrow can be imported (the columnar path needs it; `pip install 'cyber-agent[parquet]'`)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def arrow_schema(fields: Sequence[tuple[str, str]]) -> pa.Schema:
    """The Arrow schema of `MESSAGE_FIELDS` or `EVENT_FIELDS`."""
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, kind)()) for name, kind in fields])


@dataclass(frozen=True, kw_only=True, repr=False)
class ColumnarRead:
    """Some trees' records and their messages and events as columns, rows in the records' order, then by
    sequence (event id)."""

    records: list[TraceRecord]
    """The traces, parents first, without their messages and events (damaged traces left out)."""
    messages: pa.Table
    """`MESSAGE_FIELDS`, one row per message."""
    calls: list[list[list[Any]]]
    """One list per message with tool calls (`n_tool_calls > 0`), in row order: `[call id, name, arguments]` each."""
    contents: dict[tuple[str, int], Any]
    """(trace id, sequence) -> parsed content of each refused tool result whose content is not text."""
    events: pa.Table
    """`EVENT_FIELDS`, one row per event."""
    payloads: list[Any]
    """Each event's payload in row order (a `message_added` payload without its message; None when absent)."""
    damaged: list[DamagedEntry] = field(default_factory=list)
    """Traces left out because their rows could not be read (the listing's damaged entries)."""

    def __repr__(self) -> str:
        return f"ColumnarRead(messages={self.messages.num_rows}, events={self.events.num_rows})"


def _flags(metadata: dict[str, Any]) -> tuple[int, int, int, int, int]:
    payload = metadata.get("payload")
    path = payload.get("path") if isinstance(payload, dict) else None
    return (int(bool(metadata.get("usage_estimated"))), int(bool(metadata.get("cost_estimated"))),
            int(bool(metadata.get("cost_unpriced"))), int(bool(metadata.get("truncated")) or path == "truncated"),
            int(path == "summarized"))


class ColumnBuilder:
    """Appends parsed records' messages and events to columns; `build` makes the `ColumnarRead`.

    The values are the store's typed message values (as `sqlite_schema.py:message_values` computes
    them when a SQL store writes), read from the parsed dicts without a JSON round trip.
    """

    def __init__(self, *, messages: bool = True, events: bool = True) -> None:
        self._messages, self._events = messages, events
        self.message_columns: dict[str, list[Any]] = {name: [] for name, _ in MESSAGE_FIELDS}
        self.event_columns: dict[str, list[Any]] = {name: [] for name, _ in EVENT_FIELDS}
        self.calls: list[list[list[Any]]] = []
        self.contents: dict[tuple[str, int], Any] = {}
        self.payloads: list[Any] = []

    def add_record(self, record: TraceRecord) -> TraceRecord:
        """Append one trace's messages and events; return its record without them (the parsed ones are not kept)."""
        if self._messages:
            self._add_messages(record)
        if self._events:
            self._add_events(record)
        return dataclasses.replace(record, messages=[], events=[]) if record.messages or record.events else record

    def _add_messages(self, record: TraceRecord) -> None:
        cols = self.message_columns
        (trace_ids, sequences, message_id, role, goal_id, parent_sequence, branch, tool_call_id, tool_name, description,
         prompt_tokens, completion_tokens, cached_tokens, cost, duration_ms, created_at, text, n_tool_calls,
         tool_call_names, is_error, refused, model, usage_estimated, cost_estimated, cost_unpriced, truncated,
         summarized, content_is_text) = (cols[name].append for name, _ in MESSAGE_FIELDS)
        trace_id = record.trace_id
        for m in record.messages:
            get = m.get
            content = get("content")
            metadata = get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            calls = (content.get("tool_calls") or ()) if isinstance(content, dict) else ()
            body = content.get("text") if isinstance(content, dict) else content
            error = metadata.get("is_error")
            sequence = get("sequence", 0)
            trace_ids(trace_id)
            sequences(sequence)
            message_id(get("message_id"))
            role(get("role"))
            goal_id(get("goal_id"))
            parent_sequence(get("parent_sequence"))
            branch(get("branch"))
            tool_call_id(get("tool_call_id"))
            tool_name(get("tool_name"))
            description(get("description"))
            prompt_tokens(get("prompt_tokens", 0))
            completion_tokens(get("completion_tokens", 0))
            cached_tokens(get("cached_tokens", 0))
            cost(get("cost", 0.0))
            duration_ms(get("duration_ms"))
            created_at(get("created_at"))
            text(body if body is None or isinstance(body, str) else json.dumps(body))
            n_tool_calls(len(calls))
            tool_call_names(",".join([c.get("name", "") for c in calls if isinstance(c, dict)]) or None)
            is_error(None if error is None else int(bool(error)))
            refusal = refusal_kind(metadata) if error else None
            refused(refusal)
            model(metadata.get("model"))
            guessed, priced, unpriced, cut, shortened = _flags(metadata)
            usage_estimated(guessed)
            cost_estimated(priced)
            cost_unpriced(unpriced)
            truncated(cut)
            summarized(shortened)
            content_is_text(int(isinstance(content, str)))
            if calls:
                self.calls.append([[c.get("id"), c.get("name"), c.get("arguments") or {}]
                                   for c in calls if isinstance(c, dict)])
            if refusal is not None and not isinstance(content, str):
                self.contents[(trace_id, sequence)] = content

    def _add_events(self, record: TraceRecord) -> None:
        cols = self.event_columns
        trace_ids, event_ids, types, created_at, sequences, goals, sub_traces, statuses = (
            cols[name].append for name, _ in EVENT_FIELDS)
        trace_id = record.trace_id
        payloads = self.payloads.append
        for event in record.events:
            payload = event.get("payload")
            message = payload.get("message") if isinstance(payload, dict) else None
            sequence = None
            if isinstance(message, dict) and isinstance(payload, dict):
                sequence = message.get("sequence")
                payload = {k: v for k, v in payload.items() if k != "message"}  # the record's own dict is left as is
            kind = event.get("type")
            lifted = payload if isinstance(payload, dict) else {}
            goal = lifted.get("goal")
            trace_ids(trace_id)
            event_ids(event.get("event_id"))
            types(kind)
            created_at(event.get("created_at"))
            sequences(sequence)
            goals(lifted.get("goal_id") or (goal.get("id") if isinstance(goal, dict) else None))
            sub_traces(lifted.get("trace_id") if kind in _SUB_TRACE_EVENTS else None)
            statuses(lifted.get("status"))
            payloads(payload)

    def build(self, records: list[TraceRecord], damaged: list[DamagedEntry]) -> ColumnarRead:
        """The columns appended so far, of `records` (`damaged`: the traces left out)."""
        import pyarrow as pa

        def table(columns: dict[str, list[Any]], fields: Sequence[tuple[str, str]]) -> pa.Table:
            schema = arrow_schema(fields)
            return pa.table([pa.array(columns[f.name], f.type) for f in schema], schema=schema)

        return ColumnarRead(records=records, messages=table(self.message_columns, MESSAGE_FIELDS), calls=self.calls,
                            contents=self.contents, events=table(self.event_columns, EVENT_FIELDS),
                            payloads=self.payloads, damaged=damaged)


def columns_of_records(records: Sequence[TraceRecord], *, messages: bool = True, events: bool = True) -> ColumnarRead:
    """The `ColumnarRead` of records already read (an export, or any reader without `read_columns`)."""
    builder = ColumnBuilder(messages=messages, events=events)
    for record in records:
        builder.add_record(record)
    return builder.build(list(records), [])


def typed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table`'s columns named in `schema`, cast to its types (a driver infers types from the values it saw)."""
    import pyarrow as pa

    return pa.table([table[f.name].cast(f.type) for f in schema], schema=schema)


def in_order(table: pa.Table, ids: Sequence[str]) -> pa.Table:
    """The rows of `table` (sorted by `trace_id`, each trace's rows together) in the order of `ids`."""
    if table.num_rows == 0 or len(ids) <= 1:
        return table
    import numpy as np
    import pyarrow.compute as pc

    runs = pc.run_end_encode(table["trace_id"].combine_chunks())
    ends = runs.run_ends.to_numpy()
    starts = np.concatenate([[0], ends[:-1]])
    where = {trace_id: (int(start), int(end)) for trace_id, start, end in zip(runs.values.to_pylist(), starts, ends,
                                                                             strict=True)}
    spans = [where[trace_id] for trace_id in ids if trace_id in where]
    if all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False)) and spans and spans[0][0] == 0 \
            and spans[-1][1] == table.num_rows:
        return table  # already in that order
    return table.take(np.concatenate([np.arange(start, end) for start, end in spans]))


def json_values(column: pa.ChunkedArray, *, keep_nulls: bool = False) -> list[Any]:
    """The parsed values of a column of JSON texts, with one `json.loads` for all (None for a null when
    `keep_nulls`, else nulls are skipped): far cheaper than one call, and one Python string, per row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = column.combine_chunks().cast(pa.large_string())
    values = pc.fill_null(values, "null") if keep_nulls else pc.drop_null(values)
    if len(values) == 0:
        return []
    joined = pc.binary_join(pa.LargeListArray.from_arrays(pa.array([0, len(values)], pa.int64()), values), pa.scalar(",", pa.large_string()))
    parsed: list[Any] = json.loads("[" + joined[0].as_py() + "]")
    return parsed
