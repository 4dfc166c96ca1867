"""PostgreSQL faults a user meets (issue 29): URLs refused clearly and never printed with their
password, a server that went away bounded by `retry_seconds` with a true message, and the
commit marker that tells a landed commit from a lost one."""

from __future__ import annotations

import re
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from cyber_agent.errors import ConfigurationError, StoreUnavailableError
from cyber_agent.trace import Message, Trace, open_store
from cyber_agent.trace.postgres_url import redact_url
from tests import pg_server

pytestmark = pytest.mark.skipif(not pg_server.available() and not pg_server.required(),
                                reason="PostgreSQL 15 binaries or psycopg not installed (CI installs them)")


@pytest.fixture
def url(tmp_path: Path) -> str:
    return pg_server.server().schema_url(pg_server.schema_for(str(tmp_path)))


def test_redact_url_hides_the_password_in_the_user_part_and_the_query() -> None:
    assert redact_url("postgresql://ann:s3cret@db:5432/x?sslmode=require") == "postgresql://ann:***@db:5432/x?sslmode=require"
    assert redact_url("postgresql://ann@db/x?password=s3cret&port=1") == "postgresql://ann@db/x?password=***&port=1"
    assert redact_url("postgresql://ann:s3cret@[::1/x") == "postgresql://ann:***@[::1/x"
    assert redact_url("postgresql://ann@db/x") == "postgresql://ann@db/x"


@pytest.mark.parametrize(("suffix", "names"), [
    ("pool_sise=2", "unknown option 'pool_sise'; did you mean 'pool_size'?"),
    ("pool_size=two", "option pool_size='two' is not valid; pool_size is an int"),
    ("retry_seconds=soon", "retry_seconds is a number"),
    ("retry_seconds=-1", "retry_seconds >= 0"),
])
def test_a_bad_option_is_named_and_the_password_never_shown(suffix: str, names: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_store(f"postgresql://ann:s3cret@127.0.0.1:1/db?{suffix}")
    assert names in str(info.value)
    assert "s3cret" not in str(info.value) and "ann:***@" in str(info.value)


def test_an_unclosed_ipv6_host_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"does not parse.*IPv6 host is written in brackets") as info:
        open_store("postgresql://ann:s3cret@[::1/db")
    assert "s3cret" not in str(info.value)


class _Gate:
    """A TCP proxy to the test server that can be shut: then every connection drops and new ones are refused."""

    def __init__(self) -> None:
        server = pg_server.server()
        self.target = str(server.socket_dir / f".s.PGSQL.{server.port}")
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"postgresql://{server.user}:pw@127.0.0.1:{self.listener.getsockname()[1]}/postgres"
        self.open: list[socket.socket] = []
        self.closed, self.lock = False, threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.closed:
                    client.close()
                    return
                upstream = socket.socket(socket.AF_UNIX)
                upstream.connect(self.target)
                self.open += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass

    def shut(self) -> None:
        with self.lock:
            self.closed = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        except OSError:
            pass
        self.listener.close()
        for end in self.open:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()


async def test_a_server_gone_gives_up_after_retry_seconds_and_says_how_long_it_tried(url: str) -> None:
    gate = _Gate()
    store = open_store(f"{gate.url}?schema={url.rsplit('schema=', 1)[1]}&retry_seconds=2")
    trace = Trace.create(task="gone")
    await store.create_trace(trace)
    gate.shut()
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as info:
        await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content="lost?"))
    took = time.monotonic() - started
    store.close()  # type: ignore[attr-defined]  # its pool stops trying the shut gate
    said = float(re.search(r"still failing after ([0-9.]+) s", str(info.value)).group(1))  # type: ignore[union-attr]
    assert 2.0 <= said <= took + 0.1, (said, took)  # the message is true
    assert took < 10, took  # the pool's 10 s connect timeout no longer outlasts retry_seconds
    assert "pw" not in str(info.value)


async def test_markers_are_one_row_per_writing_thread_and_close_removes_them(url: str) -> None:
    from cyber_agent.trace.postgres_store import MARKER_TRACE, PostgresTraceStore

    store = PostgresTraceStore(url)
    trace = Trace.create(task="marked")
    await store.create_trace(trace)
    for i in range(3):
        await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content=f"m{i}"))
    with store.connection() as conn:
        rows = conn.execute("SELECT name FROM side_records WHERE trace_id = %s", (MARKER_TRACE,)).fetchall()
    assert len(rows) == 1 and rows[0][0].startswith(store._instance)
    assert [t.trace_id for t in await store.list_traces(limit=None)] == [trace.trace_id]
    store.close()
    reader = PostgresTraceStore(url)
    with reader.connection() as conn:
        assert conn.execute("SELECT count(*) FROM side_records WHERE trace_id = %s", (MARKER_TRACE,)).fetchone() == (0,)


async def test_a_pool_closed_from_one_of_its_own_threads_closes_whole(url: str) -> None:
    """The store's finalizer can run on a pool thread (a collection there): the close must not try to join itself."""
    from cyber_agent.trace.postgres_store import _close_pool

    store = open_store(url)
    await store.create_trace(Trace(trace_id="closing", task="t"))
    pool = store._pool  # type: ignore[attr-defined]
    errors: list[BaseException] = []

    class CloseHere:  # a maintenance task: psycopg_pool runs it on one of the pool's worker threads
        def run(self) -> None:
            try:
                _close_pool(pool, __import__("os").getpid())
            except BaseException as exc:  # noqa: BLE001 - the test reports it
                errors.append(exc)

    pool.run_task(CloseHere())
    deadline = time.monotonic() + 30
    while not (pool.closed and not pool.get_stats().get("pool_available")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not errors, errors
    assert pool.closed


async def test_a_forked_child_closing_the_store_leaves_the_parents_markers_and_sessions(url: str) -> None:
    """A worker forked after the parent wrote, closing its copy of the store before it ever used it: the parent's
    commit markers (how a lost commit answer is resolved) and pooled sessions are the parent's, not the child's."""
    from cyber_agent.trace.postgres_store import MARKER_TRACE, PostgresTraceStore

    store = PostgresTraceStore(url)
    trace = Trace.create(task="parent")
    await store.create_trace(trace)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            store.close()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with store.connection() as conn:
        assert conn.execute("SELECT count(*) FROM side_records WHERE trace_id = %s AND name LIKE %s",
                            (MARKER_TRACE, f"{store._instance}:%")).fetchone() == (1,)
    await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content="after the fork"))
    assert (await store.require_trace(trace.trace_id)).total_messages == 1
