"""`TraceStore.read_records` (the bulk read the notebook uses), for every store in conftest.STORE_FACTORIES.

A record holds what the model API returns, in JSON mode; each message is parsed once (its
`message_added` event shares the dict); a fresh reader sees what the store's own reader sees.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from store_helpers import add_chain

from cyber_agent.errors import InvalidUpdateError, TraceNotFoundError
from cyber_agent.trace import FileSystemTraceStore, Trace

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def _tree(store) -> tuple[str, list[str]]:
    """A root with two children (created out of order) and a grandchild; returns (root, ids in tree order)."""
    root = Trace.create(task="root", created_at=T0)
    await store.create_trace(root)
    late = Trace.create(task="late child", parent_trace_id=root.trace_id, created_at=T0 + timedelta(seconds=2))
    early = Trace.create(task="early child", parent_trace_id=root.trace_id, created_at=T0 + timedelta(seconds=1))
    grandchild = Trace.create(task="grandchild", parent_trace_id=late.trace_id, created_at=T0 + timedelta(seconds=3))
    for trace in (late, early, grandchild):
        await store.create_trace(trace)
    other = Trace.create(task="another tree", created_at=T0 + timedelta(seconds=4))
    await store.create_trace(other)
    return root.trace_id, [root.trace_id, early.trace_id, late.trace_id, grandchild.trace_id]


async def test_records_hold_what_the_model_api_returns(store, open_store, trace_id):
    await add_chain(store, trace_id, 5)
    await store.replace_resource_usage(trace_id, {"spent": 1})
    for reader in (store, open_store()):
        (record,) = await reader.read_records([trace_id])
        assert record.trace_id == trace_id
        assert record.trace == (await reader.get_trace(trace_id)).model_dump(mode="json")
        assert record.goal_tree == (await reader.get_goal_tree(trace_id)).model_dump(mode="json")
        assert record.messages == [m.model_dump(mode="json") for m in await reader.get_trace_messages(trace_id)]
        assert record.events == [e.model_dump(mode="json") for e in await reader.get_events(trace_id)]
        assert record.resource_usage == {"spent": 1}
        assert record.tool_approvals is None


async def test_trees_come_parents_first_and_siblings_by_creation_time(store):
    root, order = await _tree(store)
    assert [r.trace_id for r in await store.read_records([root])] == order
    assert [r.trace_id for r in await store.read_records([order[2]])] == order[2:]  # a subtree
    everything = [r.trace_id for r in await store.read_records()]
    assert everything[:4] == order and len(everything) == 5


async def test_without_messages_or_events_and_unknown_roots(store, trace_id):
    await add_chain(store, trace_id, 3)
    (record,) = await store.read_records([trace_id], messages=False, events=False)
    assert record.messages == [] and record.events == [] and record.trace["total_messages"] == 3
    (record,) = await store.read_records([trace_id], messages=False)
    assert [e["type"] for e in record.events].count("message_added") == 3
    assert "content" in record.events[-1]["payload"]["message"]
    with pytest.raises(TraceNotFoundError):
        await store.read_records(["no-such-trace"])
    with pytest.raises(InvalidUpdateError, match="sequence of trace ids"):
        await store.read_records(trace_id)


async def test_each_message_is_parsed_once_and_an_updated_message_keeps_its_event(store, trace_id):
    await add_chain(store, trace_id, 3)
    await store.update_message(f"{trace_id}-0002", content="rewritten")
    (record,) = await store.read_records([trace_id])
    added = {e["payload"]["message"]["sequence"]: e["payload"]["message"] for e in record.events
             if e["type"] == "message_added"}
    assert added[1] is record.messages[0] and added[3] is record.messages[2]
    assert record.messages[1]["content"] == "rewritten"
    assert added[2] is not record.messages[1] and added[2]["content"] != "rewritten"  # what was announced


async def test_file_store_records_follow_its_own_crash_rules(tmp_path):
    """Temporary files are skipped, a torn last event line is ignored, messages above the checkpoint count."""
    writer = FileSystemTraceStore(tmp_path, checkpoint_every=1000, checkpoint_interval=60.0)
    trace = Trace.create(task="crashy")
    await writer.create_trace(trace)
    await add_chain(writer, trace.trace_id, 4)  # meta.json still says 0 messages
    directory = writer.trace_dir(trace.trace_id)
    (directory / "messages" / f".{trace.trace_id}-0005.json.1-2.tmp").write_text("{half")
    with open(directory / "events.jsonl", "ab") as handle:
        handle.write(b'{"event_id": 99, "torn')
    (record,) = await FileSystemTraceStore(tmp_path).read_records()
    assert record.trace["total_messages"] == 4 and record.trace["head_sequence"] == 4
    assert [m["sequence"] for m in record.messages] == [1, 2, 3, 4]
    assert record.events[-1]["event_id"] == len(record.events)
    assert os.path.exists(directory / "messages" / f".{trace.trace_id}-0005.json.1-2.tmp")  # a reader repairs nothing
