"""SQLiteTraceStore: the TraceStore in one SQLite database, safe for many processes (SPEC T4).

Layout (`sqlite_schema.py`: versioned, upgraded by its migrations in order)::

    schema_versions(version, applied_at)             one row per applied migration
    traces(trace_id, parent_trace_id, root_id, created_at, generation, data, goals)
    messages(trace_id, sequence, data, + the columns of `MESSAGE_COLUMNS`)
    events(trace_id, event_id, type, sequence, shared, data)
    side_records(trace_id, name, data)               resource_usage, tool_approvals, stop_request

Every write of the base store's logic (`store_base.py`) runs in ONE `BEGIN IMMEDIATE`
transaction: the message, its `message_added` event (with the next dense event id), the trace
totals and goal stats commit together or not at all, so a crash or `kill -9` leaves either the
whole write or none of it. The trace row's `generation` is bumped by every write; a process whose
cached write state is older re-reads it (another process wrote the trace). SQLite serialises
writers database-wide; a writer waits up to `busy_timeout` seconds for the lock and then retries
a bounded number of times before it raises `TraceLockedError`.

The tables and the SQL that reads and writes them are shared with the PostgreSQL store
(`sql_store.py:SQLTraceStore`): one message is stored once, its event points at it.

Connections are per thread (and per process: a forked child opens its own). The database runs in
WAL mode, so readers never block the writer.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cyber_agent.errors import ConflictError, StoreError, TraceLockedError
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import Trace
from cyber_agent.trace.sql_store import _INSERT_TRACE, SQLTraceStore
from cyber_agent.trace.sqlite_schema import migrate

__all__ = ["SQLiteTraceStore"]

_LOCK_RETRIES = 5


class SQLiteTraceStore(SQLTraceStore):
    """Persist traces in one SQLite database file; many processes may read and write it at once."""

    def __init__(self, path: str | os.PathLike[str], *, durable: bool = False, busy_timeout: float = 30.0) -> None:
        super().__init__()
        if busy_timeout <= 0:
            raise ValueError(f"busy_timeout must be > 0 seconds, got {busy_timeout!r}")
        self.path = Path(path)
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory; a SQLite store is one file, e.g. sqlite:///{self.path}/runs.db")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.durable = durable
        self.busy_timeout = busy_timeout
        self._pid = os.getpid()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._connections)
        conn = self._conn()
        with self._transaction("<schema>"):
            migrate(conn, str(self.path))

    def __repr__(self) -> str:
        return f"SQLiteTraceStore({os.fspath(self.path)!r})"

    # ---- connections and transactions ------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        if os.getpid() != self._pid:  # a forked child: the parent's connections are not ours to use
            self._pid, self._local = os.getpid(), threading.local()
            with self._connections_lock:
                self._connections.clear()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'FULL' if self.durable else 'NORMAL'}")
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (for read-only SQL of your own, e.g. `pandas.read_sql`)."""
        return self._conn()

    def _begin(self, conn: sqlite3.Connection, what: str) -> None:
        waited = time.monotonic()
        for attempt in range(_LOCK_RETRIES):
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise StoreError(f"{self.path}: cannot start a write: {exc}") from None
                time.sleep(min(0.05 * 2**attempt, 1.0))
        raise TraceLockedError(what, f"another process on {self.path}", time.monotonic() - waited)

    @contextmanager
    def _transaction(self, what: str) -> Iterator[None]:
        conn = self._conn()
        if conn.in_transaction:  # part of the write that is already open on this thread
            yield
            return
        self._begin(conn, what)
        try:
            yield
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    def _acquire_writer(self, trace_id: str) -> int | None:
        conn = self._conn()
        self._begin(conn, trace_id)
        try:
            row = conn.execute("UPDATE traces SET generation = generation + 1 WHERE trace_id = ? RETURNING generation",
                               (trace_id,)).fetchone()
        except BaseException:
            conn.rollback()
            raise
        return None if row is None else int(row[0]) - 1

    def _release_writer(self, trace_id: str, *, failed: bool) -> None:
        conn = self._conn()
        if not failed:
            try:
                conn.commit()
                return
            except sqlite3.Error as exc:
                conn.rollback()
                self._hot.pop(trace_id, None)
                raise StoreError(f"{self.path}: the write to trace {trace_id!r} did not commit: {exc}") from None
        conn.rollback()
        # The live state may hold what was just rolled back: the next write re-reads the database.
        self._hot.pop(trace_id, None)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._conn().execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: {exc}") from None

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._conn().execute(sql, params)

    def _where(self, trace_id: str, table: str) -> str:
        return f"{self.path}#{table}/{trace_id}"

    def _create_record(self, trace: Trace, tree: GoalTree) -> None:
        try:
            with self._transaction(trace.trace_id):
                self._execute(_INSERT_TRACE, self._trace_row(trace, tree))
        except sqlite3.IntegrityError:
            raise ConflictError(f"trace {trace.trace_id!r} already exists; continue it instead of creating it") from None


def _close_all(connections: list[sqlite3.Connection]) -> None:
    for conn in connections:
        try:
            conn.close()
        except sqlite3.Error:
            pass

