"""SQLTraceStore: what the stores that keep traces as rows share (SQLite, PostgreSQL).

Tables (each store's schema module creates them)::

    traces(trace_id, parent_trace_id, root_id, created_at, generation, data, goals)
    messages(trace_id, sequence, data, + the typed columns of `MESSAGE_COLUMNS`)
    events(trace_id, event_id, type, sequence, shared, data)
    side_records(trace_id, name, data)               resource_usage, tool_approvals, stop_request
    exchanges(trace_id, call_index, data)            recorded model exchanges (version 3)

The SQL here is written once, in the dialect both engines speak (`?` placeholders, `ON CONFLICT
... DO UPDATE`, `WITH RECURSIVE`); a store supplies the connection, the transactions and the
writer lock (`_acquire_writer` / `_release_writer`), and runs `?` as its driver needs.

A `message_added` event does not store its message a second time: its row holds the payload with
`"message":null` and `shared = 1`, and reads splice the message row back in (`_splice`).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from cyber_agent.errors import CorruptRecordError, InvalidUpdateError
from cyber_agent.trace.bulk import gc_paused
from cyber_agent.trace.columnar import (
    CALL_FIELDS,
    EVENT_FIELDS,
    MESSAGE_FIELDS,
    ColumnarRead,
    arrow_schema,
    calls_of_column,
    in_order,
    json_values,
    typed,
)
from cyber_agent.trace.events import EventType, TraceEvent, encode_event, encode_json
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.record_fields import TraceProjection, project_meta
from cyber_agent.trace.records import JSONRecord, TraceRecord, select_trees
from cyber_agent.trace.sqlite_schema import MessageColumns, message_columns
from cyber_agent.trace.store_base import BaseTraceStore, _Hot
from cyber_agent.trace.store_listing import DamagedEntry, damaged_record
from cyber_agent.trace.trace_id import validate_trace_id
from cyber_agent.trace.side_records import StopRequest, stop_request_from

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["EVENTS_SQL", "SQLTraceStore", "events_of"]

_SHARED_PREFIX = '{"message":'
_SHARED_MARK = '"payload":{"message":null'
_INSERT_TRACE = ("INSERT INTO traces (trace_id, parent_trace_id, root_id, created_at, generation, data, goals) "
                 "VALUES (?, ?, ?, ?, 0, ?, ?)")

EVENTS_SQL = ("SELECT e.event_id, e.data, m.data FROM events e LEFT JOIN messages m "
              "ON e.shared = 1 AND m.trace_id = e.trace_id AND m.sequence = e.sequence "
              "WHERE e.trace_id = ? AND e.event_id > ? ORDER BY e.event_id")
"""A trace's events after an id (parameters: trace id, event id), each with its shared message's text."""


def events_of(rows: Iterable[tuple[int, str, str | None]], where: Callable[[int], str]) -> list[TraceEvent]:
    """The events of `EVENTS_SQL` rows (`where(event_id)` names a corrupt row)."""
    out = []
    for event_id, line, message in rows:
        try:
            out.append(TraceEvent.model_validate_json(line if message is None else _splice(line, message)))
        except ValidationError as exc:
            raise CorruptRecordError(where(event_id), f"invalid event ({exc.errors()[0]['msg']})") from None
    return out


class SQLTraceStore(BaseTraceStore):
    """TraceStore logic over SQL tables; a subclass supplies connections and transactions."""

    _checkpoint_every = 1  # the trace row is updated in every write's transaction: no orphans, ever
    _defers = False
    """Whether `defer_exchange` / `defer_event` wait for the trace's next write (else they write at once)."""

    def __init__(self) -> None:
        super().__init__()
        self._deferred: dict[str, list[tuple[str, Any]]] = {}  # trace -> ("exchange", text) | ("event", (type, json))
        self._exchange_next: dict[str, int] = {}  # trace -> index its next exchange gets
        self._local = threading.local()
        self._columns: MessageColumns = message_columns()
        names = ["data", *self._columns.names()]
        self._upsert_message = (  # built once: the statement of every add
            f"INSERT INTO messages (trace_id, sequence, {', '.join(names)}) VALUES (?, ?{', ?' * len(names)}) "
            f"ON CONFLICT (trace_id, sequence) DO UPDATE SET {', '.join(f'{n} = excluded.{n}' for n in names)}")

    # ---- what a store supplies ----------------------------------------------------------------
    @abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run `sql` (`?` placeholders) and return its rows; inside a write, on the write's connection."""

    @abstractmethod
    def _execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run a statement of the write that is open on this thread."""

    @abstractmethod
    def _transaction(self, what: str) -> AbstractContextManager[None]:
        """One transaction for `what` (joins the write already open on this thread)."""

    @abstractmethod
    def _where(self, trace_id: str, table: str) -> str:
        """Where a row lives, for error messages."""

    def _announce(self, trace_id: str, event_id: int) -> None:
        """Tell listeners of a new event inside its transaction (PostgreSQL's NOTIFY; nothing here)."""

    # ---- primitives --------------------------------------------------------------------------
    def _trace_exists(self, trace_id: str) -> bool:
        return bool(self._query("SELECT 1 FROM traces WHERE trace_id = ?", (trace_id,)))

    def _trace_row(self, trace: Trace, tree: GoalTree) -> tuple[Any, ...]:
        return (trace.trace_id, trace.parent_trace_id, trace.root_id, trace.created_at.isoformat(),
                trace.model_dump_json(), tree.model_dump_json())

    def _parse(self, raw: str | None, model: type[Trace] | type[GoalTree] | type[Message], where: str) -> Any:
        if raw is None:
            return None
        try:
            return model.model_validate_json(raw)
        except ValidationError as exc:
            raise CorruptRecordError(where, f"invalid record ({exc.errors()[0]['msg']})") from None

    def _read_trace(self, trace_id: str) -> Trace | None:
        rows = self._query("SELECT data FROM traces WHERE trace_id = ?", (trace_id,))
        result: Trace | None = self._parse(rows[0][0], Trace, self._where(trace_id, "traces")) if rows else None
        return result

    def _write_trace(self, trace: Trace) -> None:
        self._execute("UPDATE traces SET data = ? WHERE trace_id = ?", (trace.model_dump_json(), trace.trace_id))

    def _checkpoint(self, hot: _Hot) -> None:
        # Trace and goal tree in one statement (the base class writes them one after the other).
        if hot.goals_dirty:
            self._execute("UPDATE traces SET data = ?, goals = ? WHERE trace_id = ?",
                          (hot.trace.model_dump_json(), hot.tree.model_dump_json(), hot.trace.trace_id))
            hot.goals_dirty = False
        else:
            self._write_trace(hot.trace)
        hot.unflushed = 0
        hot.flushed_at = time.monotonic()

    def _read_goals(self, trace_id: str) -> GoalTree | None:
        rows = self._query("SELECT goals FROM traces WHERE trace_id = ?", (trace_id,))
        result: GoalTree | None = self._parse(rows[0][0], GoalTree, self._where(trace_id, "goals")) if rows else None
        return result

    def _write_goals(self, trace_id: str, tree: GoalTree) -> None:
        self._execute("UPDATE traces SET goals = ? WHERE trace_id = ?", (tree.model_dump_json(), trace_id))

    def _read_message(self, trace_id: str, sequence: int) -> Message | None:
        rows = self._query("SELECT data FROM messages WHERE trace_id = ? AND sequence = ?", (trace_id, sequence))
        result: Message | None = (self._parse(rows[0][0], Message, self._where(f"{trace_id}/{sequence}", "messages"))
                                  if rows else None)
        return result

    def _write_message(self, trace_id: str, sequence: int, data: str) -> None:
        self._execute(self._upsert_message, (trace_id, sequence, data, *self._columns.row(data)))
        self._local.written = (trace_id, sequence, data)

    def _rewrite_message(self, trace_id: str, sequence: int, data: str) -> None:
        # Its event first takes the text it announced (one statement, no read); adds never need this.
        self._execute(
            "UPDATE events SET shared = 0, data = replace(data, ?, ? || (SELECT m.data FROM messages m "
            "WHERE m.trace_id = events.trace_id AND m.sequence = events.sequence)) "
            # Row values through the (trace_id, sequence) index: with `shared` beside them, SQLite's
            # planner scans the trace's events by primary key instead.
            "WHERE (trace_id, event_id) IN (SELECT trace_id, event_id FROM events WHERE trace_id = ? AND sequence = ?) "
            "AND shared = 1",
            (_SHARED_MARK, '"payload":{"message":', trace_id, sequence))
        self._write_message(trace_id, sequence, data)

    def _read_all_messages(self, trace_id: str) -> list[Message]:
        rows = self._query("SELECT sequence, data FROM messages WHERE trace_id = ? ORDER BY sequence", (trace_id,))
        return [self._parse(data, Message, self._where(f"{trace_id}/{seq}", "messages")) for seq, data in rows]

    def _delete_message(self, trace_id: str, sequence: int) -> None:
        self._execute("DELETE FROM messages WHERE trace_id = ? AND sequence = ?", (trace_id, sequence))

    def _append_event_line(self, trace_id: str, line: str) -> None:
        raise NotImplementedError("a SQL store writes events through _emit")  # pragma: no cover

    def _emit(self, hot: _Hot, event_type: str, payload_json: str) -> int:
        trace_id = hot.trace.trace_id
        event_id = hot.last_event_id + 1
        sequence, shared = None, 0
        written = getattr(self._local, "written", None)
        if event_type == "message_added" and written is not None and written[0] == trace_id:
            _, sequence, data = written
            if payload_json.startswith(data, len(_SHARED_PREFIX)):
                payload_json = f"{_SHARED_PREFIX}null{payload_json[len(_SHARED_PREFIX) + len(data):]}"
                shared = 1
        self._local.written = None
        try:
            self._execute(
                "INSERT INTO events (trace_id, event_id, type, sequence, shared, data) VALUES (?, ?, ?, ?, ?, ?)",
                (trace_id, event_id, event_type, sequence, shared, encode_event(event_id, trace_id, event_type, payload_json)))
            self._announce(trace_id, event_id)
        except BaseException:
            self._hot.pop(trace_id, None)
            raise
        hot.last_event_id = event_id
        return event_id

    def _read_events(self, trace_id: str, since_event_id: int) -> list[TraceEvent]:
        rows = self._query(EVENTS_SQL, (trace_id, max(since_event_id, 0)))
        return events_of(rows, lambda event_id: self._where(f"{trace_id}/{event_id}", "events"))

    def _repair(self, trace_id: str) -> tuple[int, int]:
        # A message and its event commit together: nothing is ever half-written.
        # ORDER BY ... LIMIT 1, not max(): PostgreSQL then always walks the index backwards, even
        # with stale statistics (max() over a freshly imported 60k-event trace took 80 ms).
        (last_event, last_message), = self._query(
            "SELECT coalesce((SELECT event_id FROM events WHERE trace_id = ? ORDER BY event_id DESC LIMIT 1), 0), "
            "coalesce((SELECT sequence FROM messages WHERE trace_id = ? ORDER BY sequence DESC LIMIT 1), 0)",
            (trace_id, trace_id))
        return int(last_event), int(last_message)

    def _read_side_record(self, trace_id: str, name: str) -> dict[str, Any] | None:
        rows = self._query("SELECT data FROM side_records WHERE trace_id = ? AND name = ?", (trace_id, name))
        return self._side_record(trace_id, name, rows[0][0] if rows else None)

    def _write_side_record(self, trace_id: str, name: str, data: str) -> None:
        with self._transaction(trace_id):
            self._execute("INSERT INTO side_records (trace_id, name, data) VALUES (?, ?, ?) "
                          "ON CONFLICT (trace_id, name) DO UPDATE SET data = excluded.data", (trace_id, name, data))

    def _append_exchange_line(self, trace_id: str, line: str) -> int:
        with self._transaction(trace_id):
            rows = self._query("SELECT coalesce(max(call_index), -1) + 1 FROM exchanges WHERE trace_id = ?", (trace_id,))
            index = int(rows[0][0])
            self._execute("INSERT INTO exchanges (trace_id, call_index, data) VALUES (?, ?, ?)", (trace_id, index, line))
        if trace_id in self._exchange_next:
            self._exchange_next[trace_id] = index + 1 + sum(1 for kind, _ in self._deferred.get(trace_id, ()) if kind == "exchange")
        return index

    def _read_exchange_lines(self, trace_id: str) -> list[str]:
        return [str(data) for (data,) in self._query(
            "SELECT data FROM exchanges WHERE trace_id = ? ORDER BY call_index", (trace_id,))]

    async def get_stop_requests(self, trace_ids: Sequence[str]) -> dict[str, StopRequest]:
        """The persisted stop requests among `trace_ids`, read with one query."""
        ids = list(dict.fromkeys(trace_ids))
        if not ids:
            return {}
        for trace_id in ids:
            validate_trace_id(trace_id)
        rows = self._query(f"SELECT trace_id, data FROM side_records WHERE name = 'stop_request' "
                           f"AND trace_id IN ({', '.join('?' * len(ids))})", ids)
        out = {}
        for trace_id, data in rows:
            request = stop_request_from(json.loads(data), f"{trace_id}/stop_request.json")
            if request is not None:
                out[trace_id] = request
        return out

    # ---- records written with the trace's next write ------------------------------------------
    async def defer_exchange(self, trace_id: str, record: Mapping[str, Any]) -> int:
        """`append_exchange`, written in the trace's next write's transaction (its own on SQLite costs a commit).

        What the runner's recorder uses: the next write of a run after a model call is the reply's
        message, so the exchange and the message it produced commit together (a crash keeps both or
        neither). Reads of this instance (`get_exchanges`, `read_records`, `get_events`) and
        `flush()` write what is pending first; other processes see it once the next write commits.
        """
        if not self._defers:
            return await self.append_exchange(trace_id, record)
        validate_trace_id(trace_id)
        text = encode_json(dict(record), "exchange")
        with self._lock(trace_id):
            self._require_exists(trace_id)
            index = self._exchange_next.get(trace_id)
            if index is None:
                (index,), = self._query("SELECT coalesce(max(call_index), -1) + 1 FROM exchanges WHERE trace_id = ?",
                                        (trace_id,))
                index = int(index) + sum(1 for kind, _ in self._deferred.get(trace_id, ()) if kind == "exchange")
            self._exchange_next[trace_id] = index + 1
            self._deferred.setdefault(trace_id, []).append(("exchange", text))
        return index

    async def create_trace(self, trace: Trace, *, goal_tree: GoalTree | None = None) -> str:
        """`BaseTraceStore.create_trace`; a new trace's exchange count is known (0) without a query."""
        trace_id = await super().create_trace(trace, goal_tree=goal_tree)
        self._exchange_next[trace_id] = 0
        return trace_id

    async def defer_event(self, trace_id: str, event_type: EventType, payload: dict[str, Any]) -> None:
        """`append_event`, written (ids in order) at the start of the trace's next write: for a record that may
        commit with what follows it, such as the start of a call to an inline tool with its result."""
        if not self._defers:
            await self.append_event(trace_id, event_type, payload)
            return
        payload_json = self._event_json(trace_id, event_type, payload)
        with self._lock(trace_id):
            self._require_exists(trace_id)
            self._deferred.setdefault(trace_id, []).append(("event", (event_type, payload_json)))

    def _write_deferred(self, trace_id: str, hot: _Hot | None) -> list[Any] | None:
        pending = self._deferred.pop(trace_id, None)
        if not pending:
            return None
        taken, left = [], []
        for kind, value in pending:
            if kind == "exchange":
                # The index is computed in the statement, so another writer's exchange never collides with it.
                self._execute("INSERT INTO exchanges (trace_id, call_index, data) SELECT ?, coalesce(max(call_index), -1) + 1, ? "
                              "FROM exchanges WHERE trace_id = ?", (trace_id, value, trace_id))
                taken.append((kind, value))
            elif hot is not None:
                self._emit(hot, *value)
                taken.append((kind, value))
            else:
                left.append((kind, value))  # an event needs the live state: the next full write takes it
        if left:
            self._deferred[trace_id] = left
        return taken

    def _restore_deferred(self, trace_id: str, taken: list[Any] | None) -> None:
        if taken:
            self._deferred[trace_id] = taken + self._deferred.get(trace_id, [])

    def _settle(self, trace_id: str | None = None) -> None:
        """Write the deferred records of `trace_id` (of every trace when None) in one write each."""
        for pending in ([trace_id] if trace_id is not None else list(self._deferred)):
            if self._deferred.get(pending):
                with self._writing(pending):
                    pass

    async def get_events(self, trace_id: str, since_event_id: int = 0) -> list[TraceEvent]:
        """Events with id greater than `since_event_id`, in order (this instance's deferred ones written first)."""
        if self._deferred and validate_trace_id(trace_id) in self._deferred:
            self._settle(trace_id)
        return await super().get_events(trace_id, since_event_id)

    async def get_exchanges(self, trace_id: str) -> list[dict[str, Any]]:
        """The trace's recorded exchanges in order (this instance's deferred ones written first)."""
        if self._deferred and validate_trace_id(trace_id) in self._deferred:
            self._settle(trace_id)
        return await super().get_exchanges(trace_id)

    async def read_records(self, root_ids: Sequence[str] | None = None, *, messages: bool = True, events: bool = True,
                           exchanges: bool = False, goals: bool = True, fields: Collection[str] | None = None,
                           subtrees: bool = True) -> list[TraceRecord]:
        """`BaseTraceStore.read_records`, this instance's deferred records written first."""
        if self._deferred:
            self._settle()
        return await super().read_records(root_ids, messages=messages, events=events, exchanges=exchanges, goals=goals,
                                          fields=fields, subtrees=subtrees)

    async def flush(self) -> None:
        """Write every deferred record, then checkpoint (see `BaseTraceStore.flush`)."""
        if self._deferred:
            self._settle()
        await super().flush()

    # ---- import: one transaction per trace --------------------------------------------------
    @contextmanager
    def _importing(self, trace_id: str) -> Iterator[None]:
        with self._transaction(trace_id):
            yield

    def _import_events(self, trace_id: str, events: Sequence[JSONRecord], messages: Mapping[int, JSONRecord]) -> None:
        for event in events:
            payload = event.get("payload") or {}
            message = payload.get("message") if event.get("type") == "message_added" else None
            sequence = message.get("sequence") if isinstance(message, dict) else None
            shared = sequence is not None and messages.get(sequence) == message
            row = {**event, "payload": {**payload, "message": None}} if shared else event
            self._execute("INSERT INTO events (trace_id, event_id, type, sequence, shared, data) VALUES (?, ?, ?, ?, ?, ?)",
                          (trace_id, int(event["event_id"]), str(event.get("type")), sequence, int(shared),
                           _event_json(row)))

    # ---- reads that must see other processes' writes ------------------------------------------
    async def get_trace(self, trace_id: str) -> Trace | None:
        """Return the trace as committed (every process's writes included), or None."""
        validate_trace_id(trace_id)
        return self._read_trace(trace_id)

    async def get_goal_tree(self, trace_id: str) -> GoalTree | None:
        """Return the trace's goal tree as committed, or None."""
        validate_trace_id(trace_id)
        return self._read_goals(trace_id)

    def _all_traces(self) -> list[Trace]:
        return self._list_entries()[0]

    def _list_entries(self) -> tuple[list[Trace], list[DamagedEntry]]:
        traces, damaged = [], []
        for trace_id, data in self._query("SELECT trace_id, data FROM traces"):
            try:
                traces.append(Trace.model_validate_json(data))
            except ValidationError as exc:
                damaged.append(DamagedEntry(name=trace_id, path=self._where(trace_id, "traces"), kind="corrupt",
                                            detail=f"invalid trace record ({exc.errors()[0]['msg']}); "
                                                   "restore it from a backup or delete its rows"))
        return traces, damaged

    # ---- bulk reads: JSON text parsed once, no pydantic -------------------------------------
    def _record_metas(self, trace_ids: Collection[str] | None = None) -> tuple[list[JSONRecord], list[DamagedEntry]]:
        # The key columns only: trees are selected before any trace's JSON is parsed (`_read_rows` parses it).
        sql = "SELECT trace_id, parent_trace_id, created_at FROM traces"
        if trace_ids is None:
            rows = self._query(sql)
        else:
            ids = list(trace_ids)
            rows = [row for start in range(0, len(ids), 500) for row in self._query(
                f"{sql} WHERE trace_id IN ({', '.join('?' * len(ids[start:start + 500]))})", ids[start:start + 500])]
        return [{"trace_id": t, "parent_trace_id": p, "created_at": c} for t, p, c in rows], []

    def _read_record(self, meta: JSONRecord, *, messages: bool, events: bool, goals: bool = True,
                     fields: TraceProjection | None = None) -> TraceRecord:
        """One trace's record; a damaged row raises CorruptRecordError naming its table (the reader skips the trace)."""
        where = ["traces.data"]
        try:
            return self._read_rows(meta["trace_id"], messages=messages, events=events, goals=goals, fields=fields,
                                   where=where)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptRecordError(self._where(meta["trace_id"], where[0]),
                                     f"invalid JSON ({type(exc).__name__}: {str(exc)[:200]})") from None

    def _record_location(self, meta: JSONRecord) -> str:
        return self._where(str(meta.get("trace_id")), "traces")

    def _read_rows(self, trace_id: str, *, messages: bool, events: bool, goals: bool, fields: TraceProjection | None,
                   where: list[str]) -> TraceRecord:
        loads = json.loads
        rows = self._query(f"SELECT data{', goals' if goals else ''} FROM traces WHERE trace_id = ?", (trace_id,))
        if not rows:
            raise KeyError(f"trace {trace_id!r} is gone since the listing")
        meta = loads(rows[0][0])
        if not isinstance(meta, dict):
            raise TypeError(f"the trace record is a {type(meta).__name__}, not an object")
        if fields is not None:
            meta = project_meta(meta, fields)
        where[0] = "traces.goals"
        goal_tree = loads(rows[0][1]) if goals else None
        where[0] = "messages.data"
        parsed = ([loads(data) for (data,) in self._query(
            "SELECT data FROM messages WHERE trace_id = ? ORDER BY sequence", (trace_id,))] if messages else [])
        by_sequence = {m["sequence"]: m for m in parsed}
        out_events = []
        where[0] = "events.data"
        if events:
            for line, sequence, shared in self._query(
                    "SELECT data, sequence, shared FROM events WHERE trace_id = ? ORDER BY event_id", (trace_id,)):
                event = loads(line)
                if shared:
                    message = by_sequence.get(sequence)
                    if message is None:
                        (raw,), = self._query("SELECT data FROM messages WHERE trace_id = ? AND sequence = ?",
                                              (trace_id, sequence))
                        message = loads(raw)
                    event["payload"]["message"] = message  # shared with the message list, as every store does
                out_events.append(event)
        where[0] = "side_records"
        return TraceRecord(
            trace=meta, goal_tree=goal_tree, messages=parsed, events=out_events,
            resource_usage=self._read_side_record(trace_id, "resource_usage"),
            tool_approvals=self._read_side_record(trace_id, "tool_approvals"),
        )

    # ---- columnar reads (`cyber_agent/trace/columnar.py`): what the analysis frames are built from ---------
    # Each query is (SELECT ... FROM table, a condition after the trace's, its order within a trace);
    # `_columnar_session` runs it for many traces. The message query reads typed columns only (on SQLite the
    # covering index `messages_columns`, `sqlite_schema.py:_V4`): no row's JSON is read for it.
    _MESSAGE_COLUMNS_SQL = ("SELECT " + ", ".join(name for name, _ in MESSAGE_FIELDS) + ", tool_calls FROM messages",
                            "", "sequence")
    # The JSON content of a refused tool result that is not text (rare; SQLite's partial index `messages_refused`);
    # None: the messages query reads it as its column `content` (null on every other row).
    _REFUSED_SQL: tuple[str, str, str] | None = ("SELECT trace_id, sequence, data -> '$.content' AS content FROM messages",
                    " AND role = 'tool' AND refused IS NOT NULL AND content_is_text = 0", "sequence")
    # A `message_added` payload without its message (the messages table has it), as the file store's reader gives it;
    # the payload fields the events frame lifts into columns, read here so no Python loop walks the payloads.
    _EVENT_COLUMNS_SQL = ("""
SELECT trace_id, event_id, type, data ->> '$.created_at' AS created_at,
       CASE WHEN shared = 1 THEN sequence ELSE data ->> '$.payload.message.sequence' END AS message_sequence,
       coalesce(nullif(data ->> '$.payload.goal_id', ''), data ->> '$.payload.goal.id') AS goal_id,
       CASE WHEN type IN ('sub_trace_started', 'sub_trace_completed') THEN data ->> '$.payload.trace_id' END
           AS sub_trace_id,
       data ->> '$.payload.status' AS status,
       CASE WHEN type = 'message_added' AND (shared = 1 OR json_type(data, '$.payload.message') = 'object')
            THEN json_remove(data -> '$.payload', '$.message') ELSE data -> '$.payload' END AS payload
FROM events""", "", "event_id")
    _IDS_PER_QUERY = 500

    @contextmanager
    def _columnar_session(self, *, every: bool = False) -> Iterator[Callable[[tuple[str, str, str], Sequence[str], Any], Any]]:
        """A function running a query (`_MESSAGE_COLUMNS_SQL`'s shape) for the traces `ids` and returning their
        rows as an Arrow table of `schema`, trace after trace in the order of `ids`. This default reads
        chunks of ids with `IN (...)` and builds the table from the driver's rows; a store with an
        Arrow-native driver overrides it. `every`: `ids` are every trace of the store (see `_columns_of`)."""
        import pyarrow as pa

        def run(query: tuple[str, str, str], ids: Sequence[str], schema: pa.Schema) -> pa.Table:
            select, condition, order = query
            parts = []
            for start in range(0, len(ids), self._IDS_PER_QUERY):
                chunk = list(ids[start:start + self._IDS_PER_QUERY])
                sql = f"{select} WHERE trace_id IN ({', '.join('?' * len(chunk))}){condition} ORDER BY trace_id, {order}"
                rows, _ = self._rows_and_names(sql, chunk)
                if rows:
                    parts.append(pa.table([pa.array(column, f.type) for column, f in
                                           zip(zip(*rows, strict=True), schema, strict=True)], schema=schema))
            return in_order(pa.concat_tables(parts) if parts else schema.empty_table(), ids)

        yield run

    def _rows_and_names(self, sql: str, params: Sequence[Any]) -> tuple[list[Any], list[str]]:
        """A query's rows and column names, errors as the driver raised them (`_is_damage` sorts them)."""
        raise NotImplementedError  # pragma: no cover - every SQL store supplies it

    def _is_damage(self, exc: BaseException) -> bool:
        """Whether `exc`, raised by a columnar read, means a row's data is damaged (not that the database is
        locked or unreachable)."""
        return isinstance(exc, ValueError | KeyError | TypeError)

    def read_columns(self, root_ids: Sequence[str] | None = None, *, messages: bool = True,
                     events: bool = True) -> ColumnarRead:
        """The trees of `read_records` (read without messages and events), their messages and events as Arrow
        columns (`cyber_agent/trace/columnar.py`) read with a few queries for all of them; a trace whose rows
        are damaged (an event's or a tool call's JSON) is left out and named in `ColumnarRead.damaged`."""
        if self._deferred:
            self._settle()
        records, damaged = self._records_without_rows(root_ids)
        read = self._columns_of(records, messages, events, every=root_ids is None)
        bad = {entry.name for entry in read.damaged}
        return dataclasses.replace(read, records=[r for r in records if r.trace_id not in bad],
                                   damaged=[*damaged, *read.damaged])

    def _records_without_rows(self, root_ids: Sequence[str] | None) -> tuple[list[TraceRecord], list[DamagedEntry]]:
        """`_read_selected` without messages and events: the goal trees and side records of the selected traces
        read with one query each (per `_IDS_PER_QUERY` traces), not three queries per trace (on PostgreSQL each
        a round trip to the server); a trace with a damaged row is left out and named."""
        if isinstance(root_ids, str):
            raise InvalidUpdateError(f"root_ids must be a sequence of trace ids, got the string {root_ids!r}")
        for root_id in root_ids or ():
            validate_trace_id(root_id)
        with gc_paused():
            rows: dict[str, tuple[Any, Any]]
            if root_ids is None:  # every trace: its JSON and goal tree in one query (one round trip less)
                metas, damaged, goals = self._metas_and_goals()
                selected = select_trees(metas, None)
                rows = {meta["trace_id"]: (meta, goals[meta["trace_id"]]) for meta in metas}
            else:  # the selection reads the key columns only (`_record_metas`); then the selected traces' JSON
                metas, damaged = self._record_metas()
                selected = select_trees(metas, root_ids)
                rows = {trace_id: (data, goals) for trace_id, data, goals in self._rows_of(
                    "SELECT trace_id, data, goals FROM traces", [meta["trace_id"] for meta in selected])}
            ids = None if root_ids is None else [meta["trace_id"] for meta in selected]
            sides: dict[tuple[str, str], str] = {(trace_id, name): data for trace_id, name, data in self._rows_of(
                "SELECT trace_id, name, data FROM side_records WHERE name IN ('resource_usage', 'tool_approvals')", ids)}
            records = []
            for meta in selected:
                trace_id = meta["trace_id"]
                try:
                    data, goals = rows[trace_id]
                    column = "traces.data"
                    try:
                        trace = data if isinstance(data, dict) else json.loads(data)
                        column = "traces.goals"
                        tree = json.loads(goals)
                    except (ValueError, TypeError) as exc:
                        raise CorruptRecordError(self._where(trace_id, column),
                                                 f"invalid JSON ({type(exc).__name__}: {str(exc)[:200]})") from None
                    records.append(TraceRecord(
                        trace=trace, goal_tree=tree, messages=[], events=[],
                        resource_usage=self._side_record(trace_id, "resource_usage", sides.get((trace_id, "resource_usage"))),
                        tool_approvals=self._side_record(trace_id, "tool_approvals", sides.get((trace_id, "tool_approvals")))))
                except (CorruptRecordError, ValueError, KeyError, TypeError) as exc:
                    damaged.append(damaged_record(trace_id, self._record_location(meta), exc))
        return records, damaged

    def _metas_and_goals(self) -> tuple[list[JSONRecord], list[DamagedEntry], dict[str, str]]:
        """`_record_metas` with each trace's goal-tree JSON (not parsed yet)."""
        metas, damaged, goals = [], [], {}
        for trace_id, data, tree in self._query("SELECT trace_id, data, goals FROM traces"):
            try:
                metas.append(json.loads(data))
            except ValueError as exc:
                damaged.append(DamagedEntry(name=trace_id, path=self._where(trace_id, "traces"), kind="corrupt",
                                            detail=f"invalid JSON ({exc})"))
                continue
            goals[trace_id] = tree
        return metas, damaged, goals

    def _rows_of(self, sql: str, ids: Sequence[str] | None) -> list[Any]:
        """The rows of `sql` (a SELECT of one table, maybe with a WHERE) of the traces `ids` (every trace when None)."""
        if ids is None:
            return self._query(sql)
        rows: list[Any] = []
        glue = " AND " if " WHERE " in sql else " WHERE "
        for start in range(0, len(ids), self._IDS_PER_QUERY):
            chunk = list(ids[start:start + self._IDS_PER_QUERY])
            rows.extend(self._query(f"{sql}{glue}trace_id IN ({', '.join('?' * len(chunk))})", chunk))
        return rows

    def _side_record(self, trace_id: str, name: str, raw: str | None) -> dict[str, Any] | None:
        """A side record's JSON text parsed (as `_read_side_record` reads it), None when absent."""
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise CorruptRecordError(self._where(trace_id, name), f"invalid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise CorruptRecordError(self._where(trace_id, name), f"expected a JSON object, got {type(data).__name__}")
        return data

    def _columns_of(self, records: Sequence[TraceRecord], messages: bool, events: bool, *,
                    every: bool = False) -> ColumnarRead:
        """The columns of `records`' traces; `every`: they are every trace of the store (a store may then read
        its tables whole and keep the rows of `records`' traces, rather than look each trace up)."""
        ids = [record.trace_id for record in records]
        try:
            return self._read_columns(ids, messages, events, every=every)
        except Exception as exc:
            if not self._is_damage(exc):
                raise
        healthy, damaged = [], []
        for trace_id in ids:  # find the damaged traces one by one (rare)
            try:
                self._read_columns([trace_id], messages, events)
            except Exception as exc:
                if not self._is_damage(exc):
                    raise
                damaged.append(damaged_record(trace_id, self._where(trace_id, "messages/events"), exc))
            else:
                healthy.append(trace_id)
        return dataclasses.replace(self._read_columns(healthy, messages, events), damaged=damaged)

    _parallel_columns = False
    """Whether `_read_columns` reads the messages and the events at once, each in its own session (a driver that
    lets go of the GIL while it reads: the other part's JSON is parsed meanwhile)."""

    def _read_columns(self, ids: Sequence[str], messages: bool, events: bool, *, every: bool = False) -> ColumnarRead:
        empty: tuple[Any, ...] = (arrow_schema(MESSAGE_FIELDS).empty_table(), arrow_schema(CALL_FIELDS).empty_table(), [], {})
        if self._parallel_columns and messages and events and ids:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cyber-agent-columns") as pool:
                later = pool.submit(self._in_session, self._event_columns, ids, every)
                table, calls, arguments, contents = self._in_session(self._message_columns, ids, every)
                event_table, payloads = later.result()
        else:
            table, calls, arguments, contents = self._in_session(self._message_columns, ids, every) if messages and ids \
                else empty
            event_table, payloads = self._in_session(self._event_columns, ids, every) if events and ids else (
                arrow_schema(EVENT_FIELDS).empty_table(), [])
        return ColumnarRead(records=[], messages=table, calls=calls, arguments=arguments, contents=contents,
                            events=event_table, payloads=payloads)

    def _in_session(self, part: Callable[[Callable[..., Any], Sequence[str]], Any], ids: Sequence[str],
                    every: bool = False) -> Any:
        with self._columnar_session(every=every) as run:
            return part(run, ids)

    def _message_columns(self, run: Callable[..., Any], ids: Sequence[str]) -> tuple[
            pa.Table, pa.Table, list[Any], dict[tuple[str, int], Any]]:
        """The messages table (`MESSAGE_FIELDS`), the calls table and arguments, the refused contents of `ids`."""
        import numpy as np
        import pyarrow as pa

        extra = ["tool_calls"] if self._REFUSED_SQL is not None else ["tool_calls", "content"]
        schema = pa.schema([*arrow_schema(MESSAGE_FIELDS), *((name, pa.string()) for name in extra)])
        table = typed(run(self._MESSAGE_COLUMNS_SQL, ids, schema), schema)
        if self._REFUSED_SQL is not None:
            refused_schema = pa.schema([("trace_id", pa.string()), ("sequence", pa.int64()), ("content", pa.string())])
            refused = typed(run(self._REFUSED_SQL, ids, refused_schema), refused_schema)
        else:  # the messages query read them (`content` is null on every other row)
            refused = table.select(["trace_id", "sequence", "content"]).filter(table["content"].is_valid())
        contents = {(trace_id, sequence): json.loads(content) for trace_id, sequence, content in zip(
            *(refused[name].to_pylist() for name in ("trace_id", "sequence", "content")), strict=True)}
        rows: Any = np.flatnonzero(np.asarray(table["tool_calls"].is_valid())) if len(table) else []
        calls, arguments = calls_of_column(rows, table["tool_calls"])
        return table.drop_columns(extra), calls, arguments, contents

    def _event_columns(self, run: Callable[..., Any], ids: Sequence[str]) -> tuple[pa.Table, list[Any]]:
        """The events table (`EVENT_FIELDS`) and the payloads of the traces `ids`, the fields lifted by SQL."""
        import pyarrow as pa

        schema = pa.schema([*arrow_schema(EVENT_FIELDS), pa.field("payload", pa.string())])
        table = typed(run(self._EVENT_COLUMNS_SQL, ids, schema), schema)
        return table.drop_columns(["payload"]), json_values(table["payload"], keep_nulls=True)

    def trace_ids_under(self, root_ids: Sequence[str]) -> list[str]:
        """Every trace id of the trees under `root_ids` (a recursive SQL walk of `parent_trace_id`)."""
        if not root_ids:
            return []
        rows = self._query(
            f"WITH RECURSIVE tree(id) AS (SELECT trace_id FROM traces WHERE trace_id IN ({', '.join('?' * len(root_ids))}) "
            "UNION SELECT t.trace_id FROM traces t JOIN tree ON t.parent_trace_id = tree.id) SELECT id FROM tree",
            list(root_ids))
        return [r[0] for r in rows]


def _event_json(event: JSONRecord) -> str:
    """An event in `encode_event`'s key order and spacing, so `_splice` finds its marker."""
    payload = event.get("payload") or {}
    rest = json.dumps({k: v for k, v in payload.items() if k != "message"}, ensure_ascii=False, separators=(",", ":"))
    if "message" in payload:
        message = json.dumps(payload["message"], ensure_ascii=False, separators=(",", ":"))
        body = f'{{"message":{message}' + ("}" if rest == "{}" else f",{rest[1:]}")
    else:
        body = rest
    return encode_event(int(event["event_id"]), str(event["trace_id"]), str(event["type"]), body,
                        created_at=str(event.get("created_at") or "") or None)


def _splice(line: str, message: str) -> str:
    """Put a shared event's message text back where its row holds `null`."""
    return line.replace(_SHARED_MARK, f'"payload":{{"message":{message}', 1)
