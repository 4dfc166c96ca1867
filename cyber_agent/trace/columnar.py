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
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any

from cyber_agent.trace.models import refusal_kind
from cyber_agent.trace.records import JSONRecord, TraceRecord
from cyber_agent.trace.sqlite_schema import MESSAGE_COLUMNS
from cyber_agent.trace.store_listing import DamagedEntry

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "CALL_FIELDS",
    "EVENT_FIELDS",
    "MESSAGE_FIELDS",
    "ColumnBuilder",
    "ColumnarRead",
    "arrow_available",
    "arrow_schema",
    "calls_of_column",
    "columns_of_records",
    "event_columns",
    "flat_calls",
    "in_order",
    "ordered",
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
CALL_FIELDS: tuple[tuple[str, str], ...] = (
    ("message_row", "int64"), ("call_index", "int64"), ("call_id", "string"), ("tool_name", "string"),
)
"""Columns of `ColumnarRead.calls`: the call's message (its row in `messages`), its position in the turn, id, tool."""
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
    calls: pa.Table
    """`CALL_FIELDS`, one row per tool call, in message row order: `message_row` is its message's row in `messages`."""
    arguments: list[Any]
    """Each call's arguments (parsed; `{}` when absent), in the rows of `calls`."""
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


# Every field of a persisted message `_append_messages` reads, in one C call; older or foreign records missing
# some take these defaults (the records path's, `cyber_agent/notebook/frame_rows.py`).
_MESSAGE_FIELDS = operator.itemgetter(
    "sequence", "message_id", "role", "goal_id", "parent_sequence", "branch", "tool_call_id", "tool_name", "description",
    "prompt_tokens", "completion_tokens", "cached_tokens", "cost", "duration_ms", "created_at", "content", "metadata")
_MESSAGE_DEFAULTS: dict[str, Any] = {
    "message_id": None, "sequence": 0, "role": None, "goal_id": None, "content": None, "tool_call_id": None,
    "tool_name": None, "parent_sequence": None, "branch": None, "description": None, "prompt_tokens": 0,
    "completion_tokens": 0, "cached_tokens": 0, "cost": 0.0, "duration_ms": None, "metadata": None,
    "created_at": None,
}


def _flags(metadata: dict[str, Any]) -> tuple[int, int, int, int, int]:
    payload = metadata.get("payload")
    path = payload.get("path") if isinstance(payload, dict) else None
    return (int(bool(metadata.get("usage_estimated"))), int(bool(metadata.get("cost_estimated"))),
            int(bool(metadata.get("cost_unpriced"))), int(bool(metadata.get("truncated")) or path == "truncated"),
            int(path == "summarized"))


_BATCH_ROWS = 8192
"""Rows a `ColumnBuilder` collects before it turns them into an Arrow batch."""


class ColumnBuilder:
    """Appends parsed records' messages and events to columns; `build` makes the `ColumnarRead`.

    The values are the store's typed message values (as `sqlite_schema.py:message_values` computes
    them when a SQL store writes), read from the parsed dicts without a JSON round trip.
    """

    def __init__(self, *, messages: bool = True, events: bool = True) -> None:
        self._messages, self._events = messages, events
        # One tuple per message (its stored fields; its derived values) and per event, turned into columns by `build`:
        # two appends per message instead of one per column.
        self._trace_ids: list[str] = []
        self._stored: list[tuple[Any, ...]] = []
        self._derived: list[tuple[Any, ...]] = []
        self._events_rows: list[tuple[Any, ...]] = []
        self._rows = 0  # messages before those in `_stored` (already in `_message_batches`)
        self._message_batches: list[pa.RecordBatch] = []
        self._event_batches: list[pa.RecordBatch] = []
        self.calls: list[list[list[Any]]] = []
        self.call_rows: list[int] = []
        self.contents: dict[tuple[str, int], Any] = {}
        self.payloads: list[Any] = []

    @property
    def messages(self) -> bool:
        """Whether the messages are read."""
        return self._messages

    @property
    def events(self) -> bool:
        """Whether the events are read."""
        return self._events

    def add_record(self, record: TraceRecord) -> TraceRecord:
        """Append one trace's messages and events; return its record without them (the parsed ones are not kept)."""
        if self._messages:
            self._add_messages(record.trace_id, record.messages)
        if self._events:
            self._add_events(record.trace_id, record.events)
        self.end_record()
        return dataclasses.replace(record, messages=[], events=[]) if record.messages or record.events else record

    # A reader that parses one message or event at a time hands each over at once, while it is still in the
    # CPU's caches (`cyber_agent/trace/store.py:FileSystemTraceStore._read_into`), then calls `end_record`.
    def add_message(self, trace_id: str, message: JSONRecord) -> None:
        """Append one message of the trace being read (messages in sequence order)."""
        self._add_messages(trace_id, (message,))

    def add_event(self, trace_id: str, event: JSONRecord) -> None:
        """Append one event of the trace being read (events in id order)."""
        self._add_events(trace_id, (event,))

    def end_record(self) -> None:
        """The trace being read is complete (its rows may become an Arrow batch now)."""
        if len(self._stored) >= _BATCH_ROWS or len(self._events_rows) >= _BATCH_ROWS:
            self._flush()

    def mark(self) -> tuple[int, ...]:
        """Where the trace about to be read starts (for `rollback`)."""
        return (len(self._stored), len(self._events_rows), len(self.payloads), len(self.calls))

    def rollback(self, mark: tuple[int, ...], trace_id: str) -> None:
        """Drop what was appended of `trace_id` since `mark` (its read failed: the trace is left out)."""
        rows, events, payloads, calls = mark
        del self._stored[rows:], self._derived[rows:], self._trace_ids[rows:], self._events_rows[events:]
        del self.payloads[payloads:], self.calls[calls:], self.call_rows[calls:]
        for key in [key for key in self.contents if key[0] == trace_id]:
            del self.contents[key]

    def _flush(self) -> None:
        """Turn the rows appended so far into Arrow batches (while their values are still in the CPU's caches)."""
        import pyarrow as pa

        def batch(columns: Sequence[Sequence[Any]], fields: Sequence[tuple[str, str]]) -> pa.RecordBatch:
            schema = arrow_schema(fields)
            return pa.record_batch([pa.array(values, f.type) for values, f in zip(columns, schema, strict=True)],
                                   schema=schema)

        def transposed(rows: list[tuple[Any, ...]], width: int) -> list[Sequence[Any]]:
            return list(zip(*rows, strict=True)) if rows else [()] * width

        if self._stored:
            self._message_batches.append(batch(
                [self._trace_ids, *transposed(self._stored, 15), *transposed(self._derived, 12)], MESSAGE_FIELDS))
            self._rows += len(self._stored)
            self._trace_ids, self._stored, self._derived = [], [], []
        if self._events_rows:
            self._event_batches.append(batch(transposed(self._events_rows, len(EVENT_FIELDS)), EVENT_FIELDS))
            self._events_rows = []

    def _add_messages(self, trace_id: str, messages: Sequence[JSONRecord]) -> None:
        start, calls = len(self._stored), len(self.calls)  # (a flush happens between records only)
        try:
            self._append_messages(trace_id, messages)
        except KeyError:  # an older or foreign record without some fields: undo, then read it with the defaults
            del self._stored[start:], self._derived[start:], self.calls[calls:], self.call_rows[calls:]
            self._append_messages(trace_id, [{**_MESSAGE_DEFAULTS, **m} for m in messages])
        self._trace_ids.extend([trace_id] * len(messages))

    def _append_messages(self, trace_id: str, messages: Sequence[JSONRecord]) -> None:
        stored, derived = self._stored.append, self._derived.append
        calls_of, call_rows, contents = self.calls.append, self.call_rows.append, self.contents
        row = self._rows + len(self._stored)
        for m in messages:
            # One C call reads every field (a missing one raises KeyError: see `_add_messages`).
            values = _MESSAGE_FIELDS(m)
            stored(values[:15])
            content, metadata = values[15], values[16]
            text: str | None
            names: str | None
            if isinstance(content, str):
                text, n_calls, names, is_text = content, 0, None, 1
            elif isinstance(content, dict):
                calls = content.get("tool_calls") or ()
                body = content.get("text")
                text = body if body is None or isinstance(body, str) else json.dumps(body)
                n_calls, is_text = len(calls), 0
                names = ",".join([c.get("name", "") for c in calls if isinstance(c, dict)]) or None
                if calls:
                    calls_of([[c.get("id"), c.get("name"), c.get("arguments") or {}] for c in calls if isinstance(c, dict)])
                    call_rows(row)
            else:
                text, n_calls, names, is_text = None if content is None else json.dumps(content), 0, None, 0
            row += 1
            if not metadata or not isinstance(metadata, dict):
                derived((text, n_calls, names, None, None, None, 0, 0, 0, 0, 0, is_text))
                continue
            error = metadata.get("is_error")
            refusal = refusal_kind(metadata) if error else None
            derived((text, n_calls, names, None if error is None else int(bool(error)), refusal, metadata.get("model"),
                     *_flags(metadata), is_text))
            if refusal is not None and not isinstance(content, str):
                contents[(trace_id, values[0])] = content

    def _add_events(self, trace_id: str, events: Sequence[JSONRecord]) -> None:
        rows = self._events_rows.append
        payloads = self.payloads.append
        for event in events:
            payload = event.get("payload")
            kind = event.get("type")
            sequence = None
            if isinstance(payload, dict):
                message = payload.get("message")
                if isinstance(message, dict):
                    sequence = message.get("sequence")
                    payload = dict(payload)  # a copy without the message: the record's own dict is left as it is
                    del payload["message"]
                goal = payload.get("goal")
                rows((trace_id, event.get("event_id"), kind, event.get("created_at"), sequence,
                      payload.get("goal_id") or (goal.get("id") if isinstance(goal, dict) else None),
                      payload.get("trace_id") if kind in _SUB_TRACE_EVENTS else None, payload.get("status")))
            else:
                rows((trace_id, event.get("event_id"), kind, event.get("created_at"), None, None, None, None))
            payloads(payload)

    def build(self, records: list[TraceRecord], damaged: list[DamagedEntry]) -> ColumnarRead:
        """The columns appended so far, of `records` (`damaged`: the traces left out)."""
        import pyarrow as pa

        self._flush()
        # One chunk per column: what the readers' NumPy views and run-length passes expect.
        messages = pa.Table.from_batches(self._message_batches, arrow_schema(MESSAGE_FIELDS)).combine_chunks()
        events = pa.Table.from_batches(self._event_batches, arrow_schema(EVENT_FIELDS)).combine_chunks()
        self._message_batches, self._event_batches = [], []
        calls, arguments = flat_calls(self.call_rows, self.calls)
        return ColumnarRead(records=records, messages=messages, calls=calls, arguments=arguments, contents=self.contents,
                            events=events, payloads=self.payloads, damaged=damaged)


def flat_calls(rows: Sequence[int] | Any, per_message: list[list[list[Any]]]) -> tuple[pa.Table, list[Any]]:
    """The `CALL_FIELDS` table and the arguments of each message's tool calls (`per_message[i]`: the `[call id, name,
    arguments]` of the message at row `rows[i]`); the nested lists can be freed as soon as this returns."""
    import numpy as np
    import pyarrow as pa

    counts = np.fromiter(map(len, per_message), dtype=np.int64, count=len(per_message))
    flat = list(chain.from_iterable(per_message))
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    columns = {"message_row": np.repeat(np.asarray(rows, dtype=np.int64), counts),
               "call_index": np.arange(len(flat), dtype=np.int64) - starts,
               "call_id": [call[0] for call in flat], "tool_name": [call[1] for call in flat]}
    schema = arrow_schema(CALL_FIELDS)
    return (pa.table([pa.array(columns[f.name], f.type) for f in schema], schema=schema),
            [call[2] for call in flat])


def calls_of_column(rows: Any, texts: pa.ChunkedArray, *, chunk: int = 1 << 16) -> tuple[pa.Table, list[Any]]:
    """`flat_calls` of a column of the stored tool-call JSON (`[[id, name, arguments], ...]` per message; `rows`: the
    rows of its non-null values), parsed `chunk` messages at a time: the lists and the id and name strings of one
    chunk are freed (their memory reused by the next) before the next is parsed; only the arguments stay."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = pc.drop_null(texts)
    parts, arguments = [], []
    for start in range(0, len(values), chunk):
        table, parsed = flat_calls(rows[start:start + chunk], json_values(values.slice(start, chunk)))
        parts.append(table)
        arguments.extend(parsed)
    return (pa.concat_tables(parts) if parts else arrow_schema(CALL_FIELDS).empty_table()), arguments


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


def ordered(table: pa.Table, order: str) -> pa.Table:
    """`table` with each trace's rows together and by `order` (a column): as it is when they already are."""
    if table.num_rows < 2:
        return table
    import numpy as np
    import pyarrow.compute as pc

    traces = table["trace_id"].combine_chunks()
    values = np.asarray(table[order].to_numpy())
    same = np.asarray(pc.equal(traces[1:], traces[:-1]).fill_null(False))
    runs = pc.run_end_encode(traces).values
    if (values[1:][same] > values[:-1][same]).all() and len(pc.unique(runs)) == len(runs):
        return table
    return table.sort_by([("trace_id", "ascending"), (order, "ascending")])


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


EVENT_ROWS: tuple[tuple[str, str], ...] = (
    ("trace_id", "string"), ("event_id", "int64"), ("type", "string"), ("sequence", "int64"), ("shared", "int64"),
    ("data", "string"),
)
"""The events table's own columns, as `event_columns` takes them (`sequence`: a shared message's)."""


def _text(value: Any) -> str | None:
    """A lifted payload field as the SQL reads it (`->>`): text as is, anything else as its JSON."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def event_columns(rows: pa.Table) -> tuple[pa.Table, list[Any]]:
    """The `EVENT_FIELDS` table and payloads of event rows (`EVENT_ROWS`), each event's JSON parsed once here,
    as `cyber_agent/trace/sql_store.py:SQLTraceStore._EVENT_COLUMNS_SQL` lifts them; for a server whose JSON
    functions cost more than Python's parser (PostgreSQL's `->` parses a `json` value again for each field)."""
    import pyarrow as pa

    parsed = json_values(rows["data"])
    kinds, sequences, shared = (rows[name].to_pylist() for name in ("type", "sequence", "shared"))
    created: list[str | None] = []
    lifted: list[Any] = []
    goals: list[str | None] = []
    sub_traces: list[str | None] = []
    statuses: list[str | None] = []
    payloads: list[Any] = []
    for event, kind, sequence, is_shared in zip(parsed, kinds, sequences, shared, strict=True):
        created.append(_text(event.get("created_at")))
        payload = event.get("payload")
        if not isinstance(payload, dict):
            lifted.append(None if is_shared != 1 else sequence)
            goals.append(None)
            sub_traces.append(None)
            statuses.append(None)
            payloads.append(payload)
            continue
        message = payload.get("message")
        lifted.append(sequence if is_shared == 1 else message.get("sequence") if isinstance(message, dict) else None)
        if kind == "message_added" and (is_shared == 1 or isinstance(message, dict)):
            payload = {key: value for key, value in payload.items() if key != "message"}
        goal = payload.get("goal")
        goals.append(_text(payload.get("goal_id") or None) or (_text(goal.get("id")) if isinstance(goal, dict) else None))
        sub_traces.append(_text(payload.get("trace_id")) if kind in _SUB_TRACE_EVENTS else None)
        statuses.append(_text(payload.get("status")))
        payloads.append(payload)
    values = {"created_at": created, "message_sequence": lifted, "goal_id": goals, "sub_trace_id": sub_traces,
              "status": statuses}
    schema = arrow_schema(EVENT_FIELDS)
    table = pa.table([rows[f.name] if f.name in ("trace_id", "event_id", "type") else pa.array(values[f.name], f.type)
                      for f in schema], schema=schema)
    return table, payloads
