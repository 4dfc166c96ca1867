"""The SQLite store's schema: versioned migrations and the typed message columns.

`MIGRATIONS[i]` upgrades a database from version i to i + 1. Each is either SQL or a callable
given the connection; all run inside the one `BEGIN IMMEDIATE` transaction that opens the store,
so two processes opening an old database at once upgrade it exactly once (the second waits and
finds it current). A database newer than this code (`SCHEMA_VERSION`) is refused, never guessed at.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cyber_agent.errors import StoreError
from cyber_agent.trace.models import refusal_kind, utc_now

__all__ = ["MESSAGE_COLUMNS", "MIGRATIONS", "SCHEMA_VERSION", "MessageColumns", "message_columns", "message_values", "migrate"]

_V1 = """
CREATE TABLE traces (
    trace_id TEXT PRIMARY KEY,
    parent_trace_id TEXT,
    root_id TEXT,
    created_at TEXT NOT NULL,
    generation INTEGER NOT NULL DEFAULT 0,
    data TEXT NOT NULL,
    goals TEXT NOT NULL
);
CREATE INDEX traces_by_parent ON traces (parent_trace_id);
CREATE INDEX traces_by_root ON traces (root_id);
CREATE TABLE messages (
    trace_id TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (trace_id, sequence)
) WITHOUT ROWID;
CREATE TABLE events (
    trace_id TEXT NOT NULL,
    event_id INTEGER NOT NULL,
    type TEXT NOT NULL,
    sequence INTEGER,
    shared INTEGER NOT NULL DEFAULT 0,
    data TEXT NOT NULL,
    PRIMARY KEY (trace_id, event_id)
) WITHOUT ROWID;
CREATE INDEX events_by_message ON events (trace_id, sequence);
CREATE TABLE side_records (
    trace_id TEXT NOT NULL,
    name TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (trace_id, name)
) WITHOUT ROWID;
"""

MESSAGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("message_id", "TEXT"), ("role", "TEXT"), ("goal_id", "TEXT"), ("parent_sequence", "INTEGER"), ("branch", "TEXT"),
    ("tool_call_id", "TEXT"), ("tool_name", "TEXT"), ("description", "TEXT"), ("prompt_tokens", "INTEGER"),
    ("completion_tokens", "INTEGER"), ("cached_tokens", "INTEGER"), ("cost", "REAL"), ("duration_ms", "REAL"),
    ("created_at", "TEXT"), ("text", "TEXT"), ("n_tool_calls", "INTEGER"), ("tool_call_names", "TEXT"),
    ("is_error", "INTEGER"), ("refused", "TEXT"), ("model", "TEXT"), ("usage_estimated", "INTEGER"),
    ("cost_estimated", "INTEGER"), ("cost_unpriced", "INTEGER"), ("truncated", "INTEGER"), ("summarized", "INTEGER"),
    ("content_is_text", "INTEGER"), ("tool_calls", "TEXT"),
)
"""Values of a message kept as columns beside its JSON (version 2), computed once when it is written
(`message_values`), so frames and aggregates read them with plain SQL and no JSON parsing."""


def message_values(message: dict[str, Any]) -> tuple[Any, ...]:
    """The `MESSAGE_COLUMNS` values of one message (a parsed record), as the messages frame defines them."""
    content = message.get("content")
    calls = (content.get("tool_calls") or ()) if isinstance(content, dict) else ()
    text = content.get("text") if isinstance(content, dict) else content
    metadata = message.get("metadata") or {}
    error = metadata.get("is_error") if isinstance(metadata, dict) else None
    return (
        message.get("message_id"), message.get("role"), message.get("goal_id"), message.get("parent_sequence"),
        message.get("branch"), message.get("tool_call_id"), message.get("tool_name"), message.get("description"),
        message.get("prompt_tokens", 0), message.get("completion_tokens", 0), message.get("cached_tokens", 0),
        message.get("cost", 0.0), message.get("duration_ms"), message.get("created_at"),
        text if text is None or isinstance(text, str) else json.dumps(text),
        len(calls), ",".join([c.get("name", "") for c in calls if isinstance(c, dict)]) or None,
        None if error is None else int(bool(error)), refusal_kind(metadata) if error else None,
        metadata.get("model") if isinstance(metadata, dict) else None,
        *_flags(metadata if isinstance(metadata, dict) else {}), int(isinstance(content, str)),
        json.dumps([[c.get("id"), c.get("name"), c.get("arguments") or {}] for c in calls if isinstance(c, dict)],
                   ensure_ascii=False, separators=(",", ":")) if calls else None,
    )


def _flags(metadata: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """usage_estimated, cost_estimated, cost_unpriced, truncated, summarized (as the messages frame reads them)."""
    payload = metadata.get("payload")
    path = payload.get("path") if isinstance(payload, dict) else None
    return (int(bool(metadata.get("usage_estimated"))), int(bool(metadata.get("cost_estimated"))),
            int(bool(metadata.get("cost_unpriced"))), int(bool(metadata.get("truncated")) or path == "truncated"),
            int(path == "summarized"))


def _add_message_columns(conn: sqlite3.Connection) -> None:
    """Version 2: the typed message columns, filled from the JSON of messages already stored."""
    for name, kind in MESSAGE_COLUMNS:
        conn.execute(f"ALTER TABLE messages ADD COLUMN {name} {kind}")
    assignments = ", ".join(f"{name} = ?" for name, _ in MESSAGE_COLUMNS)
    rows = conn.execute("SELECT trace_id, sequence, data FROM messages").fetchall()
    for trace_id, sequence, data in rows:
        conn.execute(f"UPDATE messages SET {assignments} WHERE trace_id = ? AND sequence = ?",
                     (*message_values(json.loads(data)), trace_id, sequence))


_V3 = """
CREATE TABLE exchanges (
    trace_id TEXT NOT NULL,
    call_index INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (trace_id, call_index)
) WITHOUT ROWID
"""
"""Version 3: the model exchanges recorded with each trace (`cyber_agent/trace/exchange_log.py`)."""

_V4 = """
CREATE INDEX messages_columns ON messages (
    trace_id, sequence,
    message_id, role, goal_id, parent_sequence, branch, tool_call_id, tool_name, description, prompt_tokens,
    completion_tokens, cached_tokens, cost, duration_ms, created_at, text, n_tool_calls, tool_call_names,
    is_error, refused, model, usage_estimated, cost_estimated, cost_unpriced, truncated, summarized,
    content_is_text, tool_calls
);
CREATE INDEX messages_refused ON messages (trace_id, sequence)
    WHERE role = 'tool' AND refused IS NOT NULL AND content_is_text = 0
"""
"""Version 4: the columnar read's indexes (`cyber_agent/trace/sql_store.py:SQLTraceStore.read_columns`).

`messages_columns` covers the typed columns, so the frames' message query reads the index alone and never
the rows' JSON (`data`, which spills to overflow pages and was most of the read); `messages_refused`
(partial) finds the few refused tool results whose content is not text, the only rows whose JSON the
columnar read needs. Building them on an existing database reads each message row once. The column list
is version 2's `MESSAGE_COLUMNS`, written out: a later version's columns are not there yet when this runs."""

Migration = str | Callable[[sqlite3.Connection], None]
MIGRATIONS: tuple[Migration, ...] = (_V1, _add_message_columns, _V3, _V4)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, where: str, *, target: int = SCHEMA_VERSION) -> int:
    """Bring the database (inside an open transaction) to `target`; return the version it had."""
    conn.execute("CREATE TABLE IF NOT EXISTS schema_versions (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    (current,), = conn.execute("SELECT coalesce(max(version), 0) FROM schema_versions").fetchall()
    if current > SCHEMA_VERSION:
        raise StoreError(f"{where} has schema version {current}, newer than this cyber_agent understands "
                         f"({SCHEMA_VERSION}); upgrade cyber_agent to open it")
    for version in range(current, target):
        step = MIGRATIONS[version]
        if isinstance(step, str):
            # Statement by statement: executescript() would commit the open transaction.
            for statement in filter(str.strip, step.split(";")):
                conn.execute(statement)
        else:
            step(conn)
        conn.execute("INSERT INTO schema_versions (version, applied_at) VALUES (?, ?)",
                     (version + 1, utc_now().isoformat()))
    return int(current)


@dataclass(frozen=True)
class MessageColumns:
    """Computes the typed columns of a message's JSON for an insert."""

    columns: tuple[tuple[str, str], ...]

    def row(self, data: str) -> tuple[Any, ...]:
        """The typed column values of one message's JSON text (the insert's parameters after `data`)."""
        return message_values(json.loads(data)) if self.columns else ()

    def values(self, data: str) -> tuple[str, tuple[Any, ...]]:
        """The column list suffix (", role, ...") and the values of one message's JSON text."""
        if not self.columns:
            return "", ()
        return self._suffix, message_values(json.loads(data))

    @property
    def _suffix(self) -> str:
        return "".join(f", {name}" for name, _ in self.columns)

    def names(self) -> list[str]:
        """The typed column names."""
        return [name for name, _ in self.columns]


def message_columns() -> MessageColumns:
    """The typed message columns of the current schema."""
    return MessageColumns(MESSAGE_COLUMNS)
