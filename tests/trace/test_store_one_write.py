"""The writes that stand for several (`create_trace(goal_tree=)`, `end_trace`, `defer_event`) leave the records
the separate calls leave, on every store."""

from __future__ import annotations

from typing import Any

import pytest

from cyber_agent.errors import InvalidUpdateError
from cyber_agent.trace import GoalTree, Message, Trace
from cyber_agent.trace.store_base import BaseTraceStore


def _tree(task: str) -> GoalTree:
    tree = GoalTree(mission=task)
    goal = tree.add("the root goal")
    goal.status = "in_progress"
    tree.current_id = goal.id
    return tree


_TIMES = ("created_at", "completed_at", "updated_at")


def _goals(goals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in goal.items() if k not in _TIMES} for goal in goals]


def _tree_dump(tree: GoalTree) -> dict[str, Any]:
    data = tree.model_dump(mode="json")
    return {**data, "goals": _goals(data["goals"])}


def _masked(events: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """Event types and payloads, ids and times left out (two traces written a moment apart)."""
    out = []
    for event in events:
        payload = dict(event.payload)
        if "trace_id" in payload:
            payload["trace_id"] = "<trace>"
        if isinstance(payload.get("message"), dict):
            payload["message"] = {k: v for k, v in payload["message"].items() if k not in ("trace_id", "message_id", *_TIMES)}
        if isinstance(payload.get("affected_goals"), list) and payload["affected_goals"] and "id" in payload["affected_goals"][0]:
            payload["affected_goals"] = _goals(payload["affected_goals"])
        out.append((event.type, payload))
    return out


async def _two_traces(store: BaseTraceStore) -> tuple[str, str]:
    """One trace created with its tree in one write, one created and then given the same tree."""
    one, two = Trace.create(task="t"), Trace.create(task="t")
    await store.create_trace(one, goal_tree=_tree("t"))
    await store.create_trace(two)
    await store.update_goal_tree(two.trace_id, _tree("t"))
    return one.trace_id, two.trace_id


async def test_create_with_a_goal_tree_stores_what_create_then_update_goal_tree_stores(store):
    one, two = await _two_traces(store)
    tree_one, tree_two = await store.get_goal_tree(one), await store.get_goal_tree(two)
    assert tree_one is not None and _tree_dump(tree_one) == _tree_dump(tree_two)
    assert tree_one.current_id == "1" and tree_one.goals[0].status == "in_progress"
    assert await store.get_events(one) == [] == await store.get_events(two)


async def test_a_tree_given_at_create_is_a_copy_with_the_stores_stats(store):
    tree = _tree("t")
    tree.goals[0].self_stats.message_count = 99  # stats are the store's: they start at zero
    trace = Trace.create(task="t")
    await store.create_trace(trace, goal_tree=tree)
    tree.goals[0].description = "changed by the caller afterwards"
    stored = await store.get_goal_tree(trace.trace_id)
    assert stored.goals[0].description == "the root goal" and stored.goals[0].self_stats.message_count == 0


async def test_end_trace_leaves_the_records_of_its_three_calls(store):
    one, two = await _two_traces(store)
    for trace_id in (one, two):
        await store.add_message(Message.create(trace_id=trace_id, role="user", content="task", goal_id="1"))
    updates = {"status": "completed", "head_sequence": 1, "current_goal_id": "1", "result_summary": "done"}
    ended = await store.end_trace(one, updates, goal=("1", {"status": "completed", "summary": "done"}))
    await store.update_goal(two, "1", status="completed", summary="done")
    separate = await store.update_trace(two, **updates)
    await store.append_event(two, "trace_completed", {"trace_id": two, "total_messages": separate.total_messages})
    assert _masked(await store.get_events(one)) == _masked(await store.get_events(two))
    assert [e.type for e in await store.get_events(one)][-3:] == ["goal_updated", "trace_status_changed", "trace_completed"]
    keep = {"trace_id", "created_at", "updated_at", "completed_at"}
    assert ended.model_dump(exclude=keep) == separate.model_dump(exclude=keep)
    assert (await store.get_trace(one)).model_dump(exclude=keep) == (await store.get_trace(two)).model_dump(exclude=keep)
    assert _tree_dump(await store.get_goal_tree(one)) == _tree_dump(await store.get_goal_tree(two))


async def test_end_trace_without_completion_writes_no_trace_completed(store):
    trace = Trace.create(task="t")
    await store.create_trace(trace, goal_tree=_tree("t"))
    stopped = await store.end_trace(trace.trace_id, {"status": "stopped", "error_message": "stop requested"})
    assert stopped.status == "stopped" and stopped.error_message == "stop requested"
    assert [e.type for e in await store.get_events(trace.trace_id)] == ["trace_status_changed"]


async def test_a_deferred_event_is_written_first_by_the_next_write_with_the_next_id(store, open_store):
    trace = Trace.create(task="t")
    await store.create_trace(trace, goal_tree=_tree("t"))
    await store.defer_event(trace.trace_id, "progress", {"stage": "tool_call_started", "tool": "add"})
    await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content="task"))
    events = await open_store().get_events(trace.trace_id)  # a fresh reader: what was written
    assert [(e.event_id, e.type) for e in events] == [(1, "progress"), (2, "message_added")]
    assert events[0].payload == {"stage": "tool_call_started", "tool": "add"}


async def test_this_instance_reads_its_deferred_events(store):
    trace = Trace.create(task="t")
    await store.create_trace(trace)
    await store.defer_event(trace.trace_id, "progress", {"stage": "a"})
    assert [e.payload for e in await store.get_events(trace.trace_id)] == [{"stage": "a"}]
    records = await store.read_records([trace.trace_id])
    assert [e["type"] for e in records[0].events] == ["progress"]


def _message_dumps(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json", exclude={"trace_id", "message_id", *_TIMES}) for m in messages]


async def test_add_messages_leaves_the_records_of_one_add_message_each(store, open_store):
    one, two = await _two_traces(store)
    batch = [Message.create(trace_id=one, role="system", content="rules", goal_id="1"),
             Message.create(trace_id=one, role="user", content="task", goal_id="1", parent_sequence=1, prompt_tokens=7)]
    ids = await store.add_messages(batch)
    assert ids == [m.message_id for m in batch] and [m.sequence for m in batch] == [1, 2]
    await store.add_message(Message.create(trace_id=two, role="system", content="rules", goal_id="1"))
    await store.add_message(Message.create(trace_id=two, role="user", content="task", goal_id="1", parent_sequence=1,
                                           prompt_tokens=7))
    reader = open_store()  # a fresh reader: what was written
    assert _masked(await reader.get_events(one)) == _masked(await reader.get_events(two))
    assert _message_dumps(await reader.get_trace_messages(one)) == _message_dumps(await reader.get_trace_messages(two))
    keep = {"trace_id", "created_at", "updated_at", "completed_at"}
    assert (await reader.get_trace(one)).model_dump(exclude=keep) == (await reader.get_trace(two)).model_dump(exclude=keep)
    assert _tree_dump(await reader.get_goal_tree(one)) == _tree_dump(await reader.get_goal_tree(two))
    assert await store.add_messages([]) == []


async def test_add_messages_refuses_messages_of_two_traces_and_writes_none(store):
    one, two = await _two_traces(store)
    with pytest.raises(InvalidUpdateError, match="one trace"):
        await store.add_messages([Message.create(trace_id=one, role="user", content="a"),
                                  Message.create(trace_id=two, role="user", content="b")])
    assert await store.get_trace_messages(one) == [] == await store.get_trace_messages(two)
