"""PostgresTraceStore: the TraceStore on a PostgreSQL server, for many workers and machines (issue 17).

The tables and their SQL are the SQLite store's (`sql_store.py:SQLTraceStore`); this module adds
the server's connections, transactions, writer lock, retries and live events.

- **One transaction per write.** `_acquire_writer` opens it and runs `UPDATE traces SET
  generation = generation + 1 ... RETURNING generation`: the trace row's lock is the trace's
  writer lock across every process and machine, held until `_release_writer` commits or rolls
  back. A budget step (`update_resource_usage`) runs under the root's row lock the same way, so
  reservations are never a read, a check and a later write.
- **Connections.** A `psycopg_pool.ConnectionPool` (autocommit connections); a write holds one
  connection from its first statement to its commit, a read outside a write borrows one per query.
- **Dropped connections** (the server restarted or crashed, a network cut; every error class
  that means the session went away, `_LOST`): the write is re-run from the start with a bounded
  backoff. `retry_seconds` bounds the whole write, connection attempts included
  (`postgres_retry.py:write_deadline`), and the error says how long it really tried.
- **Did the commit land?** Each write updates a marker row only this writer owns
  (`side_records`, trace id `MARKER_TRACE`, one row per store instance and thread) to a fresh
  token inside its transaction. A commit whose answer was lost is resolved by reading that row on
  a new connection (`FOR UPDATE`, so a transaction still finishing on the server is waited for):
  our token means committed (never applied twice), anything else means re-run (never lost).
  A transaction id is never used for this: a crash can hand the same id to another client.
- **Fault points.** `PostgresTraceStore.fault_hook`, when set, is called with the name of each
  point of a write (`FAULT_POINTS`); the crash tests hold a writer there while they stop the server.
- **Live events.** Every event sends `NOTIFY cyber_agent_events, '<trace_id>:<event_id>'` inside
  its transaction (delivered only if it commits); `listen` turns them into an async iterator of
  events on a dedicated connection and replays from the last id after a reconnect. A stop request
  sends `NOTIFY cyber_agent_stops, '<trace_id>'`.
- **Schemas.** `?schema=NAME` keeps the store in its own schema (created if missing), e.g. one per
  project or test; migrations (`postgres_schema.py`) run under an advisory lock.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from cyber_agent.errors import ConfigurationError, ConflictError, StoreError, StoreUnavailableError
from cyber_agent.trace.events import TraceEvent
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import Trace
from cyber_agent.trace.postgres_columns import ArrowConnections, arrow_driver, columns_query, copy_csv
from cyber_agent.trace.postgres_listen import listen_events
from cyber_agent.trace.postgres_retry import RetriedWrites, _ConnectionLost, write_deadline
from cyber_agent.trace.postgres_schema import migrate
from cyber_agent.trace.postgres_url import OPTIONS, parse_url, redact_url
from cyber_agent.trace.columnar import EVENT_ROWS, arrow_schema, event_columns, in_order, ordered, typed
from cyber_agent.trace.sql_store import _INSERT_TRACE, SQLTraceStore

__all__ = ["EVENTS_CHANNEL", "FAULT_POINTS", "MARKER_TRACE", "STOPS_CHANNEL", "PostgresTraceStore"]

EVENTS_CHANNEL = "cyber_agent_events"
"""NOTIFY channel of new events; the payload is `<trace_id>:<event_id>`."""
STOPS_CHANNEL = "cyber_agent_stops"
"""NOTIFY channel of stop requests; the payload is the trace id."""

MARKER_TRACE = ":commit-markers"
"""The `side_records.trace_id` of the writers' commit markers (never a valid trace id)."""
FAULT_POINTS = ("locked", "before_commit", "commit_sent")
"""Where `fault_hook` is called: the write's lock is held; its statements are sent, COMMIT is not;
COMMIT is sent and its answer not yet read."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# Every error that means the session or the server went away: the transaction is gone, run it again.
_LOST = (psycopg.errors.AdminShutdown, psycopg.errors.CrashShutdown, psycopg.errors.CannotConnectNow,
         psycopg.errors.IdleSessionTimeout, psycopg.errors.IdleInTransactionSessionTimeout,
         psycopg.errors.ConnectionException, psycopg.errors.TransactionRollback)


def _gone(conn: psycopg.Connection[tuple[Any, ...]] | None, exc: psycopg.Error) -> bool:
    """Whether `exc` means the connection or the server went away (or the server rolled back): safe to re-run."""
    return (conn is not None and conn.broken) or isinstance(exc, _LOST) or (exc.sqlstate or "").startswith("08")


class PostgresTraceStore(RetriedWrites):
    """Persist traces on a PostgreSQL server; any number of processes and machines may share it."""

    def __init__(self, url: str, *, schema: str | None = None, pool_size: int = 4, retry_seconds: float = 30.0,
                 connect_timeout: float = 10.0) -> None:
        super().__init__()
        parsed, shown = parse_url(url), redact_url(url)
        conninfo = parsed.conninfo
        schema = parsed.schema if parsed.schema is not None else schema
        if schema is not None and not _SCHEMA_NAME.fullmatch(schema):
            raise ConfigurationError("schema", f"{schema!r} is not a plain lower-case SQL name; use letters, digits "
                                               "and _, starting with a letter (e.g. schema=cyber_agent)")
        pool_size = parsed.pool_size if parsed.pool_size is not None else pool_size
        retry_seconds = parsed.retry_seconds if parsed.retry_seconds is not None else retry_seconds
        if pool_size < 1 or not retry_seconds >= 0:
            raise ConfigurationError("store URL", f"{shown!r}: pool_size must be >= 1 and retry_seconds >= 0")
        self.url, self.schema, self.pool_size, self.retry_seconds = url, schema, pool_size, retry_seconds
        self.connect_timeout = connect_timeout
        self.conninfo = conninfo
        self.connect_kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": max(1, round(connect_timeout))}
        # An acknowledged write survives a server crash even where the server runs synchronous_commit=off.
        self.connect_kwargs["options"] = "-c synchronous_commit=on" + (f" -c search_path={schema}" if schema else "")
        self._sql_cache: dict[str, str] = {}
        self.fault_hook: Callable[[str], None] | None = None
        self._instance, self._threads = uuid.uuid4().hex, itertools.count(1)
        try:
            self._server = self._describe(conninfo)
            with psycopg.connect(conninfo, **{**self.connect_kwargs, "autocommit": False}) as conn:
                migrate(conn, schema, self._server)
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError("store URL", f"{shown!r}: {str(exc).strip()}; options are libpq's "
                                     f"(host, port, user, sslmode, ...) and {', '.join(sorted(OPTIONS))}") from None
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(self._server, f"{str(exc).strip()}; is the server running? "
                                        "(docs/trace.md, 'The PostgreSQL store', says how to start one)") from None
        self._pid = os.getpid()
        self._retired: list[ConnectionPool[psycopg.Connection[tuple[Any, ...]]]] = []
        self._pool = self._open_pool()
        self._arrow: ArrowConnections | None = None
        self._arrow_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PostgresTraceStore({self._server!r})"

    @staticmethod
    def _describe(conninfo: str) -> str:
        """Where the server is (no password), for messages."""
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
        host = params.get("host") or "localhost"
        return f"postgresql://{params.get('user') or ''}@{host}:{params.get('port') or 5432}/{params.get('dbname') or ''}"

    def _open_pool(self) -> ConnectionPool[psycopg.Connection[tuple[Any, ...]]]:
        pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
            self.conninfo, min_size=1, max_size=self.pool_size, kwargs=self.connect_kwargs, open=True,
            timeout=self.connect_timeout, name=f"cyber-agent {self._server}", num_workers=1)
        weakref.finalize(self, _close_pool, pool, os.getpid())
        return pool

    def listen(self, trace_id: str, since_event_id: int = 0, *, poll_seconds: float = 1.0) -> AsyncIterator[TraceEvent]:
        """The trace's events after `since_event_id`, then each new one as it commits (`postgres_listen.py`)."""
        return listen_events(self, trace_id, since_event_id, poll_seconds=poll_seconds)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """Borrow a pooled connection (autocommit, this store's schema) for SQL of your own, e.g. `pandas.read_sql`."""
        conn = self._borrow()
        try:
            yield conn
        finally:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE and not conn.broken:
                conn.rollback()
            self._give_back(conn)

    def close(self) -> None:
        """Remove this instance's commit markers and close its connections (it cannot be used afterwards). In a
        forked child that never used the store, the parent's markers and connections are left alone."""
        self._own_process()
        try:
            with psycopg.connect(self.conninfo, **{**self.connect_kwargs, "connect_timeout": 2}) as conn:
                conn.execute("DELETE FROM side_records WHERE trace_id = %s AND name LIKE %s",
                             (MARKER_TRACE, f"{self._instance}:%"))
        except psycopg.Error:
            pass  # a marker left behind is one small row; correctness never depends on removing it
        self._pool.close()
        if self._arrow is not None:
            self._arrow.close()

    # ---- connections ------------------------------------------------------------------------
    def _own_process(self) -> None:
        """In a forked child, set the parent's pool aside (its connections are not ours to use or close) and
        take a new instance id (the parent's markers stay the parent's)."""
        if os.getpid() != self._pid:
            self._retired.append(self._pool)
            self._pid, self._local, self._pool = os.getpid(), threading.local(), self._open_pool()
            self._instance = uuid.uuid4().hex

    def _borrow(self) -> psycopg.Connection[tuple[Any, ...]]:
        self._own_process()
        deadline = write_deadline.get()
        timeout = self.connect_timeout if deadline is None else max(0.05, min(self.connect_timeout, deadline - time.monotonic()))
        try:
            return self._pool.getconn(timeout=timeout)
        except PoolTimeout:
            raise _ConnectionLost(f"{self._server}: no connection within {timeout:.1f} s") from None

    def _give_back(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        broken = conn.broken
        self._pool.putconn(conn)
        if broken:
            self._pool.check()  # the server restarted: drop the other dead connections too

    def _sql(self, sql: str) -> str:
        converted = self._sql_cache.get(sql)
        if converted is None:
            converted = self._sql_cache[sql] = sql.replace("?", "%s")
        return converted

    # ---- columnar reads (`SQLTraceStore.read_columns`): PostgreSQL's JSON operators ------------------------
    # A refused tool result's JSON content in the messages query itself: one scan of the table, not two (a row's
    # `data` is read, and parsed, only where the CASE needs it).
    _MESSAGE_COLUMNS_SQL = (SQLTraceStore._MESSAGE_COLUMNS_SQL[0].replace(
        " FROM messages", ", CASE WHEN role = 'tool' AND refused IS NOT NULL AND content_is_text = 0 "
                          "THEN (data::json -> 'content')::text END AS content FROM messages"),
        *SQLTraceStore._MESSAGE_COLUMNS_SQL[1:])
    _REFUSED_SQL = None
    # The events' own columns: their JSON is parsed by Python (`columnar.py:event_columns`), once per event; the
    # server's `->` parses a `json` value again for every field it lifts (6-8 per row, ~15 us per event).
    _EVENT_ROWS_SQL = ("SELECT " + ", ".join(name for name, _ in EVENT_ROWS) + " FROM events", "", "event_id")

    _parallel_columns = True  # two pooled connections: the server reads the events while the messages are parsed

    def _event_columns(self, run: Callable[..., Any], ids: Sequence[str]) -> tuple[Any, list[Any]]:
        rows = run(self._EVENT_ROWS_SQL, ids, arrow_schema(EVENT_ROWS))
        return event_columns(rows)

    _arrow_driver = True
    """Whether columnar reads go through ADBC's PostgreSQL driver when it is installed (else psycopg's CSV `COPY`)."""

    @contextmanager
    def _columnar_session(self, *, every: bool = False) -> Iterator[Callable[[tuple[str, str, str], Sequence[str], Any], Any]]:
        """Each query's rows, all traces in one statement, straight into Arrow (`postgres_columns.py`): through
        ADBC's binary `COPY` when installed, else psycopg's CSV `COPY`. `every` (the traces are every trace of the
        store): the tables are read whole and ordered here, the rows of other traces (written since the records
        were read, or left out as damaged) dropped."""
        import pyarrow as pa
        import pyarrow.compute as pc

        arrow = self._arrow_connections() if self._arrow_driver else None

        def run(query: tuple[str, str, str], ids: Sequence[str], schema: pa.Schema) -> pa.Table:
            select = columns_query(query, None if every else ids)
            if arrow is not None:
                table = typed(arrow.query(select), schema)  # the server's types (int4, text, ...) as declared
            else:
                with self.connection() as conn:
                    table = copy_csv(conn, select, schema)
            if every and table.num_rows:
                kept = pc.is_in(table["trace_id"], value_set=pa.array(list(ids), pa.string()))
                if not pc.all(kept).as_py():
                    table = table.filter(kept)
            return in_order(ordered(table, query[2]), ids)

        yield run

    def _arrow_connections(self) -> ArrowConnections | None:
        """This store's ADBC connections (made on first use), or None without the driver."""
        if self._arrow is None and arrow_driver() is not None:
            with self._arrow_lock:
                if self._arrow is None:
                    self._arrow = ArrowConnections(psycopg.conninfo.make_conninfo(self.conninfo, **{
                        key: value for key, value in self.connect_kwargs.items() if key != "autocommit"}), self._server)
        return self._arrow

    def _rows_and_names(self, sql: str, params: Sequence[Any]) -> tuple[list[Any], list[str]]:
        with self.connection() as conn:
            cursor = conn.execute(self._sql(sql), params)
            return cursor.fetchall(), [d.name for d in cursor.description or ()]

    def _is_damage(self, exc: BaseException) -> bool:
        return super()._is_damage(exc) or isinstance(exc, psycopg.DataError)

    def _run(self, conn: psycopg.Connection[tuple[Any, ...]], sql: str, params: Sequence[Any], fetch: bool) -> list[Any]:
        try:
            cursor = conn.execute(self._sql(sql), params)
            return cursor.fetchall() if fetch else []
        except psycopg.IntegrityError:
            raise
        except psycopg.Error as exc:
            if _gone(conn, exc):  # the transaction is gone with the session: safe to run again
                raise _ConnectionLost(f"{self._server}: {str(exc).strip()}") from None
            raise StoreError(f"{self._server}: {str(exc).strip()}") from None

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return self._run(conn, sql, params, True)
        own = write_deadline.get() is None
        token = write_deadline.set(time.monotonic() + self.retry_seconds) if own else None
        try:
            delay = 0.05
            while True:  # a read on its own is safe to repeat
                try:
                    conn = self._borrow()
                    try:
                        return self._run(conn, sql, params, True)
                    finally:
                        self._give_back(conn)
                except _ConnectionLost as exc:
                    delay = self._backoff(delay, exc)
                    time.sleep(delay)
        finally:
            if token is not None:
                write_deadline.reset(token)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            raise StoreError(f"internal: a write statement outside a transaction: {sql[:60]}")  # pragma: no cover
        self._run(conn, sql, params, False)

    def _backoff(self, delay: float, exc: Exception) -> float:
        """The next wait before a retry (never past the deadline), or StoreUnavailableError once it has passed."""
        deadline = write_deadline.get()
        now = time.monotonic()
        if deadline is None or now >= deadline:
            tried = now - (deadline - self.retry_seconds) if deadline is not None else 0.0
            raise StoreUnavailableError(self._server, f"{exc} (still failing after {tried:.1f} s of retries, "
                                        f"retry_seconds={self.retry_seconds:g}; raise it or check the server)") from None
        return max(0.0, min(delay * 2, 2.0, deadline - now))

    def _where(self, trace_id: str, table: str) -> str:
        return f"{self._server}#{self.schema or 'public'}.{table}/{trace_id}"

    # ---- transactions -----------------------------------------------------------------------
    def _begin(self) -> psycopg.Connection[tuple[Any, ...]]:
        """Open this thread's write: a pooled connection in pipeline mode, so the write's statements
        travel together and only its reads and its commit wait for the server."""
        if getattr(self._local, "conn", None) is not None:
            raise StoreError("internal: a second write opened on a thread that holds one")  # pragma: no cover
        conn = self._borrow()
        try:
            marker = self._marker(conn)
        except BaseException:
            self._give_back(conn)
            raise
        pipeline = conn.pipeline()
        token = uuid.uuid4().hex
        try:
            pipeline.__enter__()
            self._local.conn, self._local.pipeline, self._local.token = conn, pipeline, token
            self._run(conn, "BEGIN", (), False)
            self._run(conn, "UPDATE side_records SET data = ? WHERE trace_id = ? AND name = ?",
                      (token, MARKER_TRACE, marker), False)
        except BaseException:
            self._end(failed=True)
            raise
        return conn

    def _marker(self, conn: psycopg.Connection[tuple[Any, ...]]) -> str:
        """This thread's marker row (created on its first write, outside any transaction)."""
        marker: str | None = getattr(self._local, "marker", None)
        if marker is None:
            marker = f"{self._instance}:{next(self._threads)}"
            self._run(conn, "INSERT INTO side_records (trace_id, name, data) VALUES (?, ?, '') "
                            "ON CONFLICT (trace_id, name) DO NOTHING", (MARKER_TRACE, marker), False)
            self._local.marker = marker
        return marker

    def _at(self, point: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(point)

    def _end(self, *, failed: bool) -> None:
        """Commit (or roll back) this thread's write and give its connection back."""
        conn, pipeline, token = self._local.conn, self._local.pipeline, self._local.token
        self._local.conn = self._local.pipeline = self._local.token = None
        try:
            if not failed:
                committing = False
                try:
                    self._at("before_commit")
                    committing = True
                    conn.execute("COMMIT")
                    self._at("commit_sent")
                    pipeline.__exit__(None, None, None)  # sends what is queued; raises the write's first error
                except psycopg.IntegrityError:
                    raise
                except psycopg.Error as exc:
                    if not _gone(conn, exc):
                        raise StoreError(f"{self._server}: the write did not commit: {str(exc).strip()}") from None
                    if committing and not isinstance(exc, psycopg.errors.TransactionRollback) and self._committed(token):
                        return  # the answer was lost, the commit was not
                    raise _ConnectionLost(f"{self._server}: the commit failed ({str(exc).strip()})") from None
        finally:
            if conn.pgconn.pipeline_status:  # still in pipeline mode (a failed write): leave it, errors known
                try:
                    pipeline.__exit__(None, None, None)
                except psycopg.Error:
                    pass
            if not conn.broken and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                try:
                    conn.rollback()
                except psycopg.Error:
                    pass  # a dead connection: the server rolled back already
            self._give_back(conn)

    def _committed(self, token: str) -> bool:
        """Whether the write that set this thread's marker to `token` committed, asked on a new connection.

        `FOR UPDATE` waits while the old transaction still holds the row (its session not yet ended
        on the server), so "not our token" is only answered once that transaction is over."""
        own = write_deadline.get() is None
        reset = write_deadline.set(time.monotonic() + self.retry_seconds) if own else None
        try:
            delay = 0.05
            while True:
                deadline = write_deadline.get()
                left = self.retry_seconds if deadline is None else deadline - time.monotonic()
                try:
                    kwargs = {**self.connect_kwargs, "connect_timeout": max(2, min(self.connect_timeout, round(left)))}
                    with psycopg.connect(self.conninfo, **kwargs) as conn, conn.transaction():
                        conn.execute(f"SET LOCAL lock_timeout = {max(1, int(left * 1000))}")
                        row = conn.execute("SELECT data FROM side_records WHERE trace_id = %s AND name = %s FOR UPDATE",
                                           (MARKER_TRACE, self._local.marker)).fetchone()
                    return row is not None and row[0] == token
                except psycopg.Error as error:
                    if not (isinstance(error, psycopg.OperationalError) or _gone(None, error)):
                        raise StoreError(f"{self._server}: cannot tell whether the write committed: {error}") from None
                    delay = self._backoff(delay, error)
                    time.sleep(delay)
        finally:
            if reset is not None:
                write_deadline.reset(reset)

    @contextmanager
    def _transaction(self, what: str) -> Iterator[None]:
        if getattr(self._local, "conn", None) is not None:  # part of the write already open on this thread
            yield
            return
        self._begin()
        failed = True
        try:
            self._at("locked")
            yield
            failed = False
        finally:
            self._end(failed=failed)

    def _acquire_writer(self, trace_id: str) -> int | None:
        conn = self._begin()
        try:
            rows = self._run(conn, "UPDATE traces SET generation = generation + 1 WHERE trace_id = ? "
                                   "RETURNING generation", (trace_id,), True)
            self._at("locked")
        except BaseException:
            self._end(failed=True)
            raise
        if not rows:
            return None
        return int(rows[0][0]) - 1

    def _release_writer(self, trace_id: str, *, failed: bool) -> None:
        try:
            self._end(failed=failed)
        except BaseException:
            self._hot.pop(trace_id, None)
            raise
        if failed:
            # The live state may hold what was just rolled back: the next write re-reads the database.
            self._hot.pop(trace_id, None)

    # ---- primitives only this store has ------------------------------------------------------
    def _create_record(self, trace: Trace, tree: GoalTree) -> None:
        try:
            with self._transaction(trace.trace_id):
                self._execute(_INSERT_TRACE, self._trace_row(trace, tree))
        except psycopg.IntegrityError:
            raise ConflictError(f"trace {trace.trace_id!r} already exists; continue it instead of creating it") from None

    def _announce(self, trace_id: str, event_id: int) -> None:
        self._execute("SELECT pg_notify(?, ?)", (EVENTS_CHANNEL, f"{trace_id}:{event_id}"))

    def _write_side_record(self, trace_id: str, name: str, data: str) -> None:
        with self._transaction(trace_id):
            super()._write_side_record(trace_id, name, data)
            if name == "stop_request":
                self._execute("SELECT pg_notify(?, ?)", (STOPS_CHANNEL, trace_id))


def _close_pool(pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]], pid: int) -> None:
    """Close a pool in the process that opened it; a forked child leaves its parent's sessions alone.

    The store's last reference may go on one of the pool's own threads (a collection there runs
    this finalizer): a pool cannot join its own thread, so the close then runs on a thread of its
    own (it used to raise "cannot join current thread" halfway, leaving the idle sessions open).
    """
    if os.getpid() != pid:
        return
    if threading.current_thread().name.startswith(f"{pool.name}-"):  # psycopg_pool's worker / scheduler names
        threading.Thread(target=pool.close, kwargs={"timeout": 1.0}, name=f"{pool.name}-close", daemon=True).start()
    else:
        pool.close(timeout=1.0)
