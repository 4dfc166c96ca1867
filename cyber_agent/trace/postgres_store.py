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
- **Dropped connections** (the server restarted, a network cut): the write is re-run from the
  start with a bounded backoff (`retry_seconds`). A commit whose answer was lost is resolved with
  `txid_status` of the write's transaction id first: committed means done (never applied twice),
  aborted means re-run (never lost). Past the deadline `StoreUnavailableError` is raised.
- **Live events.** Every event sends `NOTIFY cyber_agent_events, '<trace_id>:<event_id>'` inside
  its transaction (delivered only if it commits); `listen` turns them into an async iterator of
  events on a dedicated connection and replays from the last id after a reconnect. A stop request
  sends `NOTIFY cyber_agent_stops, '<trace_id>'`.
- **Schemas.** `?schema=NAME` keeps the store in its own schema (created if missing), e.g. one per
  project or test; migrations (`postgres_schema.py`) run under an advisory lock.
"""

from __future__ import annotations

import os
import re
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from cyber_agent.errors import ConfigurationError, ConflictError, StoreError, StoreUnavailableError
from cyber_agent.trace.events import TraceEvent
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import Trace
from cyber_agent.trace.postgres_listen import listen_events
from cyber_agent.trace.postgres_retry import RetriedWrites, _ConnectionLost
from cyber_agent.trace.postgres_schema import migrate
from cyber_agent.trace.sql_store import _INSERT_TRACE

__all__ = ["EVENTS_CHANNEL", "STOPS_CHANNEL", "PostgresTraceStore"]

EVENTS_CHANNEL = "cyber_agent_events"
"""NOTIFY channel of new events; the payload is `<trace_id>:<event_id>`."""
STOPS_CHANNEL = "cyber_agent_stops"
"""NOTIFY channel of stop requests; the payload is the trace id."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_OPTIONS: dict[str, type] = {"schema": str, "pool_size": int, "retry_seconds": float}


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """The libpq URL without this store's options, and those options (`schema`, `pool_size`, `retry_seconds`)."""
    parts = urlsplit(url)
    ours, theirs = {}, []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in _OPTIONS:
            ours[name] = value
        else:
            theirs.append((name, value))
    return urlunsplit(parts._replace(query=urlencode(theirs))), ours


class PostgresTraceStore(RetriedWrites):
    """Persist traces on a PostgreSQL server; any number of processes and machines may share it."""

    def __init__(self, url: str, *, schema: str | None = None, pool_size: int = 4, retry_seconds: float = 30.0,
                 connect_timeout: float = 10.0) -> None:
        super().__init__()
        conninfo, options = split_url(url)
        schema = options.get("schema", schema)
        if schema is not None and not _SCHEMA_NAME.fullmatch(schema):
            raise ConfigurationError("schema", f"{schema!r} is not a plain lower-case SQL name; use letters, digits "
                                               "and _, starting with a letter (e.g. schema=cyber_agent)")
        try:
            pool_size = int(options.get("pool_size", pool_size))
            retry_seconds = float(options.get("retry_seconds", retry_seconds))
        except ValueError as exc:
            raise ConfigurationError("store URL", f"{url!r}: {exc}; pool_size is an int, retry_seconds a float") from None
        if pool_size < 1 or retry_seconds < 0:
            raise ConfigurationError("store URL", f"{url!r}: pool_size must be >= 1 and retry_seconds >= 0")
        self.url, self.schema, self.pool_size, self.retry_seconds = url, schema, pool_size, retry_seconds
        self.connect_timeout = connect_timeout
        self.conninfo = conninfo
        self.connect_kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": max(1, round(connect_timeout))}
        if schema is not None:
            self.connect_kwargs["options"] = f"-c search_path={schema}"
        self._sql_cache: dict[str, str] = {}
        try:
            self._server = self._describe(conninfo)
            with psycopg.connect(conninfo, **{**self.connect_kwargs, "autocommit": False}) as conn:
                migrate(conn, schema, self._server)
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError("store URL", f"{url!r}: {str(exc).strip()}; options are libpq's "
                                     f"(host, port, user, sslmode, ...) and {', '.join(sorted(_OPTIONS))}") from None
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(self._server, f"{str(exc).strip()}; is the server running? "
                                        "(docs/trace.md, 'The PostgreSQL store', says how to start one)") from None
        self._pid = os.getpid()
        self._retired: list[ConnectionPool[psycopg.Connection[tuple[Any, ...]]]] = []
        self._pool = self._open_pool()

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
        """Close every connection of this instance (it cannot be used afterwards)."""
        self._pool.close()

    # ---- connections ------------------------------------------------------------------------
    def _borrow(self) -> psycopg.Connection[tuple[Any, ...]]:
        if os.getpid() != self._pid:  # a forked child: the parent's connections are not ours to use
            self._retired.append(self._pool)
            self._pid, self._local, self._pool = os.getpid(), threading.local(), self._open_pool()
        try:
            return self._pool.getconn()
        except PoolTimeout:
            raise _ConnectionLost(f"{self._server}: no connection within {self.connect_timeout} s") from None

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

    def _run(self, conn: psycopg.Connection[tuple[Any, ...]], sql: str, params: Sequence[Any], fetch: bool) -> list[Any]:
        try:
            cursor = conn.execute(self._sql(sql), params)
            return cursor.fetchall() if fetch else []
        except psycopg.OperationalError as exc:
            if conn.broken or isinstance(exc, psycopg.errors.TransactionRollback):  # safe to run again
                raise _ConnectionLost(f"{self._server}: {str(exc).strip()}") from None
            raise StoreError(f"{self._server}: {str(exc).strip()}") from None
        except psycopg.IntegrityError:
            raise
        except psycopg.Error as exc:
            raise StoreError(f"{self._server}: {str(exc).strip()}") from None

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return self._run(conn, sql, params, True)
        deadline, delay = time.monotonic() + self.retry_seconds, 0.05
        while True:  # a read on its own is safe to repeat
            try:
                conn = self._borrow()
                try:
                    return self._run(conn, sql, params, True)
                finally:
                    self._give_back(conn)
            except _ConnectionLost as exc:
                delay = self._backoff(deadline, delay, exc)
                time.sleep(delay)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            raise StoreError(f"internal: a write statement outside a transaction: {sql[:60]}")  # pragma: no cover
        self._run(conn, sql, params, False)

    def _backoff(self, deadline: float, delay: float, exc: Exception) -> float:
        """The next wait before a retry, or StoreUnavailableError when it would pass the deadline."""
        if time.monotonic() + delay > deadline:
            raise StoreUnavailableError(self._server, f"{exc} (still failing after {self.retry_seconds} s of retries; "
                                        "raise retry_seconds or check the server)") from None
        return min(delay * 2, 2.0)

    def _where(self, trace_id: str, table: str) -> str:
        return f"{self._server}#{self.schema or 'public'}.{table}/{trace_id}"

    # ---- transactions -----------------------------------------------------------------------
    def _begin(self) -> psycopg.Connection[tuple[Any, ...]]:
        """Open this thread's write: a pooled connection in pipeline mode, so the write's statements
        travel together and only its reads and its commit wait for the server."""
        if getattr(self._local, "conn", None) is not None:
            raise StoreError("internal: a second write opened on a thread that holds one")  # pragma: no cover
        conn = self._borrow()
        pipeline = conn.pipeline()
        try:
            pipeline.__enter__()
            self._local.conn, self._local.pipeline, self._local.txid = conn, pipeline, None
            self._run(conn, "BEGIN", (), False)
        except BaseException:
            self._end(failed=True)
            raise
        return conn

    def _end(self, *, failed: bool) -> None:
        """Commit (or roll back) this thread's write and give its connection back."""
        conn, pipeline, txid = self._local.conn, self._local.pipeline, self._local.txid
        self._local.conn = self._local.pipeline = self._local.txid = None
        try:
            if not failed:
                try:
                    conn.execute("COMMIT")
                    pipeline.__exit__(None, None, None)  # sends what is queued; raises the write's first error
                except psycopg.OperationalError as exc:
                    if conn.broken and txid is not None and self._committed(txid):
                        return  # the answer was lost, the commit was not
                    if conn.broken or isinstance(exc, psycopg.errors.TransactionRollback):
                        raise _ConnectionLost(f"{self._server}: the commit failed ({str(exc).strip()})") from None
                    raise StoreError(f"{self._server}: the write did not commit: {str(exc).strip()}") from None
                except psycopg.IntegrityError:
                    raise
                except psycopg.Error as exc:
                    raise StoreError(f"{self._server}: the write did not commit: {str(exc).strip()}") from None
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

    def _committed(self, txid: int) -> bool:
        """Whether the transaction `txid` committed, asked on a new connection (waits for the server)."""
        deadline, delay = time.monotonic() + self.retry_seconds, 0.05
        while True:
            try:
                with psycopg.connect(self.conninfo, **self.connect_kwargs) as conn:
                    row = conn.execute("SELECT txid_status(%s)", (txid,)).fetchone()
                status = row[0] if row else None
                if status != "in progress":
                    return status == "committed"
                exc: Exception = StoreError(f"transaction {txid} still in progress")
            except psycopg.OperationalError as error:
                exc = error
            delay = self._backoff(deadline, delay, exc)
            time.sleep(delay)

    @contextmanager
    def _transaction(self, what: str) -> Iterator[None]:
        if getattr(self._local, "conn", None) is not None:  # part of the write already open on this thread
            yield
            return
        conn = self._begin()
        failed = True
        try:
            (self._local.txid,), = self._run(conn, "SELECT txid_current()", (), True)
            yield
            failed = False
        finally:
            self._end(failed=failed)

    def _acquire_writer(self, trace_id: str) -> int | None:
        conn = self._begin()
        try:
            rows = self._run(conn, "UPDATE traces SET generation = generation + 1 WHERE trace_id = ? "
                                   "RETURNING generation, txid_current()", (trace_id,), True)
        except BaseException:
            self._end(failed=True)
            raise
        if not rows:
            return None
        generation, self._local.txid = rows[0]
        return int(generation) - 1

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
    """Close a pool in the process that opened it; a forked child leaves its parent's sessions alone."""
    if os.getpid() == pid:
        pool.close(timeout=1.0)
