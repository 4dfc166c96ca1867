"""The PostgreSQL store's columnar reads (`SQLTraceStore.read_columns`, behind `to_frames`): rows straight into Arrow.

Two drivers, one query shape (`columns_query`):

- ADBC's PostgreSQL driver (`adbc-driver-postgresql`, in the `frames` extra, Apache Arrow's own): the server's
  binary `COPY` decoded into Arrow columns in C++ (`ArrowConnections`). Its connections are kept open between
  reads (opening one costs ~30 ms, more than reading 10k messages).
- without it, psycopg's `COPY ... TO STDOUT WITH (FORMAT csv)` parsed by `pyarrow.csv` (`copy_csv`).

Either way no Python object is made per row or value; the store picks the driver
(`cyber_agent/trace/postgres_store.py:PostgresTraceStore._columnar_session`).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql as psql

from cyber_agent.errors import StoreError, StoreUnavailableError


def arrow_driver() -> Any | None:
    """ADBC's PostgreSQL DB-API module, or None when the `frames` extra is not installed."""
    try:
        from adbc_driver_postgresql import dbapi
    except ImportError:
        return None
    return dbapi


def columns_query(query: tuple[str, str, str], ids: Sequence[str] | None) -> str:
    """The SELECT of `query` (`SQLTraceStore._MESSAGE_COLUMNS_SQL`'s shape: select, condition, order) for the
    traces `ids`, trace after trace in their order, each through its primary key in order (nothing is sorted:
    `ORDER BY trace_id, ...` over `trace_id = ANY(...)` sorted every row, on disk past `work_mem`); for None
    (every trace of the store) the table whole, as it lies on disk, the caller ordering it (looking each trace
    up took a fifth longer than one scan: ~6 ms of 32 at 10k messages). The ids are a literal, quoted by
    psycopg: `COPY` takes no parameters."""
    select, condition, order = query
    if ids is None:
        return f"{select} WHERE true{condition}"
    return (f"SELECT rows.* FROM unnest({psql.Literal(list(ids)).as_string()}::text[]) WITH ORDINALITY AS "
            f"ids(id, position) CROSS JOIN LATERAL ({select} WHERE trace_id = ids.id{condition} ORDER BY {order}) "
            "AS rows")


def copy_csv(conn: psycopg.Connection[tuple[Any, ...]], select: str, schema: Any) -> Any:
    """The rows of `select` as an Arrow table of `schema`: `COPY (...) TO STDOUT WITH (FORMAT csv)` parsed by
    Arrow's CSV reader into the schema's types (NULL is an unquoted empty field, an empty text a quoted one)."""
    import pyarrow as pa
    from pyarrow import csv

    data = bytearray()
    with conn.cursor() as cursor, cursor.copy(f"COPY ({select}) TO STDOUT WITH (FORMAT csv)") as copy:
        for block in copy:
            data += block
    if not data:
        return schema.empty_table()
    return csv.read_csv(
        pa.py_buffer(data), read_options=csv.ReadOptions(column_names=schema.names),
        parse_options=csv.ParseOptions(newlines_in_values=True),
        convert_options=csv.ConvertOptions(column_types=schema, null_values=[""], strings_can_be_null=True,
                                           quoted_strings_can_be_null=False))


class ArrowConnections:
    """The ADBC connections of one store (its libpq connection string: schema and options included), each used
    by one read at a time and kept for the next one. They are closed before this process forks (`_before_fork`):
    unlike psycopg's, an ADBC connection a child inherited would end the parent's session when the child frees
    it. They are closed at exit too."""

    def __init__(self, conninfo: str, server: str) -> None:
        self._conninfo, self._server = conninfo, server
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        _OPEN.add(self)
        weakref.finalize(self, _close_all, self._idle)

    def query(self, select: str) -> Any:
        """The rows of `select` as an Arrow table (the server's types). A kept connection the server has dropped
        since (a restart) is replaced once; an unreachable server raises `StoreUnavailableError`."""
        dbapi = arrow_driver()
        assert dbapi is not None
        conn, kept = self._take(dbapi)
        try:
            try:
                table = self._run(conn, select)
            except dbapi.OperationalError:
                if not kept:
                    raise
                _close_quietly(conn)  # dropped while it waited: one fresh connection, one more try
                conn = self._open(dbapi)
                table = self._run(conn, select)
        except dbapi.OperationalError as exc:
            _close_quietly(conn)
            raise StoreUnavailableError(self._server, _first_line(exc)) from None
        except dbapi.Error as exc:
            _close_quietly(conn)
            raise StoreError(f"{self._server}: {_first_line(exc)}") from None
        except BaseException:
            _close_quietly(conn)
            raise
        with self._lock:
            self._idle.append(conn)
        return table

    def close(self) -> None:
        """Close the kept connections."""
        with self._lock:
            idle = self._idle[:]
            self._idle.clear()
        _close_all(idle)

    @staticmethod
    def _run(conn: Any, select: str) -> Any:
        with conn.cursor() as cursor:
            cursor.execute(select)
            return cursor.fetch_arrow_table()

    def _take(self, dbapi: Any) -> tuple[Any, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._open(dbapi), False

    def _open(self, dbapi: Any) -> Any:
        try:
            return dbapi.connect(self._conninfo, autocommit=True)  # autocommit: no transaction held between reads
        except dbapi.Error as exc:
            raise StoreUnavailableError(self._server, f"{_first_line(exc)}; is the server running?") from None


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _close_all(connections: list[Any]) -> None:
    for conn in connections:
        _close_quietly(conn)
    connections.clear()


_OPEN: weakref.WeakSet[ArrowConnections] = weakref.WeakSet()


def _before_fork() -> None:
    for connections in list(_OPEN):
        connections.close()


os.register_at_fork(before=_before_fork)


def _close_quietly(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - a connection the server already ended; nothing to keep
        pass

