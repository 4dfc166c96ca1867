"""The messages, tool-calls and events frames of a SQLite or PostgreSQL store, read with SQL (issue 16).

The records path (`frame_rows.py`) parses every message's JSON in Python. Here nothing parses
a message: its frame values were computed once when it was written
(`cyber_agent/trace/sqlite_schema.py:message_values`) and are read as plain columns, transposed
at C speed. Python parses, per trace, one JSON array of its tool calls (kept beside each assistant message when it
was written) and one of its event payloads (a `message_added` payload without its message). The frames are the
records path's exactly (`tests/notebook/test_sql_frames.py` compares them).

A trace whose rows cannot be read (a damaged `events.data` or tool-call JSON) is left out whole
and reported in `damaged` (`cyber_agent/trace/store_listing.py:damaged_record`), so the healthy
traces still load, as the store's listing does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from cyber_agent.notebook.frame_rows import (
    _CALL_COLUMNS,
    _EVENT_COLUMNS,
    _MESSAGE_COLUMNS,
    _SUB_TRACE_EVENTS,
    Columns,
    MessageTables,
    _add_calls,
    _main_path,
)
from cyber_agent.trace.records import TraceRecord
from cyber_agent.trace.sqlite_store import SQLiteTraceStore
from cyber_agent.trace.store_listing import DamagedEntry, damaged_record

__all__ = ["sql_dialect", "sql_event_rows", "sql_message_tables"]

Dialect = Literal["sqlite", "postgres"]


def sql_dialect(store: object) -> Dialect | None:
    """Which SQL frames path reads `store` ("sqlite", "postgres"), or None (the records path)."""
    if isinstance(store, SQLiteTraceStore):
        return "sqlite"
    try:
        from cyber_agent.trace.postgres_store import PostgresTraceStore
    except ImportError:  # the postgres extra is not installed: no such store can exist
        return None
    return "postgres" if isinstance(store, PostgresTraceStore) else None


@contextmanager
def _session(store: Any) -> Iterator[tuple[Any, Dialect]]:
    dialect = sql_dialect(store)
    if dialect == "sqlite":
        yield store.connection(), "sqlite"
    elif dialect == "postgres":
        with store.connection() as conn:  # a pooled connection, lent for the whole read
            yield conn, "postgres"
    else:
        raise TypeError(f"no SQL frames path for {type(store).__name__}; use frames_from_records")

_MESSAGES_SQL = """
SELECT message_id, sequence, role, goal_id, parent_sequence, branch, tool_call_id, tool_name, description,
       prompt_tokens, completion_tokens, cached_tokens, prompt_tokens + completion_tokens, cost, duration_ms,
       created_at, text, n_tool_calls, tool_call_names, is_error, refused, model,
       usage_estimated, cost_estimated, cost_unpriced, truncated, summarized, content_is_text
FROM messages WHERE trace_id = {p} ORDER BY sequence
"""
_MESSAGES = {"sqlite": _MESSAGES_SQL.format(p="?"), "postgres": _MESSAGES_SQL.format(p="%s")}
# Columns of a `_MESSAGES` row: the messages frame's (`_MESSAGE_COLUMNS`), then content_is_text.
_FLAGS = ("usage_estimated", "cost_estimated", "cost_unpriced", "truncated", "summarized")
_CALLS = {"sqlite": """
SELECT json_group_array(json(tool_calls)) FROM (
    SELECT tool_calls FROM messages WHERE trace_id = ? AND n_tool_calls > 0 ORDER BY sequence)
""", "postgres": """
SELECT coalesce(json_agg(tool_calls::json ORDER BY sequence), '[]'::json)::text
FROM messages WHERE trace_id = %s AND n_tool_calls > 0
"""}
_EVENTS = {"sqlite": """
SELECT event_id, type, data ->> '$.created_at', CASE WHEN shared = 1 THEN sequence ELSE data ->> '$.payload.message.sequence' END
FROM events WHERE trace_id = ? ORDER BY event_id
""", "postgres": """
SELECT event_id, type, data::json ->> 'created_at',
       CASE WHEN shared = 1 THEN sequence ELSE (data::json -> 'payload' -> 'message' ->> 'sequence')::bigint END
FROM events WHERE trace_id = %s ORDER BY event_id
"""}
# One JSON array per trace: one json.loads of a long text costs far less than one per event.
_PAYLOADS = {"sqlite": """
SELECT json_group_array(json(payload)) FROM (
    SELECT CASE WHEN type = 'message_added' AND (shared = 1 OR json_type(data, '$.payload.message') = 'object')
                THEN json_remove(data -> '$.payload', '$.message') ELSE data -> '$.payload' END AS payload
    FROM events WHERE trace_id = ? ORDER BY event_id)
""", "postgres": """
SELECT coalesce(json_agg(CASE WHEN type = 'message_added'
                                   AND (shared = 1 OR json_typeof(data::json -> 'payload' -> 'message') = 'object')
                              THEN ((data::jsonb -> 'payload') - 'message')::json ELSE data::json -> 'payload' END
                         ORDER BY event_id), '[]'::json)::text
FROM events WHERE trace_id = %s
"""}
_CONTENT = "SELECT data FROM messages WHERE trace_id = {p} AND sequence = {p}"


def _is_damage(dialect: Dialect, exc: Exception) -> bool:
    """Whether `exc` means a row's data is damaged (not that the database is locked or unreachable)."""
    if isinstance(exc, ValueError | KeyError | TypeError):
        return True
    if dialect == "postgres":
        import psycopg

        return isinstance(exc, psycopg.DataError)
    import sqlite3

    return isinstance(exc, sqlite3.OperationalError) and "JSON" in str(exc)  # "malformed JSON"


@contextmanager
def _one_trace(dialect: Dialect, trace_id: str, where: str, damaged: list[DamagedEntry] | None,
               lists: Sequence[list[Any]]) -> Iterator[None]:
    """Read one trace's rows; if they are damaged, undo what it added to `lists` and report it."""
    marks = [len(values) for values in lists]
    try:
        yield
    except Exception as exc:
        if damaged is None or not _is_damage(dialect, exc):
            raise
        for values, mark in zip(lists, marks, strict=True):
            del values[mark:]
        damaged.append(damaged_record(trace_id, where, exc))


def _where(store: Any, trace_id: str, table: str) -> str:
    return str(store._where(trace_id, table))


def sql_message_tables(store: Any, records: Sequence[TraceRecord],
                       damaged: list[DamagedEntry] | None = None) -> MessageTables:
    """The messages and tool-calls columns of `records`' traces (read without their messages);
    a damaged trace is left out and appended to `damaged` (None: the error is raised)."""
    with _session(store) as (conn, dialect):
        return _message_tables(conn, dialect, records, damaged, lambda t: _where(store, t, "messages"))


def _message_tables(conn: Any, dialect: Dialect, records: Sequence[TraceRecord],
                    damaged: list[DamagedEntry] | None = None, where: Any = str) -> MessageTables:
    columns: Columns = {name: [] for name in (*_MESSAGE_COLUMNS, "trace_id", "on_main_path")}
    calls: Columns = {name: [] for name in _CALL_COLUMNS}
    counts: list[tuple[int, int, int, int]] = []
    refusals: list[str | None] = []
    everything = [*columns.values(), *calls.values(), counts, refusals]
    for record in records:
        with _one_trace(dialect, record.trace_id, where(record.trace_id), damaged, everything):
            _trace_messages(conn, dialect, record, columns, calls, counts, refusals)
    return MessageTables(columns, calls, counts, refusals)


def _trace_messages(conn: Any, dialect: Dialect, record: TraceRecord, columns: Columns, calls: Columns,
                    counts: list[tuple[int, int, int, int]], refusals: list[str | None]) -> None:
    loads = json.loads
    flag_at = {name: _MESSAGE_COLUMNS.index(name) for name in _FLAGS}
    trace_id = record.trace_id
    rows = conn.execute(_MESSAGES[dialect], (trace_id,)).fetchall()
    if not rows:
        counts.append((0, 0, 0, 0))
        refusals.append(None)
        return
    transposed = list(zip(*rows, strict=True))
    for name, values in zip(_MESSAGE_COLUMNS, transposed, strict=False):  # all but content_is_text
        columns[name].extend(values)
    sequences, roles = transposed[1], transposed[2]
    errors, refused, is_text = transposed[19], transposed[20], transposed[len(_MESSAGE_COLUMNS)]
    columns["is_error"][-len(rows):] = [None if e is None else bool(e) for e in errors]
    flags = {name: [bool(v) for v in transposed[at]] for name, at in flag_at.items()}
    for name, flag in flags.items():
        columns[name][-len(rows):] = flag
    parents = dict(zip(sequences, transposed[4], strict=True))
    results: dict[str, list[tuple[Any, ...]]] = {}
    last_refusal: str | None = None
    for sequence, role, call_id, text, error, refusal, text_content, duration, cut, shortened in zip(
            sequences, roles, transposed[6], transposed[16], errors, refused, is_text, transposed[14],
            flags["truncated"], flags["summarized"], strict=True):
        if role == "tool":
            if call_id:
                results.setdefault(call_id, []).append(
                    (sequence, bool(error), len(text) if text_content else None, duration, refusal, cut, shortened))
            if refusal is not None:
                last_refusal = text if text_content else _content_text(conn, dialect, trace_id, sequence)
    callers = [(row[0], row[1], row[15]) for row in rows if row[17]]
    (listed,), = conn.execute(_CALLS[dialect], (trace_id,)).fetchall()
    pending = [(message_id, sequence, at, [(c[0], c[1], c[2]) for c in calls])
               for (message_id, sequence, at), calls in zip(callers, loads(listed), strict=True)]
    estimated = sum(u or c for u, c in zip(flags["usage_estimated"], flags["cost_estimated"], strict=True))
    counts.append((roles.count("assistant"), roles.count("tool"), estimated, sum(flags["cost_unpriced"])))
    refusals.append(last_refusal)
    main = _main_path(parents, int(record.trace.get("head_sequence") or 0))
    columns["trace_id"].extend([trace_id] * len(rows))
    columns["on_main_path"].extend(map(main.__contains__, sequences))
    _add_calls(trace_id, pending, results, calls)


def _content_text(conn: Any, dialect: Dialect, trace_id: str, sequence: int) -> str:
    """A refused call's result whose content is not text, as the records path shows it (rare)."""
    sql = _CONTENT.format(p="?" if dialect == "sqlite" else "%s")
    (data,), = conn.execute(sql, (trace_id, sequence)).fetchall()
    return str(json.loads(data).get("content"))


def sql_event_rows(store: Any, records: Sequence[TraceRecord], names: Sequence[str],
                   damaged: list[DamagedEntry] | None = None) -> Columns:
    """The events frame's columns of `records`' traces: a `message_added` payload without its message;
    a damaged trace is left out and appended to `damaged` (None: the error is raised)."""
    with _session(store) as (conn, dialect):
        cols: Columns = {name: [] for name in names}
        for record in records:
            with _one_trace(dialect, record.trace_id, _where(store, record.trace_id, "events"), damaged,
                            list(cols.values())):
                _trace_events(conn, dialect, record, cols)
        return cols


def _event_rows(conn: Any, dialect: Dialect, records: Sequence[TraceRecord], names: Sequence[str]) -> Columns:
    cols: Columns = {name: [] for name in names}
    for record in records:
        _trace_events(conn, dialect, record, cols)
    return cols


def _trace_events(conn: Any, dialect: Dialect, record: TraceRecord, cols: Columns) -> None:
    loads = json.loads
    rows = conn.execute(_EVENTS[dialect], (record.trace_id,)).fetchall()
    if not rows:
        return
    numbers, kinds, times, sequences = zip(*rows, strict=True)
    (listed,), = conn.execute(_PAYLOADS[dialect], (record.trace_id,)).fetchall()
    payloads = [p if isinstance(p, dict) else {} for p in loads(listed)]
    goals = [p.get("goal_id") or (g.get("id") if isinstance(g := p.get("goal"), dict) else None) for p in payloads]
    values: tuple[Sequence[Any], ...] = (
        [record.trace_id] * len(rows), numbers, kinds, times, goals, sequences,
        [p.get("trace_id") if k in _SUB_TRACE_EVENTS else None for p, k in zip(payloads, kinds, strict=True)],
        [p.get("status") for p in payloads], payloads)
    for name, column in zip(_EVENT_COLUMNS, values, strict=True):
        cols[name].extend(column)
