"""The PostgreSQL store's schema: versioned migrations, applied under an advisory lock.

`MIGRATIONS[i]` upgrades a schema from version i to i + 1 (the tables of `sql_store.py`, then the
typed message columns of `sqlite_schema.MESSAGE_COLUMNS`, computed by `message_values` as the
SQLite store computes them, then the `exchanges` table). All
missing steps run in ONE transaction that first takes `pg_advisory_xact_lock` on a key of the
schema's name, so workers that start at once upgrade it exactly once: the others wait, then find
it current. No migration may use `CREATE INDEX CONCURRENTLY` (it cannot run in a transaction). A
schema newer than this code (`SCHEMA_VERSION`) is refused, never guessed at.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from cyber_agent.errors import StoreError
from cyber_agent.trace.models import utc_now
from cyber_agent.trace.sqlite_schema import MESSAGE_COLUMNS, message_values

if TYPE_CHECKING:
    import psycopg

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate"]

_V1 = """
CREATE TABLE traces (
    trace_id TEXT PRIMARY KEY,
    parent_trace_id TEXT,
    root_id TEXT,
    created_at TEXT NOT NULL,
    generation BIGINT NOT NULL DEFAULT 0,
    data TEXT NOT NULL,
    goals TEXT NOT NULL
);
CREATE INDEX traces_by_parent ON traces (parent_trace_id);
CREATE INDEX traces_by_root ON traces (root_id);
CREATE TABLE messages (
    trace_id TEXT NOT NULL,
    sequence BIGINT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (trace_id, sequence)
);
CREATE TABLE events (
    trace_id TEXT NOT NULL,
    event_id BIGINT NOT NULL,
    type TEXT NOT NULL,
    sequence BIGINT,
    shared INTEGER NOT NULL DEFAULT 0,
    data TEXT NOT NULL,
    PRIMARY KEY (trace_id, event_id)
);
CREATE INDEX events_by_message ON events (trace_id, sequence);
CREATE TABLE side_records (
    trace_id TEXT NOT NULL,
    name TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (trace_id, name)
)
"""

_TYPES = {"TEXT": "TEXT", "INTEGER": "BIGINT", "REAL": "DOUBLE PRECISION"}


def _add_message_columns(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Version 2: the typed message columns, filled from the JSON of messages already stored."""
    conn.execute("ALTER TABLE messages " + ", ".join(f"ADD COLUMN {name} {_TYPES[kind]}" for name, kind in MESSAGE_COLUMNS))
    assignments = ", ".join(f"{name} = %s" for name, _ in MESSAGE_COLUMNS)
    rows = conn.execute("SELECT trace_id, sequence, data FROM messages").fetchall()
    with conn.cursor() as cursor:
        cursor.executemany(f"UPDATE messages SET {assignments} WHERE trace_id = %s AND sequence = %s",
                           [(*message_values(json.loads(str(data))), trace_id, sequence) for trace_id, sequence, data in rows])


_V3 = """
CREATE TABLE exchanges (
    trace_id TEXT NOT NULL,
    call_index BIGINT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (trace_id, call_index)
)
"""
"""Version 3: the model exchanges recorded with each trace (`cyber_agent/trace/exchange_log.py`)."""

Migration = str | Callable[["psycopg.Connection[tuple[object, ...]]"], None]
MIGRATIONS: tuple[Migration, ...] = (_V1, _add_message_columns, _V3)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: psycopg.Connection[tuple[object, ...]], schema: str | None, where: str, *,
            target: int = SCHEMA_VERSION) -> int:
    """Bring the schema to `target` in one transaction under the schema's advisory lock; return the version it had."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"cyber_agent.migrate:{schema or ''}",))
        if schema is not None:
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            conn.execute(f'SET LOCAL search_path TO "{schema}"')
        conn.execute("CREATE TABLE IF NOT EXISTS schema_versions (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_versions").fetchone()
        current = int(row[0]) if row is not None else 0  # type: ignore[call-overload]
        if current > SCHEMA_VERSION:
            raise StoreError(f"{where} has schema version {current}, newer than this cyber_agent understands "
                             f"({SCHEMA_VERSION}); upgrade cyber_agent to open it")
        for version in range(current, target):
            step = MIGRATIONS[version]
            if isinstance(step, str):
                for statement in filter(str.strip, step.split(";")):
                    conn.execute(statement)
            else:
                step(conn)
            conn.execute("INSERT INTO schema_versions (version, applied_at) VALUES (%s, %s)",
                         (version + 1, utc_now().isoformat()))
    return current
