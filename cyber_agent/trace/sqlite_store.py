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
writers database-wide; a write waits at most `busy_timeout` seconds in all for the lock (every
statement of it, BEGIN to COMMIT, against one deadline) and then raises `DatabaseLockedError`,
naming the file and saying another process holds it.

Opening names the file and what is wrong with it: not a database (garbage, truncated), a
directory, locked, unreadable. `create=False` (what read commands use) refuses a missing file
instead of creating an empty database.

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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from cyber_agent.errors import ConflictError, DatabaseLockedError, StoreError
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import Trace
from cyber_agent.trace.sql_store import _INSERT_TRACE, SQLTraceStore
from cyber_agent.trace.sqlite_schema import migrate

__all__ = ["SQLiteTraceStore"]

_T = TypeVar("_T")
_FIRST_PAUSE_S = 0.0001
_MAX_PAUSE_S = 0.002
"""How far past a write's deadline one of its statements may wait for a lock (saves a PRAGMA per statement)."""
_SPIN_S = 0.0003
"""How long a write retries a held lock at once (yielding the CPU between tries) before it first sleeps."""
_yield_cpu = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))


class SQLiteTraceStore(SQLTraceStore):
    """Persist traces in one SQLite database file; many processes may read and write it at once."""

    _defers = True  # a commit is most of a small write's cost here

    def __init__(self, path: str | os.PathLike[str], *, durable: bool = False, busy_timeout: float = 30.0,
                 create: bool = True) -> None:
        super().__init__()
        if busy_timeout <= 0:
            raise ValueError(f"busy_timeout must be > 0 seconds, got {busy_timeout!r}")
        self.path = Path(path)
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory; a SQLite store is one file, e.g. sqlite:///{self.path}/runs.db")
        if not create and not self.path.exists():
            raise StoreError(f"no SQLite database at {self.path} ({self.path.resolve()}); check the path "
                             "(a read never creates one)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.durable = durable
        self.busy_timeout = busy_timeout
        self._pid = os.getpid()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._connections)
        try:
            conn = self._conn()
            with self._transaction(""):
                migrate(conn, str(self.path))
        except sqlite3.DatabaseError as exc:
            _close_all(self._connections)
            raise self._open_error(exc) from None
        except StoreError:
            _close_all(self._connections)
            raise

    def _open_error(self, exc: sqlite3.DatabaseError) -> StoreError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return DatabaseLockedError(str(self.path), self.busy_timeout)
        if "not a database" in text or "malformed" in text or "corrupt" in text:
            return StoreError(f"{self.path} is not a usable SQLite database ({text}): the file is damaged, truncated "
                              "or of another kind. Restore it from a backup, or name another file")
        return StoreError(f"{self.path}: cannot open the SQLite database ({text})")

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
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA synchronous={'FULL' if self.durable else 'NORMAL'}")
                conn.execute("PRAGMA busy_timeout = 0")  # from here on a held lock is waited for in `_polled`
            except sqlite3.DatabaseError as exc:
                conn.close()
                raise self._open_error(exc) from None
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (for read-only SQL of your own, e.g. `pandas.read_sql`).

        Its `busy_timeout` is 0 (the store waits for locks itself, `_polled`): a read in WAL mode
        does not wait for writers, but set `PRAGMA busy_timeout` on it for writes of your own."""
        return self._conn()

    def _begin(self, conn: sqlite3.Connection, what: str) -> None:
        """BEGIN IMMEDIATE, waiting for the database lock until this write's deadline (`busy_timeout` from now)."""
        self._local.deadline = time.monotonic() + self.busy_timeout
        try:
            self._polled(lambda: conn.execute("BEGIN IMMEDIATE"), what)
        except sqlite3.OperationalError as exc:
            raise StoreError(f"{self.path}: cannot start a write: {exc}") from None

    def _polled(self, statement: Callable[[], _T], what: str | None) -> _T:
        """Run `statement`; while another connection holds the lock, try again until the write's deadline.

        The connections wait here, not in SQLite's busy handler (their `busy_timeout` is 0): that
        one sleeps 1, 2, 5, 10, 15, 20, 25 ... ms between tries while another process's write holds
        the lock for a tenth of a millisecond, and its sleep blocks this thread's event loop — every
        cell of a sweep worker — the whole time. Here the first `_SPIN_S` of a wait retry at once,
        giving the CPU away between tries: another process's write usually ends within it, and a
        sleep, however short, lasts the kernel's timer slack and the wake-up past it (two sweep
        workers on one SQLite file: their blocked time fell from ~50-100 ms each to ~0 per 100
        cells, docs/performance.md). Then the pause starts at `_FIRST_PAUSE_S` and doubles up to
        `_MAX_PAUSE_S`. Outside a write the deadline is `busy_timeout` from now.
        """
        deadline = getattr(self._local, "deadline", None)
        if deadline is None:
            deadline = time.monotonic() + self.busy_timeout
        pause, spin_until = _FIRST_PAUSE_S, 0.0
        while True:
            try:
                return statement()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                now = time.monotonic()
                if now >= deadline:
                    raise DatabaseLockedError(str(self.path), self.busy_timeout, what or None) from None
                if not spin_until:
                    spin_until = now + _SPIN_S
                if now < spin_until:
                    _yield_cpu()
                    continue
                time.sleep(min(pause, deadline - now))
                pause = min(2 * pause, _MAX_PAUSE_S)

    def _locked(self, exc: sqlite3.Error, what: str | None) -> StoreError:
        if "locked" in str(exc) or "busy" in str(exc):
            return DatabaseLockedError(str(self.path), self.busy_timeout, what or None)
        return StoreError(f"{self.path}: {exc}")

    @contextmanager
    def _transaction(self, what: str) -> Iterator[None]:
        conn = self._conn()
        if conn.in_transaction:  # part of the write that is already open on this thread
            yield
            return
        self._begin(conn, what)
        try:
            yield
            self._polled(conn.commit, what)
        except sqlite3.OperationalError as exc:
            conn.rollback()
            raise self._locked(exc, what) from None
        except BaseException:
            conn.rollback()
            raise
        finally:
            self._local.deadline = None

    def _acquire_writer(self, trace_id: str) -> int | None:
        conn = self._conn()
        self._begin(conn, trace_id)
        try:
            row = conn.execute("UPDATE traces SET generation = generation + 1 WHERE trace_id = ? RETURNING generation",
                               (trace_id,)).fetchone()
        except sqlite3.OperationalError as exc:
            conn.rollback()
            self._local.deadline = None
            raise self._locked(exc, trace_id) from None
        except BaseException:
            conn.rollback()
            self._local.deadline = None
            raise
        return None if row is None else int(row[0]) - 1

    def _release_writer(self, trace_id: str, *, failed: bool) -> None:
        conn = self._conn()
        self._local.deadline, deadline = None, getattr(self._local, "deadline", None)
        if not failed:
            try:
                self._local.deadline = deadline
                self._polled(conn.commit, trace_id)
                return
            except DatabaseLockedError:
                conn.rollback()
                self._hot.pop(trace_id, None)
                raise
            except sqlite3.Error as exc:
                conn.rollback()
                self._hot.pop(trace_id, None)
                if "locked" in str(exc) or "busy" in str(exc):
                    raise DatabaseLockedError(str(self.path), self.busy_timeout, trace_id) from None
                raise StoreError(f"{self.path}: the write to trace {trace_id!r} did not commit: {exc}") from None
            finally:
                self._local.deadline = None
        conn.rollback()
        # The live state may hold what was just rolled back: the next write re-reads the database.
        self._hot.pop(trace_id, None)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            conn = self._conn()
            return self._polled(lambda: conn.execute(sql, params).fetchall(), None)
        except sqlite3.DatabaseError as exc:
            raise self._locked(exc, None) from None

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        conn = self._conn()
        if conn.in_transaction:  # inside a write: the lock is held, nothing to wait for
            conn.execute(sql, params)
        else:
            self._polled(lambda: conn.execute(sql, params), None)

    # ---- columnar reads: SQLite's rows straight into Arrow (ADBC), no Python object per value ----------------
    # Through the partial index (`sqlite_schema.py:_V4`) by name: the planner would take the primary key's range
    # of the trace, which reads every message row of it.
    _REFUSED_SQL = ("SELECT trace_id, sequence, data -> '$.content' AS content FROM messages INDEXED BY messages_refused",
                    " AND role = 'tool' AND refused IS NOT NULL AND content_is_text = 0", "sequence")

    def _rows_and_names(self, sql: str, params: Sequence[Any]) -> tuple[list[Any], list[str]]:
        conn = self._conn()
        cursor = self._polled(lambda: conn.execute(sql, params), None)
        return cursor.fetchall(), [d[0] for d in cursor.description or ()]

    @contextmanager
    def _columnar_session(self, *, every: bool = False) -> Iterator[Callable[[tuple[str, str, str], Sequence[str], Any], Any]]:
        try:
            from adbc_driver_sqlite import dbapi as adbc
        except ImportError:  # the `frames` extra is not installed: the rows go through Python objects
            with super()._columnar_session(every=every) as run:
                yield run
            return
        import pyarrow as pa

        # Read-only, its own connection: it sees what is committed, as every read here does.
        with adbc.connect(f"{self.path.resolve().as_uri()}?mode=ro") as conn, conn.cursor() as cursor:
            # Another connection opening the database at the same moment (the other part of a parallel read)
            # holds its lock briefly: wait for it as every connection of this store does.
            cursor.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            cursor.fetchall()

            def run(query: tuple[str, str, str], ids: Sequence[str], schema: pa.Schema) -> pa.Table:
                select, condition, order = query
                # One batch for the whole result: the driver types each column from its first batch, and a
                # column that starts with NULLs would be typed from nothing.
                cursor.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(2**30)})
                # The ids bound as a table: the statement runs once per id, results in that order (each a
                # range of the primary key), so nothing is sorted or reordered afterwards.
                cursor.execute(f"{select} WHERE trace_id = ?{condition} ORDER BY {order}", pa.table({"trace_id": list(ids)}))
                table: pa.Table = cursor.fetch_arrow_table()
                return table if table.num_rows else schema.empty_table()

            yield run

    @property
    def _parallel_columns(self) -> bool:  # type: ignore[override]
        """With ADBC, each part of a columnar read has a connection of its own (the stdlib's would stay open per thread)."""
        try:
            import adbc_driver_sqlite.dbapi  # noqa: F401
        except ImportError:
            return False
        return True

    def _is_damage(self, exc: BaseException) -> bool:
        if super()._is_damage(exc):
            return True
        from_driver = isinstance(exc, sqlite3.Error | OSError) or type(exc).__module__.startswith("adbc_driver")
        return from_driver and "JSON" in str(exc)  # "malformed JSON"

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

