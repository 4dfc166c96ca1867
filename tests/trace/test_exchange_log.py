"""Recorded model exchanges kept with each trace, in every store (cyber_agent/trace/exchange_log.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cyber_agent.errors import CorruptRecordError, InvalidUpdateError, TraceNotFoundError
from cyber_agent.trace import Trace
from cyber_agent.trace.exchange_log import EXCHANGES_FILE, ExchangeLog
from cyber_agent.trace.sqlite_schema import SCHEMA_VERSION, migrate
from cyber_agent.trace.sqlite_store import SQLiteTraceStore
from cyber_agent.trace.store import FileSystemTraceStore


async def test_exchanges_append_densely_per_trace_and_survive_reopening(store, open_store, trace_id) -> None:
    assert isinstance(store, ExchangeLog)
    other = Trace.create(task="other")
    await store.create_trace(other)
    assert await store.get_exchanges(trace_id) == []
    record = {"site": "root", "key": "k0", "response": {"content": "é and \u2028"}}
    assert [await store.append_exchange(trace_id, {**record, "n": n}) for n in range(3)] == [0, 1, 2]
    assert await store.append_exchange(other.trace_id, record) == 0
    record["site"] = "changed by the caller"  # stored records share nothing with the caller
    reopened = open_store()
    got = await reopened.get_exchanges(trace_id)
    assert [r["n"] for r in got] == [0, 1, 2] and got[0]["response"]["content"] == "é and \u2028"
    assert got[0]["site"] == "root"
    assert await reopened.append_exchange(trace_id, {"n": 3}) == 3  # a new instance continues the count
    assert len(await store.get_exchanges(other.trace_id)) == 1


async def test_exchanges_of_an_unknown_trace_or_of_bad_values_are_refused(store, trace_id) -> None:
    with pytest.raises(TraceNotFoundError):
        await store.append_exchange("no-such-trace", {"n": 0})
    with pytest.raises(TraceNotFoundError):
        await store.get_exchanges("no-such-trace")
    with pytest.raises(InvalidUpdateError, match="exchange is not JSON-serializable"):
        await store.append_exchange(trace_id, {"value": object()})
    assert await store.get_exchanges(trace_id) == []


async def test_the_file_store_skips_a_torn_last_exchange_and_cuts_it_before_the_next(tmp_path: Path) -> None:
    store = FileSystemTraceStore(tmp_path / "traces")
    trace = Trace.create(task="torn")
    await store.create_trace(trace)
    await store.append_exchange(trace.trace_id, {"n": 0})
    path = store.trace_dir(trace.trace_id) / EXCHANGES_FILE
    with path.open("a") as handle:
        handle.write('{"n": 1, "respo')  # a writer killed mid-line
    fresh = FileSystemTraceStore(tmp_path / "traces")
    assert [r["n"] for r in await fresh.get_exchanges(trace.trace_id)] == [0]
    assert await fresh.append_exchange(trace.trace_id, {"n": 1}) == 1
    assert [r["n"] for r in await fresh.get_exchanges(trace.trace_id)] == [0, 1]
    path.write_text('{"n": 0}\n[1, 2]\n')
    with pytest.raises(CorruptRecordError, match="exchange 1 is not a JSON object"):
        await fresh.get_exchanges(trace.trace_id)


async def test_a_version_2_database_gains_the_exchanges_table_in_place(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    migrate(conn, str(path), target=2)  # written before exchanges were recorded
    conn.execute("COMMIT")
    conn.close()
    store = SQLiteTraceStore(path)
    versions = [v for (v,) in store.connection().execute("SELECT version FROM schema_versions ORDER BY version")]
    assert versions == [1, 2, 3, 4] == list(range(1, SCHEMA_VERSION + 1))
    trace = Trace.create(task="after the upgrade")
    await store.create_trace(trace)
    assert await store.append_exchange(trace.trace_id, {"n": 0}) == 0
    assert store.connection().execute("SELECT trace_id, call_index FROM exchanges").fetchall() == [(trace.trace_id, 0)]
