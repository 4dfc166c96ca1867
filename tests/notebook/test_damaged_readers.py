"""Every reader skips and names a damaged trace, in every store that can hold one (issue 29).

One healthy and one damaged root per store: a file store whose `meta.json` starts with a NUL
byte, SQLite and PostgreSQL rows whose `events.data`, `traces.goals` or `messages.data` is not
JSON. Frames, the explorer and stepper, exports, a copy and the OTel export load the healthy
trace and name the damaged one in a `DamagedEntryWarning`, as the store's listing does.
"""

from __future__ import annotations

import asyncio
import sqlite3
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from cyber_agent.notebook.export import export_traces, load_export
from cyber_agent.notebook.frames import to_frames
from cyber_agent.trace import Message, Trace, open_store
from cyber_agent.trace.store_base import BaseTraceStore
from cyber_agent.trace.store_listing import DamagedEntryWarning
from tests import pg_server


def _fill(store: BaseTraceStore) -> tuple[str, str]:
    async def fill() -> tuple[str, str]:
        ids = []
        for task in ("healthy", "damaged"):
            trace = Trace.create(task=task)
            await store.create_trace(trace)
            for i in range(2):
                await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content=f"{task} {i}"))
            ids.append(trace.trace_id)
        return ids[0], ids[1]
    return asyncio.run(fill())


def _file_store(tmp_path: Path, _: str) -> tuple[str, Callable[[str], None]]:
    base = tmp_path / "fs"

    def damage(trace_id: str) -> None:
        meta = base / trace_id / "meta.json"
        meta.write_bytes(b"\x00" + meta.read_bytes())  # json.loads would take these bytes for UTF-16
    return f"file:{base}", damage


def _sqlite_store(tmp_path: Path, column: str) -> tuple[str, Callable[[str], None]]:
    path = tmp_path / "runs.db"
    table, name = column.split(".")

    def damage(trace_id: str) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(f"UPDATE {table} SET {name} = '{{broken' WHERE trace_id = ?", (trace_id,))
    return f"sqlite:///{path}", damage


def _postgres_store(tmp_path: Path, column: str) -> tuple[str, Callable[[str], None]]:
    if not pg_server.available() and not pg_server.required():
        pytest.skip("PostgreSQL 15 binaries or psycopg not installed (CI installs them)")
    import psycopg

    server = pg_server.server()
    schema = pg_server.schema_for(str(tmp_path))
    table, name = column.split(".")

    def damage(trace_id: str) -> None:
        with psycopg.connect(server.url, autocommit=True, options=f"-c search_path={schema}") as conn:
            conn.execute(f"UPDATE {table} SET {name} = '{{broken' WHERE trace_id = %s", (trace_id,))
    return server.schema_url(schema), damage


CASES = [("file", "meta.json"), ("sqlite", "events.data"), ("sqlite", "traces.goals"), ("sqlite", "messages.data"),
         ("postgres", "events.data"), ("postgres", "traces.goals"), ("postgres", "messages.data")]
_OPENERS = {"file": _file_store, "sqlite": _sqlite_store, "postgres": _postgres_store}


@pytest.fixture(params=CASES, ids=[f"{kind}-{column}" for kind, column in CASES])
def damaged_store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, str, str]:
    kind, column = request.param
    url, damage = _OPENERS[kind](tmp_path, column)
    healthy, damaged = _fill(open_store(url))
    damage(damaged)
    return url, healthy, damaged, column


def _named(caught: list[warnings.WarningMessage], trace_id: str) -> bool:
    return any(isinstance(w.message, DamagedEntryWarning) and any(e.name == trace_id or trace_id in e.path
                                                                  for e in w.message.entries) for w in caught)


def test_frames_explorer_stepper_exports_copy_and_otel_load_the_healthy_trace_and_name_the_damaged(
        damaged_store: tuple[str, str, str, str], tmp_path: Path) -> None:
    from cyber_agent.notebook.explorer import TraceExplorer
    from cyber_agent.notebook.stepper import ReportStepper
    from cyber_agent.otel._export import tree_spans

    url, healthy, damaged, column = damaged_store
    store = open_store(url)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = asyncio.run(store.read_records(None))
        export = export_traces(store, None, tmp_path / "out.jsonl")
        copied = asyncio.run(open_store("memory:").import_records(records))
        TraceExplorer(store, healthy)
        ReportStepper(store, healthy)
        spans = asyncio.run(tree_spans(store, healthy))
    assert [r.trace_id for r in records] == [healthy] and copied == [healthy]
    assert [r.trace_id for r in asyncio.run(load_export(export).read_records(None))] == [healthy]
    assert spans and _named(caught, damaged), [str(w.message) for w in caught]
    if column == "messages.data":
        # The SQL frames read the typed columns written beside each message, never its JSON: whole and correct.
        frames = to_frames(store)
        assert set(frames.traces["trace_id"]) == {healthy, damaged}
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frames = to_frames(store)
        light = to_frames(store, messages=False, events=False)
    assert set(frames.traces["trace_id"]) == {healthy} and set(frames.messages["trace_id"]) == {healthy}
    assert set(frames.events["trace_id"]) == {healthy}
    assert len(frames.messages) == 2 and len(frames.events) == len(records[0].events)
    if column != "events.data":  # read without events, a damaged event row is not read at all
        assert set(light.traces["trace_id"]) == {healthy}
    assert _named(caught, damaged), [str(w.message) for w in caught]
