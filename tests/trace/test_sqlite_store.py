"""What only the SQLite store promises (the shared behaviour is the conformance suite's):
schema versions and migrations, one copy of each message, transactions that leave no half write."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from cyber_agent.errors import StoreError
from cyber_agent.trace import Message, SQLiteTraceStore, Trace
from cyber_agent.trace.sqlite_schema import MIGRATIONS, SCHEMA_VERSION, migrate
from cyber_agent.trace.budget_limits import ResourceUsage


async def _trace_with_messages(store: SQLiteTraceStore, n: int = 3) -> str:
    trace = Trace.create(task="sqlite")
    await store.create_trace(trace)
    for i in range(n):
        await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content=f"m{i}",
                                               prompt_tokens=i, cost=0.5 * i))
    return trace.trace_id


async def test_each_message_is_stored_once_and_its_event_still_carries_it(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "runs.db")
    trace_id = await _trace_with_messages(store)
    rows = store.connection().execute("SELECT data, shared FROM events WHERE type = 'message_added'").fetchall()
    assert len(rows) == 3 and all(shared == 1 and '"message":null' in data for data, shared in rows)
    events = [e for e in await store.get_events(trace_id) if e.type == "message_added"]
    assert [e.payload["message"]["content"] for e in events] == ["m0", "m1", "m2"]
    (record,) = await store.read_records([trace_id])
    added = [e for e in record.events if e["type"] == "message_added"]
    assert added[1]["payload"]["message"] is record.messages[1]  # one parsed dict, shared


async def test_a_rewritten_message_leaves_its_event_as_announced(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "runs.db")
    trace_id = await _trace_with_messages(store, 1)
    await store.update_message(f"{trace_id}-0001", description="later note")
    (event,) = [e for e in await store.get_events(trace_id) if e.type == "message_added"]
    assert event.payload["message"]["description"] == "m0"  # the description it was added with
    assert (await store.get_message(f"{trace_id}-0001")).description == "later note"  # type: ignore[union-attr]


async def test_typed_message_columns_follow_the_json(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "runs.db")
    await _trace_with_messages(store)
    rows = store.connection().execute("SELECT role, prompt_tokens, cost FROM messages ORDER BY sequence").fetchall()
    assert rows == [("user", 0, 0.0), ("user", 1, 0.5), ("user", 2, 1.0)]


async def test_an_older_database_is_upgraded_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    migrate(conn, str(path), target=1)  # a database written before the typed message columns
    trace = Trace.create(task="old")
    conn.execute("INSERT INTO traces VALUES (?, NULL, ?, ?, 0, ?, ?)",
                 (trace.trace_id, trace.trace_id, trace.created_at.isoformat(), trace.model_copy(
                     update={"total_messages": 1, "head_sequence": 1}).model_dump_json(), '{"goals": []}'))
    message = Message.create(trace_id=trace.trace_id, role="assistant", content="hi", completion_tokens=7)
    message.assign(1)
    conn.execute("INSERT INTO messages VALUES (?, 1, ?)", (trace.trace_id, message.model_dump_json()))
    conn.execute("COMMIT")
    conn.close()
    store = SQLiteTraceStore(path)
    versions = [v for (v,) in store.connection().execute("SELECT version FROM schema_versions ORDER BY version")]
    assert versions == list(range(1, SCHEMA_VERSION + 1))
    assert store.connection().execute("SELECT role, completion_tokens FROM messages").fetchall() == [("assistant", 7)]
    assert [m.content for m in await store.get_trace_messages(trace.trace_id)] == ["hi"]


def test_a_version_3_database_gets_the_columnar_indexes_and_its_reads_use_them(tmp_path: Path) -> None:
    # tests/trace/data/pre_typed/runs.db was written by the code of version 3 (make_pre_typed_stores.py).
    path = tmp_path / "runs.db"
    shutil.copy(Path(__file__).parent / "data" / "pre_typed" / "runs.db", path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT max(version) FROM schema_versions").fetchone() == (3,)
        before = conn.execute("SELECT * FROM messages ORDER BY trace_id, sequence").fetchall()
    store = SQLiteTraceStore(path)
    conn = store.connection()
    versions = [v for (v,) in conn.execute("SELECT version FROM schema_versions ORDER BY version")]
    assert versions == [1, 2, 3, 4] == list(range(1, SCHEMA_VERSION + 1))
    indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"messages_columns", "messages_refused"} <= indexes
    assert conn.execute("SELECT * FROM messages ORDER BY trace_id, sequence").fetchall() == before  # rows unchanged
    plans = {}
    for name, (select, condition, order) in (("messages", store._MESSAGE_COLUMNS_SQL), ("refused", store._REFUSED_SQL)):
        plans[name] = " ".join(str(row[-1]) for row in conn.execute(
            f"EXPLAIN QUERY PLAN {select} WHERE trace_id = ?{condition} ORDER BY {order}", ("x",)))
    assert "COVERING INDEX messages_columns" in plans["messages"], plans  # never the rows' JSON
    assert "INDEX messages_refused" in plans["refused"], plans
    read = store.read_columns(None)
    assert read.messages.num_rows == len(before) == 12
    assert read.messages["refused"].to_pylist()[5:8] == ["depth", None, "rejected"]


def test_a_newer_database_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteTraceStore(path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_versions VALUES (?, 'future')", (len(MIGRATIONS) + 1,))
    with pytest.raises(StoreError, match=f"schema version {len(MIGRATIONS) + 1}, newer.*upgrade cyber_agent"):
        SQLiteTraceStore(path)


async def test_a_failed_write_rolls_back_everything_it_touched(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "runs.db")
    trace_id = await _trace_with_messages(store, 1)
    before = store.connection().execute("SELECT count(*) FROM events").fetchone()

    def boom(current: ResourceUsage | None) -> ResourceUsage:
        raise RuntimeError("budget step failed")

    await store.replace_resource_usage(trace_id, ResourceUsage(llm_calls=1))
    with pytest.raises(RuntimeError):
        await store.update_resource_usage(trace_id, boom)
    assert (await store.get_resource_usage(trace_id)).llm_calls == 1
    assert store.connection().execute("SELECT count(*) FROM events").fetchone() == before
    assert not store.connection().in_transaction
    await store.add_message(Message.create(trace_id=trace_id, role="user", content="after"))
    assert (await store.require_trace(trace_id)).total_messages == 2


async def test_a_second_instance_sees_and_continues_what_the_first_wrote(tmp_path: Path) -> None:
    first = SQLiteTraceStore(tmp_path / "runs.db")
    trace_id = await _trace_with_messages(first, 2)
    second = SQLiteTraceStore(tmp_path / "runs.db")
    await second.add_message(Message.create(trace_id=trace_id, role="user", content="from second"))
    await first.add_message(Message.create(trace_id=trace_id, role="user", content="from first again"))
    trace = await first.require_trace(trace_id)
    assert trace.total_messages == 4
    ids = [e.event_id for e in await second.get_events(trace_id)]
    assert ids == list(range(1, len(ids) + 1))  # dense, no id used twice
    assert [m.sequence for m in await second.get_trace_messages(trace_id)] == [1, 2, 3, 4]
    assert json.loads(first.connection().execute("SELECT data FROM traces").fetchone()[0])["total_messages"] == 4


async def test_a_deferred_exchange_and_event_commit_with_the_traces_next_write(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "runs.db")
    trace_id = await _trace_with_messages(store, 1)
    assert [await store.defer_exchange(trace_id, {"n": n}) for n in range(2)] == [0, 1]
    await store.defer_event(trace_id, "progress", {"stage": "tool_call_started", "tool_call_id": "c1"})
    other = SQLiteTraceStore(tmp_path / "runs.db")  # another process's view: nothing committed yet
    assert await other.get_exchanges(trace_id) == []
    before = [e.type for e in await other.get_events(trace_id)]
    await store.add_message(Message.create(trace_id=trace_id, role="tool", tool_call_id="c1", content="3"))
    assert [r["n"] for r in await other.get_exchanges(trace_id)] == [0, 1]
    events = await other.get_events(trace_id)
    assert [e.type for e in events] == [*before, "progress", "message_added"]  # the start first, ids dense
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    assert await store.append_exchange(trace_id, {"n": 2}) == 2  # the immediate path continues the count


async def test_deferred_records_survive_a_write_that_fails_and_reads_see_them(tmp_path: Path) -> None:
    from cyber_agent.errors import InvalidUpdateError

    store = SQLiteTraceStore(tmp_path / "runs.db")
    trace_id = await _trace_with_messages(store, 1)
    await store.defer_exchange(trace_id, {"n": 0})
    await store.defer_event(trace_id, "progress", {"stage": "x"})
    with pytest.raises(InvalidUpdateError):  # raised inside the write: rolled back, deferred records kept
        await store.add_message(Message.create(trace_id=trace_id, role="user", content="m", parent_sequence=9))
    assert [r["n"] for r in await SQLiteTraceStore(tmp_path / "runs.db").get_exchanges(trace_id)] == []
    assert [r["n"] for r in await store.get_exchanges(trace_id)] == [0]  # this instance's read writes them first
    assert (await store.get_events(trace_id))[-1].payload == {"stage": "x"}
    await store.defer_exchange(trace_id, {"n": 1})
    await store.flush()
    assert [r["n"] for r in await SQLiteTraceStore(tmp_path / "runs.db").get_exchanges(trace_id)] == [0, 1]
    with pytest.raises(InvalidUpdateError, match="unknown event type"):
        await store.defer_event(trace_id, "no_such_type", {})  # type: ignore[arg-type]


async def test_a_run_step_with_an_inline_tool_is_two_transactions(tmp_path: Path) -> None:
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.llm import ScriptedModel
    from cyber_agent.tools import ToolRegistry

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async def transactions(steps: int) -> int:
        store = SQLiteTraceStore(tmp_path / f"runs-{steps}.db")
        registry = ToolRegistry()
        registry.register(add, inline=True)
        calls = [ScriptedModel.tool_call("add", {"a": i, "b": 1}, call_id=f"call_{i}") for i in range(steps)]
        runner = AgentRunner(trace_store=store, llm_call=ScriptedModel([*calls, "done"]), tool_registry=registry)
        ran: list[str] = []
        store.connection().set_trace_callback(ran.append)
        result = await runner.run_result([{"role": "user", "content": "add"}], RunConfig(max_iterations=steps + 1,
                                                                                          tools=["add"]))
        store.connection().set_trace_callback(None)
        assert result.status == "completed" and len(await store.get_exchanges(result.trace.trace_id)) == steps + 1
        started = [e for e in await store.get_events(result.trace.trace_id) if e.payload.get("stage") == "tool_call_started"]
        assert len(started) == steps  # the crash marker is still written, with its result
        return sum(1 for sql in ran if sql.startswith("BEGIN"))

    # Per step: the reply with its exchange, then the tool's start with its result.
    assert await transactions(12) - await transactions(2) == 2 * 10


async def test_a_one_reply_run_is_four_transactions(tmp_path: Path) -> None:
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.llm import ScriptedModel

    store = SQLiteTraceStore(tmp_path / "runs.db")
    ran: list[str] = []
    store.connection().set_trace_callback(ran.append)
    runner = AgentRunner(trace_store=store, llm_call=ScriptedModel(["done"]))
    result = await runner.run_result([{"role": "user", "content": "say done"}], RunConfig())
    store.connection().set_trace_callback(None)
    assert result.status == "completed" and result.answer == "done"
    # The trace; its system prompt and task together (`add_messages`); the reply with its exchange; the end.
    assert sum(1 for sql in ran if sql.startswith("BEGIN")) == 4
    assert [m.role for m in await store.get_trace_messages(result.trace.trace_id)] == ["system", "user", "assistant"]
