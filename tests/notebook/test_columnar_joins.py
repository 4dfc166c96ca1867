"""The columnar path's vectorised pieces agree with their plain versions: the call/result search with the hash
join (`cyber_agent/notebook/columnar.py:ColumnarFrames._results_of` / `_joined`), the chunked parse of the stored
tool calls with the whole (`cyber_agent/trace/columnar.py:calls_of_column`), and `ordered`."""

from __future__ import annotations

import asyncio

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from nb_helpers import assert_frames_equal
from cyber_agent.notebook import to_frames
from cyber_agent.notebook.columnar import ColumnarFrames
from cyber_agent.notebook.frames import frames_from_records
from cyber_agent.trace import InMemoryTraceStore, Message, Trace
from cyber_agent.trace.columnar import calls_of_column, flat_calls, json_values, ordered


async def _calls(store: InMemoryTraceStore) -> None:
    for task in ("one", "two"):
        trace = Trace.create(task=task)
        await store.create_trace(trace)
        tid = trace.trace_id
        for step, (role, content, call_id) in enumerate((
                ("assistant", {"text": None, "tool_calls": [{"id": "a", "name": "x"}, {"id": "b", "name": "y"}]}, None),
                ("tool", "late a", "a"),  # answers the call above
                ("tool", "stray b", "b"),
                ("assistant", {"text": None, "tool_calls": [{"id": "a", "name": "x"}, {"id": "c", "name": "z"}]}, None),
                ("tool", "again a", "a"),  # the reused id: the first result after the second call
                ("tool", "", ""))):  # an empty id never answers
            await store.add_message(Message.create(trace_id=tid, role=role, content=content, tool_call_id=call_id,
                                                   tool_name="x" if call_id is not None else None,
                                                   parent_sequence=step or None))


def test_the_call_search_finds_what_the_hash_join_finds() -> None:
    store = InMemoryTraceStore()
    asyncio.run(_calls(store))
    read = store.read_columns(None)
    frames = ColumnarFrames(read.records, read)
    caller_rows = np.asarray(read.calls["message_row"].to_numpy(), dtype=np.int64)
    rows = np.flatnonzero(np.asarray(frames.roles.to_numpy(zero_copy_only=False) == "tool"))
    searched = frames._results_of(caller_rows, read.calls["call_id"])
    joined = frames._joined(caller_rows, read.calls["call_id"], rows[[i for i in range(len(rows))
                                                                       if read.messages["tool_call_id"][int(rows[i])].as_py()]])
    assert searched.to_pylist() == joined.to_pylist()
    sequences = read.messages["sequence"].to_pylist()
    assert [None if r is None else sequences[r] for r in searched.to_pylist()] == [2, 3, 5, None] * 2


def test_the_stored_calls_parse_the_same_in_chunks() -> None:
    texts = pa.chunked_array([pa.array(['[["a","x",{"k":1}]]', None, '[["b","y",{}],["c","z",{"n":[1]}]]']),
                              pa.array(['[["d","w",{}]]'])])
    rows = np.array([0, 2, 3])
    whole = flat_calls(rows, json_values(texts))
    for chunk in (1, 2, 10):
        table, arguments = calls_of_column(rows, texts, chunk=chunk)
        assert table.equals(whole[0]) and arguments == whole[1] == [{"k": 1}, {}, {"n": [1]}, {}]
    assert whole[0]["message_row"].to_pylist() == [0, 2, 2, 3] and whole[0]["call_index"].to_pylist() == [0, 0, 1, 0]


def test_ordered_keeps_an_ordered_table_and_sorts_any_other() -> None:
    table = pa.table({"trace_id": ["b", "b", "a"], "n": [1, 2, 1]})
    assert ordered(table, "n") is table
    shuffled = pa.table({"trace_id": ["b", "a", "b"], "n": [2, 1, 1]})
    assert ordered(shuffled, "n").to_pydict() == {"trace_id": ["a", "b", "b"], "n": [1, 1, 2]}


def test_a_builder_that_batches_its_rows_gives_the_same_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    from cyber_agent.trace import columnar

    store = InMemoryTraceStore()
    asyncio.run(_calls(store))
    expected = to_frames(store)
    monkeypatch.setattr(columnar, "_BATCH_ROWS", 4)  # one Arrow batch per trace: the second's call rows are offset
    batched = to_frames(store)
    assert_frames_equal(batched, expected)
    assert_frames_equal(batched, frames_from_records(asyncio.run(store.read_records(None)), origin="memory:"))
    assert batched.tool_calls.result_sequence.fillna(-1).tolist() == [2, 3, 5, -1] * 2


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_refused_result_that_is_not_text_is_read_on_every_sql_store(kind: str, tmp_path) -> None:  # noqa: ANN001
    from tests import pg_server

    from cyber_agent.trace import SQLiteTraceStore

    if kind == "sqlite":
        store = SQLiteTraceStore(tmp_path / "runs.db")
    else:
        if not (pg_server.available() or pg_server.required()):
            pytest.skip("no PostgreSQL 15 binaries here (CI installs them and requires this test)")
        from cyber_agent.trace.postgres_store import PostgresTraceStore

        store = PostgresTraceStore(pg_server.server().schema_url(pg_server.schema_for(str(tmp_path))))

    async def fill() -> None:
        trace = Trace.create(task="refused")
        await store.create_trace(trace)
        await store.add_message(Message.create(trace_id=trace.trace_id, role="tool", tool_call_id="c", tool_name="t",
                                               content={"rows": [1, "ü"]}, metadata={"is_error": True, "refused": "depth"}))

    asyncio.run(fill())
    frames = to_frames(store)
    records = asyncio.run(store.read_records(None))
    content = records[0].messages[0]["content"]
    assert isinstance(content, dict) and frames.traces.refusal.tolist() == [str(content)]  # parsed, not its JSON text
    assert_frames_equal(frames, frames_from_records(records))


def test_the_file_store_s_streamed_read_skips_a_damaged_trace_and_reads_foreign_names(tmp_path) -> None:  # noqa: ANN001
    import warnings

    from cyber_agent.trace import FileSystemTraceStore
    from cyber_agent.trace.store_listing import DamagedEntryWarning

    store = FileSystemTraceStore(tmp_path / "fs")
    asyncio.run(_calls(store))
    first, second = (r.trace_id for r in asyncio.run(store.read_records(None)))
    expected = to_frames(FileSystemTraceStore(tmp_path / "fs"))
    # Named out of sequence order (a copy by hand): read the usual way, the records path's frames.
    messages = tmp_path / "fs" / first / "messages"
    (messages / f"{first}-0003.json").rename(messages / "zz-copy.json")
    renamed = FileSystemTraceStore(tmp_path / "fs")
    frames = to_frames(renamed)
    assert len(frames.messages) == 12
    assert_frames_equal(frames, frames_from_records(asyncio.run(renamed.read_records(None)), origin=f"file:{tmp_path}"))
    (messages / "zz-copy.json").rename(messages / f"{first}-0003.json")
    # A damaged message file: its trace is left out of every frame and named, the other's rows are whole.
    (tmp_path / "fs" / second / "messages" / f"{second}-0004.json").write_text("{broken")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frames = to_frames(FileSystemTraceStore(tmp_path / "fs"))
    assert any(isinstance(w.message, DamagedEntryWarning) and second in str(w.message) for w in caught)
    assert set(frames.messages.trace_id) == set(frames.tool_calls.trace_id) == set(frames.events.trace_id) == {first}
    kept = expected.tree(first)
    for name in ("messages", "tool_calls", "events"):
        pd.testing.assert_frame_equal(getattr(frames, name), getattr(kept, name), obj=name)


def test_a_sql_store_s_read_of_some_trees_is_their_part_of_the_whole(tmp_path) -> None:  # noqa: ANN001
    from cyber_agent.trace import SQLiteTraceStore

    store = SQLiteTraceStore(tmp_path / "runs.db")
    asyncio.run(_calls(store))
    whole = to_frames(store)
    for root in whole.roots:  # goal trees and side records read by id (`_rows_of`), not for every trace
        part, expected = to_frames(store, root), whole.tree(root)
        for name in ("messages", "tool_calls", "events", "goals", "usage"):
            pd.testing.assert_frame_equal(getattr(part, name), getattr(expected, name), obj=name)
        assert part.traces.drop(columns="position").equals(expected.traces.drop(columns="position"))  # its own order
