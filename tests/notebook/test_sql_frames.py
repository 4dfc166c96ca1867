"""The SQL stores' frames, read as Arrow columns (`cyber_agent/trace/sql_store.py:SQLTraceStore.read_columns`),
equal the records path's, column for column, on real runs and on awkward messages (every store:
`test_columnar_frames.py`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pandas as pd
import pytest

from nb_helpers import same_data
from cyber_agent.cli import main
from cyber_agent.notebook import to_frames
from cyber_agent.notebook.frames import frames_from_records
from cyber_agent.trace import Message, SQLiteTraceStore, Trace

FRAMES = ("traces", "messages", "tool_calls", "goals", "events", "usage", "reports", "validations", "verdicts")


def _records_path(store: SQLiteTraceStore):  # noqa: ANN202
    return frames_from_records(asyncio.run(store.read_records(None)))


def _assert_same(a: object, b: object) -> None:
    for name in FRAMES:
        pd.testing.assert_frame_equal(same_data(getattr(a, name)), same_data(getattr(b, name)), obj=name)


def test_a_recursive_demo_tree_gives_the_same_frames_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    db = tmp_path / "runs.db"
    assert main(["--store", f"sqlite:///{db}", "demo"]) == 0
    assert main(["--store", f"sqlite:///{db}", "demo", "--mode", "legacy"]) == 0
    capsys.readouterr()
    store = SQLiteTraceStore(db)
    frames = to_frames(store)
    assert len(frames.tool_calls) > 0 and frames.messages.is_error.notna().any()
    _assert_same(frames, _records_path(store))


async def test_awkward_messages_give_the_same_frames_both_ways(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "odd.db")
    trace = Trace.create(task="odd")
    await store.create_trace(trace)
    tid = trace.trace_id
    for message in (
        Message.create(trace_id=tid, role="user", content=None),
        Message.create(trace_id=tid, role="assistant", content={"text": None, "tool_calls": [
            {"id": "a", "name": "x", "arguments": {}}, {"id": "b", "name": "", "arguments": {"k": [1, "ü"]}}]},
            metadata={"model": "m1", "cost_estimated": True, "usage_estimated": True}),
        Message.create(trace_id=tid, role="tool", tool_call_id="a", tool_name="x", content="ok ü",
                       metadata={"is_error": False, "truncated": True}),
        Message.create(trace_id=tid, role="tool", tool_call_id="b", tool_name="", content="bad",
                       metadata={"is_error": True, "refused": "children", "payload": {"path": "summarized"}},
                       duration_ms=1.5),
        Message.create(trace_id=tid, role="assistant", content={"text": "done", "tool_calls": []},
                       metadata={"cost_unpriced": True, "cost_estimated": False}),
    ):
        message.parent_sequence = (await store.require_trace(tid)).total_messages or None  # one chain
        await store.add_message(message)
    await store.update_message(f"{tid}-0003", description="rewritten later")  # its event keeps the old text
    await store.update_trace(tid, head_sequence=3)  # messages 4 and 5 leave the main path
    frames = to_frames(store)
    assert frames.messages.on_main_path.tolist() == [True, True, True, False, False]
    assert frames.tool_calls.is_error.tolist() == [False, True]
    assert frames.tool_calls[["truncated", "summarized"]].values.tolist() == [[True, False], [False, True]]
    assert frames.tool_calls["refused"].fillna("").tolist() == ["", "children"]
    assert frames.usage[["estimated_calls", "unpriced_calls"]].values.tolist() == [[1, 1]]
    _assert_same(frames, frames_from_records(await store.read_records(None)))


def test_a_postgresql_store_gives_the_same_frames_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from tests import pg_server

    if not (pg_server.available() or pg_server.required()):
        pytest.skip("no PostgreSQL 15 binaries here (CI installs them and requires this test)")
    from cyber_agent.trace.postgres_store import PostgresTraceStore

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    db = f"sqlite:///{tmp_path}/runs.db"
    assert main(["--store", db, "demo"]) == 0
    url = pg_server.server().schema_url(pg_server.schema_for(str(tmp_path)))
    assert main(["--store", db, "copy", "--to", url]) == 0
    capsys.readouterr()
    store = PostgresTraceStore(url)
    frames = to_frames(store)
    assert len(frames.tool_calls) > 0 and len(frames.events) > 0
    _assert_same(frames, frames_from_records(asyncio.run(store.read_records(None))))
    _assert_same(frames, to_frames(SQLiteTraceStore(tmp_path / "runs.db")))
