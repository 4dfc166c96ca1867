"""Stores' columnar reads (`cyber_agent/trace/columnar.py`): order, JSON columns, the SQLite driver's typing, and the
same columns with and without ADBC."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from cyber_agent.trace import InMemoryTraceStore, Message, SQLiteTraceStore, Trace
from cyber_agent.trace.columnar import in_order, json_values


def test_in_order_puts_each_trace_s_rows_in_the_order_asked():
    table = pa.table({"trace_id": ["a", "a", "b", "c", "c"], "n": [1, 2, 3, 4, 5]})
    assert in_order(table, ["a", "b", "c"]) is table
    assert in_order(table, ["c", "a", "b"])["n"].to_pylist() == [4, 5, 1, 2, 3]
    assert in_order(table, ["b", "x", "c", "a"])["n"].to_pylist() == [3, 4, 5, 1, 2]


def test_json_values_parse_a_column_at_once():
    column = pa.chunked_array([pa.array(['{"a": 1}', None]), pa.array(["[1, \"ü\"]"])])
    assert json_values(column) == [{"a": 1}, [1, "ü"]]
    assert json_values(column, keep_nulls=True) == [{"a": 1}, None, [1, "ü"]]
    assert json_values(pa.chunked_array([pa.array([], pa.string())])) == []


async def _late_values(store: InMemoryTraceStore, n: int) -> str:
    """A trace whose nullable columns (branch, model, refused, duration) stay NULL for `n` messages, then are set."""
    trace = Trace.create(task="late values")
    await store.create_trace(trace)
    for step in range(n):
        await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content=f"m{step}",
                                               parent_sequence=step or None))
    await store.add_message(Message.create(
        trace_id=trace.trace_id, role="tool", tool_call_id="c", tool_name="t", content={"rows": [1, 2]}, branch="b2",
        duration_ms=2.5, parent_sequence=n, metadata={"model": "m", "is_error": True, "refused": "depth"}))
    return trace.trace_id


def _columns(read: object) -> dict[str, list[object]]:
    return {name: read.messages[name].to_pylist() for name in read.messages.column_names}  # type: ignore[attr-defined]


@pytest.mark.parametrize("adbc", [True, False])
def test_sqlite_reads_columns_that_start_with_nulls(adbc: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # The ADBC driver types a column from its first batch: 3,000 NULLs before the first value would type it
    # int64 and fail on "b2" unless the whole result is one batch.
    memory = InMemoryTraceStore()
    trace_id = asyncio.run(_late_values(memory, 3000))
    store = SQLiteTraceStore(tmp_path / "late.db")
    asyncio.run(store.import_records(asyncio.run(memory.read_records(None))))
    if not adbc:
        monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", None)  # the `frames` extra missing
    read = store.read_columns(None)
    expected = memory.read_columns(None)
    assert _columns(read) == _columns(expected)
    last = {name: values[-1] for name, values in _columns(read).items()}
    assert (last["branch"], last["model"], last["refused"], last["duration_ms"]) == ("b2", "m", "depth", 2.5)
    assert read.contents == expected.contents and list(read.contents) == [(trace_id, 3001)]  # not text: parsed
    assert read.events["message_sequence"].to_pylist() == list(range(1, 3002))
    assert [r.trace_id for r in read.records] == [trace_id] and not read.records[0].messages


def test_columnar_reads_keep_the_records_order_across_many_traces(tmp_path: Path):
    memory = InMemoryTraceStore()

    async def fill() -> None:
        root = Trace.create(task="root")
        await memory.create_trace(root)
        for i in range(30):  # more children than one `IN (...)` chunk would hold in a test-sized chunk
            child = Trace.create(task=f"child {i}", parent_trace_id=root.trace_id, agent_type="explore")
            await memory.create_trace(child)
            await memory.add_message(Message.create(trace_id=child.trace_id, role="user", content=str(i)))

    asyncio.run(fill())
    store = SQLiteTraceStore(tmp_path / "many.db")
    asyncio.run(store.import_records(asyncio.run(memory.read_records(None))))
    order = [r.trace_id for r in asyncio.run(store.read_records(None))]
    for read in (store.read_columns(None), memory.read_columns(None)):
        assert [r.trace_id for r in read.records] == order
        assert list(dict.fromkeys(read.messages["trace_id"].to_pylist())) == order[1:]
    store._IDS_PER_QUERY = 7  # the default path's chunks, reordered into the records' order
    sys.modules.pop("adbc_driver_sqlite.dbapi", None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "adbc_driver_sqlite", None)
        chunked = store.read_columns(None)
    assert list(dict.fromkeys(chunked.messages["trace_id"].to_pylist())) == order[1:]
