"""The columnar path (`to_frames`: `cyber_agent/notebook/columnar.py` over each store's `read_columns`) equals the
records path (`frames_from_records` over `read_records`) on every store: memory, file, SQLite, PostgreSQL; and the
delegation-shape columns of the traces and usage frames are `delegation_shape`'s."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pandas as pd
import pytest

from nb_helpers import assert_frames_equal
from cyber_agent.analysis import delegation_shape
from cyber_agent.cli import main
from cyber_agent.notebook import to_frames
from cyber_agent.notebook.columns import SHAPE
from cyber_agent.notebook.frames import frames_from_records
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore, Message, SQLiteTraceStore, Trace
from cyber_agent.trace.columnar import ColumnarRead

KINDS = ("memory", "file", "sqlite", "postgres")


def _store(kind: str, tmp: Path, name: str):  # noqa: ANN202 - one of four store classes
    if kind == "memory":
        return InMemoryTraceStore()
    if kind == "file":
        return FileSystemTraceStore(tmp / name)
    if kind == "sqlite":
        return SQLiteTraceStore(tmp / f"{name}.db")
    from tests import pg_server

    if not (pg_server.available() or pg_server.required()):
        pytest.skip("no PostgreSQL 15 binaries here (CI installs them and requires this test)")
    from cyber_agent.trace.postgres_store import PostgresTraceStore

    return PostgresTraceStore(pg_server.server().schema_url(pg_server.schema_for(f"{tmp}/{name}")))


@pytest.fixture(scope="module")
def demo_records(tmp_path_factory: pytest.TempPathFactory) -> list:
    """A recursive and a legacy demo tree (the CLI's `demo`), as records."""
    tmp = tmp_path_factory.mktemp("demo")
    db = tmp / "runs.db"
    root = Path(__file__).resolve().parents[2]
    cwd = Path.cwd()
    try:
        import os

        os.chdir(root)
        assert main(["--store", f"sqlite:///{db}", "demo"]) == 0
        assert main(["--store", f"sqlite:///{db}", "demo", "--mode", "legacy"]) == 0
    finally:
        os.chdir(cwd)
    return asyncio.run(SQLiteTraceStore(db).read_records(None))


def _records_path(store, **options):  # noqa: ANN001, ANN202
    records = asyncio.run(store.read_records(None, messages=options.get("messages", True),
                                             events=options.get("events", True)))
    frames = frames_from_records(records, with_messages=options.get("messages", True))
    if not options.get("events", True):
        frames = type(frames)(**{**frames.__dict__, "events": frames.events.iloc[0:0]})
    return frames


@pytest.mark.parametrize("kind", KINDS)
def test_demo_trees_give_the_same_frames_both_ways_on_every_store(kind: str, tmp_path: Path, demo_records: list,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(kind, tmp_path, "demo")
    asyncio.run(store.import_records(demo_records))
    capsys.readouterr()
    read = store.read_columns(None)
    assert isinstance(read, ColumnarRead) and read.messages.num_rows > 0 and not read.damaged
    frames = to_frames(store)
    assert len(frames.tool_calls) > 0 and frames.messages.is_error.notna().any() and len(frames.events) > 0
    assert_frames_equal(frames, _records_path(store))
    root = frames.roots[0]
    assert_frames_equal(to_frames(store, root), frames_from_records(asyncio.run(store.read_records([root]))))
    for options in ({"messages": False}, {"events": False}, {"messages": False, "events": False}):
        assert_frames_equal(to_frames(store, **options), _records_path(store, **options))


async def _awkward(store) -> str:  # noqa: ANN001
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
        Message.create(trace_id=tid, role="assistant", content={"text": "again", "tool_calls": [
            {"id": "a", "name": "x", "arguments": {"n": 2}}]}),  # a reused call id: joined to no earlier result
    ):
        message.parent_sequence = (await store.require_trace(tid)).total_messages or None  # one chain
        await store.add_message(message)
    fork = Message.create(trace_id=tid, role="tool", tool_call_id="a", tool_name="x", content="late",
                          metadata={"is_error": True, "refused": "agents"}, parent_sequence=2)  # a branch
    await store.add_message(fork)
    await store.update_message(f"{tid}-0003", description="rewritten later")  # its event keeps the old text
    await store.update_trace(tid, head_sequence=3)  # messages after 3 leave the main path
    child = Trace.create(task="child", parent_trace_id=tid, agent_type="delegate")
    await store.create_trace(child)  # a child without messages
    return tid


@pytest.mark.parametrize("kind", KINDS)
def test_awkward_messages_give_the_same_frames_both_ways_on_every_store(kind: str, tmp_path: Path) -> None:
    store = _store(kind, tmp_path, "odd")
    asyncio.run(_awkward(store))
    frames = to_frames(store)
    messages = frames.messages[frames.messages.trace_id == frames.roots[0]]
    assert messages.on_main_path.tolist() == [True, True, True, False, False, False, False]
    assert frames.tool_calls.is_error.tolist() == [False, True, True]
    assert frames.tool_calls.result_sequence.tolist()[:2] == [3, 4]
    assert frames.traces.refusal.iloc[0] == "late"
    assert frames.usage[["estimated_calls", "unpriced_calls"]].values.tolist()[0] == [1, 1]
    assert_frames_equal(frames, _records_path(store))


@pytest.mark.parametrize("kind", ("memory", "sqlite"))
def test_the_shape_columns_are_delegation_shape_on_root_rows(kind: str, tmp_path: Path, demo_records: list) -> None:
    store = _store(kind, tmp_path, "shape")
    asyncio.run(store.import_records(demo_records))
    frames = to_frames(store)
    names = [column.name for column in SHAPE]
    expected = asyncio.run(delegation_shape(store, frames.roots)).set_index("trace_id")
    for frame in (frames.traces, frames.usage):
        tops = frame[frame.parent_trace_id.isna()].set_index("trace_id")[names]
        got = tops.loc[expected.index]
        for name in names:  # the frame's nullable dtypes hold delegation_shape's values
            assert got[name].tolist() == pytest.approx(expected[name].tolist(), nan_ok=True), name
        rest = frame[frame.parent_trace_id.notna()][names]
        assert len(rest) > 0 and rest.isna().all().all()
    recursive = expected[expected.nodes > 1]
    assert len(recursive) >= 1 and (recursive.max_depth >= 1).all()
    without = to_frames(store, messages=False).traces.set_index("trace_id").loc[expected.index]
    assert without.own_calls.isna().all() and (without.nodes.astype(int) == expected.nodes).all()
    assert str(frames.traces.nodes.dtype) == "Int64" and str(frames.usage.overcommitted.dtype) == "boolean"


def test_string_and_time_columns_keep_their_dtypes(tmp_path: Path) -> None:
    store = _store("sqlite", tmp_path, "dtypes")
    asyncio.run(_awkward(store))
    frames = to_frames(store)
    assert frames.messages.text.dtype == pd.StringDtype() and str(frames.messages.created_at.dtype) == "datetime64[ns, UTC]"
    assert frames.tool_calls.arguments.dtype == object and frames.events.payload.dtype == object
