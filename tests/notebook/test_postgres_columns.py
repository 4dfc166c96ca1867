"""The PostgreSQL store's columnar reads (`cyber_agent/trace/postgres_columns.py`): both drivers (ADBC's binary
COPY, psycopg's CSV COPY) give the records path's frames for the whole store and for a chosen tree; ADBC's kept
connections survive a server restart, are never touched by a forked child, and a stopped server is named."""

from __future__ import annotations

import asyncio
import gc
import os
from pathlib import Path

import pandas as pd
import pytest

from nb_helpers import same_data
from cyber_agent.errors import StoreUnavailableError
from cyber_agent.notebook import to_frames
from cyber_agent.notebook.frames import frames_from_records
from cyber_agent.trace import Message, Trace
from tests import pg_server

pytestmark = pytest.mark.skipif(not (pg_server.available() or pg_server.required()),
                                reason="no PostgreSQL 15 binaries here (CI installs them and requires these tests)")

FRAMES = ("traces", "messages", "tool_calls", "goals", "events", "usage")


def _store(tmp_path: Path, name: str = "") -> object:
    from cyber_agent.trace.postgres_store import PostgresTraceStore

    return PostgresTraceStore(pg_server.server().schema_url(pg_server.schema_for(f"{tmp_path}{name}")))


def _fill(store: object, roots: int = 2) -> list[str]:
    async def fill() -> list[str]:
        ids = []
        for r in range(roots):
            root = Trace.create(task=f"root {r}")
            await store.create_trace(root)  # type: ignore[attr-defined]
            child = Trace.create(task=f"child {r}", parent_trace_id=root.trace_id)
            await store.create_trace(child)  # type: ignore[attr-defined]
            for trace in (child, root):  # the child's rows first: on disk they do not follow the records' order
                for i in range(3):
                    await store.add_message(Message.create(  # type: ignore[attr-defined]
                        trace_id=trace.trace_id, role="user" if i % 2 == 0 else "assistant", content=f"{trace.task} {i}"))
            ids.append(root.trace_id)
        return ids
    return asyncio.run(fill())


def _assert_same(a: object, b: object) -> None:
    for name in FRAMES:
        pd.testing.assert_frame_equal(same_data(getattr(a, name)), same_data(getattr(b, name)), obj=name)


@pytest.mark.parametrize("driver", ["adbc", "csv"])
def test_both_drivers_read_the_records_frames_whole_or_one_tree(tmp_path: Path, driver: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from cyber_agent.trace.postgres_columns import arrow_driver
    from cyber_agent.trace.postgres_store import PostgresTraceStore

    if driver == "adbc" and arrow_driver() is None:
        pytest.fail("adbc-driver-postgresql is not installed: the `frames` extra (in `dev`) brings it")
    monkeypatch.setattr(PostgresTraceStore, "_arrow_driver", driver == "adbc")
    store = _store(tmp_path)
    roots = _fill(store)
    whole = to_frames(store)
    assert len(whole.messages) == 12
    assert (store._arrow is not None) == (driver == "adbc")  # type: ignore[attr-defined]
    _assert_same(whole, frames_from_records(asyncio.run(store.read_records(None))))  # type: ignore[attr-defined]
    one = to_frames(store, root_ids=[roots[1]])
    assert len(one.messages) == 6 and set(one.traces.task) == {"root 1", "child 1"}
    _assert_same(one, frames_from_records(asyncio.run(store.read_records([roots[1]]))))  # type: ignore[attr-defined]


def test_a_kept_connection_dropped_by_a_restart_is_replaced(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _fill(store, roots=1)
    before = to_frames(store)
    arrow = store._arrow  # type: ignore[attr-defined]
    assert arrow is not None and len(arrow._idle) >= 1
    kept = list(arrow._idle)
    pg_server.server().restart()  # every session ends: the kept connections are dead
    after = to_frames(store)
    _assert_same(before, after)
    assert not set(map(id, kept)) & set(map(id, arrow._idle))  # the dead ones were closed, new ones kept


def test_a_stopped_server_is_named(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _fill(store, roots=1)
    to_frames(store)
    server = pg_server.server()
    server.stop()
    try:
        with pytest.raises(StoreUnavailableError, match="is unavailable"):
            store._arrow.query("SELECT 1 AS x")  # type: ignore[attr-defined]
    finally:
        server.start()
    assert store._arrow.query("SELECT 1 AS x").num_rows == 1  # type: ignore[attr-defined]


def test_a_fork_inherits_no_kept_connection(tmp_path: Path) -> None:
    """An ADBC connection a child inherited would end the parent's session when the child frees it: the kept
    ones are closed before every fork, and each side opens its own."""
    store = _store(tmp_path)
    _fill(store, roots=1)
    to_frames(store)
    arrow = store._arrow  # type: ignore[attr-defined]
    assert len(arrow._idle) >= 1
    pid = os.fork()
    if pid == 0:  # the child: nothing inherited; its own read works; freeing its objects touches no parent session
        code = 1
        try:
            code = 0 if not arrow._idle and len(to_frames(store).messages) == 6 else 2
            store.close()  # type: ignore[attr-defined]
            gc.collect()
        finally:
            os._exit(code)
    assert arrow._idle == []
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(to_frames(store).messages) == 6
    assert len(arrow._idle) >= 1
