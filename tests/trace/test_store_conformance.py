"""The TraceStore conformance suite (SPEC T3-T6): every store in conftest.STORE_FACTORIES passes it.

`open_store()` reopens the store on the same data, so each persistence claim is also checked
through a fresh reader.
"""

from __future__ import annotations

import asyncio
import re
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest
from store_helpers import add_chain, assistant, user

from cyber_agent.errors import (
    ConflictError,
    CorruptRecordError,
    GoalError,
    GoalNotFoundError,
    InvalidUpdateError,
    MessageNotFoundError,
    TraceNotFoundError,
)
from cyber_agent.trace import Goal, GoalTree, Trace, TraceStore
from cyber_agent.trace.approval_records import ApprovalBatch, PendingCall
from cyber_agent.trace.budget_limits import ResourceUsage
from cyber_agent.trace.side_records import StopRequest, ToolApprovals
from cyber_agent.trace.trace_filter import TraceFilter

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_every_store_implements_the_protocol(store):
    assert isinstance(store, TraceStore)


# ---- traces -----------------------------------------------------------------------------
async def test_create_and_get_round_trip(store, open_store):
    trace = Trace.create(task="explore", agent_type="main", uid="u1", context={"agent_mode": "legacy", "n": [1, 2]})
    assert await store.create_trace(trace) == trace.trace_id
    for reader in (store, open_store()):
        loaded = await reader.get_trace(trace.trace_id)
        assert loaded is not None and loaded.model_dump() == trace.model_dump()
    assert await store.get_trace("0" * 8 + "-0000-4000-8000-" + "0" * 12) is None


async def test_create_refuses_an_existing_id_and_running_counters(store):
    trace = Trace.create(task="x")
    await store.create_trace(trace)
    with pytest.raises(ConflictError):
        await store.create_trace(trace)
    with pytest.raises(InvalidUpdateError, match="total_messages"):
        await store.create_trace(Trace.create(task="y", total_messages=3))


async def test_stored_trace_is_independent_of_caller_objects(store):
    trace = Trace.create(task="x", context={"nested": {"a": 1}})
    await store.create_trace(trace)
    trace.context["nested"]["a"] = 2
    loaded = await store.get_trace(trace.trace_id)
    loaded.context["nested"]["a"] = 3
    assert (await store.get_trace(trace.trace_id)).context == {"nested": {"a": 1}}


async def test_update_trace_changes_fields_and_reports_status_changes(store, open_store, trace_id):
    updated = await store.update_trace(trace_id, status="completed", result_summary="done", context={"k": "v"})
    assert (updated.status, updated.result_summary, updated.context) == ("completed", "done", {"k": "v"})
    assert updated.completed_at is not None
    assert (await open_store().get_trace(trace_id)).model_dump() == updated.model_dump()
    await store.update_trace(trace_id, result_summary="again")  # no status change: no event
    resumed = await store.update_trace(trace_id, status="running")
    assert resumed.completed_at is None
    changes = [e.payload for e in await store.get_events(trace_id) if e.type == "trace_status_changed"]
    assert changes == [{"trace_id": trace_id, "status": "completed", "previous": "running"},
                       {"trace_id": trace_id, "status": "running", "previous": "completed"}]


@pytest.mark.parametrize("updates", [
    {"nonsense": 1}, {"total_messages": 9}, {"total_cost": 1.0}, {"status": "bogus"},
    {"head_sequence": 1}, {"head_sequence": -1}, {"context": {"x": object()}},
])
async def test_update_trace_refuses_bad_updates_and_changes_nothing(store, trace_id, updates):
    before = await store.get_trace(trace_id)
    with pytest.raises(InvalidUpdateError):
        await store.update_trace(trace_id, **updates)
    assert (await store.get_trace(trace_id)).model_dump() == before.model_dump()


async def test_mutations_of_an_unknown_trace_raise_trace_not_found(store):
    missing = "11111111-2222-4333-8444-555555555555"
    calls = [
        store.update_trace(missing, status="failed"), store.update_goal_tree(missing, GoalTree()),
        store.add_goal(missing, Goal(id="1", description="g")), store.update_goal(missing, "1", status="completed"),
        store.add_message(user(missing)), store.append_event(missing, "progress", {}),
        store.replace_resource_usage(missing, {}), store.replace_tool_approvals(missing, {}),
        store.get_trace_messages(missing), store.get_main_path_messages(missing, 1),
        store.get_messages_by_goal(missing, "1"), store.get_events(missing),
    ]
    for call in calls:
        with pytest.raises(TraceNotFoundError):
            await call
    assert await store.get_goal_tree(missing) is None
    assert await store.get_resource_usage(missing) is None
    assert await store.get_tool_approvals(missing) is None
    assert await store.get_message(f"{missing}-0001") is None


async def _traces(store, specs):
    """Create traces one minute apart, each newer than every trace already in the store."""
    ids = []
    start = len(await store.list_traces(limit=None))
    for minute, fields in enumerate(specs, start=start):
        trace = Trace.create(created_at=T0 + timedelta(minutes=minute), **fields)
        await store.create_trace(trace)
        ids.append(trace.trace_id)
    return ids


async def test_list_traces_filters_before_limit_newest_first(store, open_store):
    parent = (await _traces(store, [{"task": "root"}]))[0]
    agents = await _traces(store, [{"parent_trace_id": parent, "context": {"created_by_tool": "agent"}}] * 3)
    validators = await _traces(store, [{"parent_trace_id": parent, "context": {"created_by_tool": "validator"}}] * 4)
    for reader in (store, open_store()):
        got = await reader.list_traces(parent_trace_id=parent, created_by_tool="agent", limit=2)
        assert [t.trace_id for t in got] == [agents[2], agents[1]]
        children = await reader.list_traces(parent_trace_id=parent, limit=None)
        assert [t.trace_id for t in children] == (agents + validators)[::-1]
        assert [t.trace_id for t in await reader.list_traces(limit=1)] == [validators[-1]]
        assert await reader.list_traces(limit=0) == []
    with pytest.raises(InvalidUpdateError):
        await store.list_traces(limit=-1)


async def test_list_traces_filters_mode_status_agent_type_and_uid(store):
    ids = await _traces(store, [
        {"mode": "call", "uid": "a"}, {"mode": "agent", "agent_type": "explore", "uid": "b"},
        {"mode": "agent", "agent_type": "explore", "uid": "a"}, {"mode": "agent", "uid": "a"},
    ])
    await store.update_trace(ids[1], status="completed")
    for newer in range(5):  # newer non-matching traces must not crowd the match out of the limit
        await _traces(store, [{"mode": "agent", "task": f"noise {newer}"}])

    async def listed(**filters):
        return [t.trace_id for t in await store.list_traces(limit=1, **filters)]
    assert await listed(mode="call") == [ids[0]]
    assert await listed(status="completed") == [ids[1]]
    assert await listed(agent_type="explore", uid="b") == [ids[1]]
    assert await listed(mode="agent", uid="a") == [ids[3]]


async def test_a_typed_filter_lists_what_its_keywords_list(store, open_store):
    """`TraceFilter` is the one declaration: the typed form, the keyword form and a mix agree."""
    parent = (await _traces(store, [{"task": "root", "model": "demo", "context": {"agent_mode": "recursive"}}]))[0]
    child = (await _traces(store, [{"parent_trace_id": parent, "model": "demo", "context": {"created_by_tool": "agent"}}]))[0]
    other = (await _traces(store, [{"task": "other", "model": "openai:gpt-4o"}]))[0]
    for reader in (store, open_store()):
        typed = await reader.list_traces(TraceFilter(parent_trace_id=parent, created_by_tool="agent", limit=2))
        keywords = await reader.list_traces(parent_trace_id=parent, created_by_tool="agent", limit=2)
        assert [t.trace_id for t in typed] == [t.trace_id for t in keywords] == [child]
        assert [t.trace_id for t in await reader.list_traces(TraceFilter(roots_only=True), model="demo")] == [parent]
        assert [t.trace_id for t in await reader.list_traces(roots_only=True, limit=None)][:2] == [other, parent]
        assert [t.trace_id for t in await reader.list_traces(agent_mode="recursive", limit=None)] == [parent]
        since = (await reader.get_trace(child)).created_at
        assert [t.trace_id for t in await reader.list_traces(since=since.replace(tzinfo=None), limit=None)] == [other, child]
        report = await reader.list_traces_report(TraceFilter(model="openai:gpt-4o"))
        assert [t.trace_id for t in report.traces] == [other]


@pytest.mark.parametrize(("filters", "named"), [
    ({"status": "done"}, "status='done'"), ({"limit": -1}, "limit=-1"), ({"since": "yesterday"}, "since='yesterday'"),
    ({"agent_mode": "deep"}, "agent_mode='deep'"), ({"parent": "x"}, "unknown trace filter 'parent'"),
])
async def test_a_bad_filter_value_names_itself(store, filters, named):
    with pytest.raises(InvalidUpdateError, match=re.escape(named)):
        await store.list_traces(**filters)


# ---- side records -----------------------------------------------------------------------
async def test_side_records_replace_whole_and_return_typed_copies(store, open_store, trace_id):
    assert await store.get_resource_usage(trace_id) is None and await store.get_tool_approvals(trace_id) is None
    await store.replace_resource_usage(trace_id, ResourceUsage(llm_calls=3, last_refusal="tokens"))
    await store.replace_resource_usage(trace_id, ResourceUsage(llm_calls=4))  # whole: last_refusal is gone
    got = await store.get_resource_usage(trace_id)
    assert isinstance(got, ResourceUsage) and (got.llm_calls, got.last_refusal) == (4, None)
    got.llm_calls = 99
    assert (await open_store().get_resource_usage(trace_id)).llm_calls == 4
    batch = ApprovalBatch(batch_id="b1", trace_id=trace_id, assistant_message_id=f"{trace_id}-0001",
                          calls=[PendingCall(call_id="c1", name="bash_command", arguments={"command": "ls"})])
    await store.replace_tool_approvals(trace_id, ToolApprovals(batches=[batch, batch.model_copy(update={"batch_id": "b2"})]))
    await store.replace_tool_approvals(trace_id, {"batches": [batch.model_dump(mode="json")]})  # a mapping, as before
    approvals = await store.get_tool_approvals(trace_id)
    assert isinstance(approvals, ToolApprovals) and approvals.batches == [batch]
    approvals.batches.clear()
    assert (await open_store().get_tool_approvals(trace_id)).batches == [batch]
    for replace in (store.replace_resource_usage, store.replace_tool_approvals):
        with pytest.raises(InvalidUpdateError):
            await replace(trace_id, {"bad": object()})
    assert (await store.get_resource_usage(trace_id)).llm_calls == 4


async def test_a_usage_step_gets_and_returns_the_typed_usage(store, open_store, trace_id):
    assert await store.update_resource_usage(trace_id, lambda current: None) is None  # never written: nothing written
    await store.replace_resource_usage(trace_id, ResourceUsage(llm_calls=1))
    seen = []

    def step(current):
        seen.append(current)
        return current.model_copy(update={"llm_calls": current.llm_calls + 1})
    after = await store.update_resource_usage(trace_id, step)
    assert isinstance(seen[0], ResourceUsage) and seen[0].llm_calls == 1 and after.llm_calls == 2
    assert (await open_store().get_resource_usage(trace_id)).llm_calls == 2
    with pytest.raises(InvalidUpdateError, match="llm_calls"):
        await store.update_resource_usage(trace_id, lambda current: {**current.model_dump(mode="json"), "llm_calls": -1})
    assert (await open_store().get_resource_usage(trace_id)).llm_calls == 2  # a bad step writes nothing


async def test_an_incomplete_usage_record_fails_closed_for_every_reader(store, trace_id):
    await store.replace_resource_usage(trace_id, {"llm_calls": 1})  # planted: a record cut short
    with pytest.raises(CorruptRecordError, match="usage record lacks agents"):
        await store.get_resource_usage(trace_id)
    with pytest.raises(CorruptRecordError, match="resource_usage.json"):
        await store.update_resource_usage(trace_id, lambda current: current)


async def test_stop_requests_read_typed(store, open_store, trace_id):
    assert await store.get_stop_requests([trace_id]) == {}
    await store.request_stop(trace_id, "user pressed stop", subtree=False)
    request = (await open_store().get_stop_requests([trace_id]))[trace_id]
    assert isinstance(request, StopRequest) and (request.reason, request.subtree) == ("user pressed stop", False)
    assert request.requested_at is not None
    await store.clear_stop(trace_id)
    assert await open_store().get_stop_requests([trace_id]) == {}


# ---- goals ------------------------------------------------------------------------------
async def test_new_trace_has_an_empty_goal_tree_with_its_task(store):
    trace = Trace.create(task="the mission")
    await store.create_trace(trace)
    tree = await store.get_goal_tree(trace.trace_id)
    assert (tree.goals, tree.mission) == ([], "the mission")


async def test_add_goal_persists_resets_stats_and_emits_goal_added(store, open_store, trace_id):
    goal = Goal(id="5", description="new", parent_id="4", type="agent_call")
    goal.self_stats.message_count = 7
    await store.add_goal(trace_id, goal)
    stored = (await open_store().get_goal_tree(trace_id)).find("5")
    assert (stored.parent_id, stored.type, stored.self_stats.message_count) == ("4", "agent_call", 0)
    event = (await store.get_events(trace_id))[-1]
    assert event.type == "goal_added" and event.payload["goal"]["id"] == "5"
    assert event.payload["goal"]["parent_id"] == "4" and "cumulative_stats" in event.payload["goal"]
    with pytest.raises(GoalError):
        await store.add_goal(trace_id, Goal(id="5", description="duplicate"))
    with pytest.raises(GoalError):
        await store.add_goal(trace_id, Goal(id="6", description="orphan", parent_id="99"))


async def test_update_goal_cascades_completion_in_legacy_trees(store, open_store, trace_id):
    await store.add_goal(trace_id, Goal(id="5", description="sibling of 3", parent_id="2"))
    assert [g.id for g in await store.update_goal(trace_id, "3", status="completed")] == ["3"]
    changed = await store.update_goal(trace_id, "5", status="completed", summary="ok")
    assert [(g.id, g.status) for g in changed] == [("5", "completed"), ("2", "completed"), ("1", "completed")]
    event = (await store.get_events(trace_id))[-1]
    assert event.type == "goal_updated" and event.payload["goal_id"] == "5"
    assert event.payload["patch"] == {"status": "completed", "summary": "ok"}
    assert [g["id"] for g in event.payload["affected_goals"]] == ["5", "2", "1"]
    tree = await open_store().get_goal_tree(trace_id)
    assert [tree.find(i).status for i in "12345"] == ["completed", "completed", "completed", "pending", "completed"]


async def test_update_goal_does_not_cascade_when_the_tree_says_so(store, trace_id):
    tree = await store.get_goal_tree(trace_id)
    tree.cascade_completion = False
    await store.update_goal_tree(trace_id, tree)
    changed = await store.update_goal(trace_id, "3", status="completed")
    assert [g.id for g in changed] == ["3"]
    assert [g["id"] for g in (await store.get_events(trace_id))[-1].payload["affected_goals"]] == ["3"]
    assert (await store.get_goal_tree(trace_id)).find("2").status == "pending"


async def test_update_goal_refuses_bad_requests(store, trace_id):
    with pytest.raises(GoalNotFoundError):
        await store.update_goal(trace_id, "99", status="completed")
    for updates in ({"self_stats": {}}, {"id": "9"}, {"status": "bogus"}):
        with pytest.raises(InvalidUpdateError):
            await store.update_goal(trace_id, "3", **updates)
    for parent in ("3", "99"):  # under itself (a loop) / under nothing
        with pytest.raises(GoalError):
            await store.update_goal(trace_id, "1", parent_id=parent)


async def test_moving_a_goal_moves_its_stats(store, trace_id):
    await store.add_message(assistant(trace_id, parent=None, goal="3", tokens=(10, 5)))
    await store.update_goal(trace_id, "3", parent_id="4")
    tree = await store.get_goal_tree(trace_id)
    assert [tree.find(i).cumulative_stats.total_tokens for i in "1234"] == [0, 0, 15, 15]


async def test_update_goal_tree_replaces_structure_but_keeps_store_stats(store, open_store, trace_id):
    await store.add_message(assistant(trace_id, parent=None, goal="3", tokens=(10, 5)))
    tree = await store.get_goal_tree(trace_id)
    tree.find("3").self_stats.total_tokens = 999_999  # a caller cannot forge stats
    tree.find("3").parent_id = "4"
    tree.add("added later", parent_id="1")
    await store.update_goal_tree(trace_id, tree)
    stored = await open_store().get_goal_tree(trace_id)
    assert stored.find("3").self_stats.total_tokens == 15
    assert [stored.find(i).cumulative_stats.total_tokens for i in "12345"] == [0, 0, 15, 15, 0]
    duplicated = stored.model_copy(deep=True)
    duplicated.goals.append(duplicated.goals[0])
    looped = stored.model_copy(deep=True)
    looped.find("1").parent_id = "2"
    for bad in (duplicated, looped):
        with pytest.raises(GoalError):
            await store.update_goal_tree(trace_id, bad)


# ---- messages ---------------------------------------------------------------------------
async def test_add_message_assigns_dense_sequences_and_updates_totals(store, open_store, trace_id):
    first = user(trace_id, goal="3")
    assert await store.add_message(first) == f"{trace_id}-0001" == first.message_id
    second = assistant(trace_id, parent=1, tokens=(100, 20), cost=0.25)
    await store.add_message(second)
    assert second.sequence == 2
    for reader in (store, open_store()):
        trace = await reader.get_trace(trace_id)
        assert (trace.total_messages, trace.head_sequence) == (2, 2)
        assert (trace.total_prompt_tokens, trace.total_completion_tokens, trace.total_tokens) == (100, 20, 120)
        assert trace.total_cost == pytest.approx(0.25)
        got = await reader.get_message(second.message_id)
        assert got.model_dump() == second.model_dump()
    assert await store.get_message(f"{trace_id}-0003") is None


@pytest.mark.parametrize("parent", [0, -1, 2, "1"])
async def test_add_message_refuses_a_missing_parent_and_persists_nothing(store, trace_id, parent):
    await store.add_message(user(trace_id))
    message = user(trace_id)
    message.parent_sequence = parent  # bypasses validation, as a careless caller could
    events = len(await store.get_events(trace_id))
    with pytest.raises(InvalidUpdateError):
        await store.add_message(message)
    assert (await store.get_trace(trace_id)).total_messages == 1
    assert len(await store.get_events(trace_id)) == events
    assert (message.sequence, message.message_id) == (0, "")


async def test_add_message_refuses_unserializable_metadata_without_using_a_sequence(store, trace_id):
    with pytest.raises(InvalidUpdateError):
        await store.add_message(user(trace_id, metadata={"handle": object()}))
    await store.add_message(ok := user(trace_id))
    assert ok.sequence == 1


async def test_message_stats_update_goal_and_ancestors_and_the_event_lists_them(store, open_store, trace_id):
    await store.add_message(assistant(trace_id, parent=None, goal="3", tokens=(100, 20), cost=0.5))
    await store.add_message(assistant(trace_id, parent=1, goal="2", tokens=(10, 2), cost=0.25))
    await store.add_message(user(trace_id, parent=2))  # no goal: no stats
    for reader in (store, open_store()):
        tree = await reader.get_goal_tree(trace_id)
        assert [tree.find(i).self_stats.message_count for i in "1234"] == [0, 1, 1, 0]
        assert [tree.find(i).cumulative_stats.message_count for i in "1234"] == [2, 2, 1, 0]
        assert [tree.find(i).cumulative_stats.total_tokens for i in "123"] == [132, 132, 120]
        assert tree.find("1").cumulative_stats.total_cost == pytest.approx(0.75)
    added = [e.payload for e in await store.get_events(trace_id) if e.type == "message_added"]
    assert [p["message"]["sequence"] for p in added] == [1, 2, 3]
    assert added[0]["message"]["goal_id"] == "3"
    assert added[0]["affected_goals"] == [
        {"goal_id": g, "self_stats": {"message_count": s, "total_tokens": 120 * s, "total_cost": 0.5 * s},
         "cumulative_stats": {"message_count": 1, "total_tokens": 120, "total_cost": 0.5}}
        for g, s in (("3", 1), ("2", 0), ("1", 0))
    ]
    assert [g["goal_id"] for g in added[1]["affected_goals"]] == ["2", "1"]
    assert added[1]["affected_goals"][1]["cumulative_stats"]["message_count"] == 2
    assert added[2]["affected_goals"] == []


async def test_rewind_moves_the_head_and_deletes_nothing(store, open_store, trace_id):
    await add_chain(store, trace_id, 5)
    await store.update_trace(trace_id, head_sequence=3)
    branch = user(trace_id, "take two", parent=3)
    await store.add_message(branch)
    assert branch.sequence == 6
    for reader in (store, open_store()):
        trace = await reader.get_trace(trace_id)
        assert trace.head_sequence == 6
        assert [m.sequence for m in await reader.get_main_path_messages(trace_id, trace.head_sequence)] == [1, 2, 3, 6]
        assert [m.sequence for m in await reader.get_main_path_messages(trace_id)] == [1, 2, 3, 6]
        assert [m.sequence for m in await reader.get_main_path_messages(trace_id, 5)] == [1, 2, 3, 4, 5]
        assert [m.sequence for m in await reader.get_trace_messages(trace_id)] == [1, 2, 3, 4, 5, 6]
    assert await store.get_main_path_messages(trace_id, 0) == []
    with pytest.raises(MessageNotFoundError):
        await store.get_main_path_messages(trace_id, 7)


async def test_side_branch_messages_do_not_move_the_head(store, trace_id):
    await add_chain(store, trace_id, 2)
    await store.add_message(user(trace_id, "reflect", parent=2, branch="reflection"))
    assert (await store.get_trace(trace_id)).head_sequence == 2


async def test_messages_by_goal_in_sequence_order(store, trace_id):
    for goal in ("3", "4", "3", None, "3"):
        await store.add_message(user(trace_id, goal=goal))
    assert [m.sequence for m in await store.get_messages_by_goal(trace_id, "3")] == [1, 3, 5]
    assert await store.get_messages_by_goal(trace_id, "99") == []


async def test_update_message_changes_content_but_not_identity_shape_or_counted_numbers(store, open_store, trace_id):
    message = assistant(trace_id, parent=None)
    await store.add_message(message)
    updated = await store.update_message(message.message_id, description="edited", metadata={"compacted": True},
                                         content={"text": "new text"})
    assert (updated.description, updated.text, updated.sequence) == ("edited", "new text", 1)
    got = await open_store().get_message(message.message_id)
    assert got.model_dump() == updated.model_dump()
    for field in ("sequence", "trace_id", "parent_sequence", "goal_id", "prompt_tokens", "cost", "x"):
        with pytest.raises(InvalidUpdateError):
            await store.update_message(message.message_id, **{field: 2})
    with pytest.raises(InvalidUpdateError):
        await store.update_message(message.message_id, role="robot")
    with pytest.raises(MessageNotFoundError):
        await store.update_message(f"{trace_id}-0002", description="x")


async def test_returned_messages_are_copies(store, trace_id):
    message = user(trace_id, metadata={"tags": ["a"]})
    await store.add_message(message)
    message.metadata["tags"].append("caller")
    got = await store.get_message(message.message_id)
    got.metadata["tags"].append("reader")
    (await store.get_trace_messages(trace_id))[0].metadata["tags"].append("list")
    assert (await store.get_message(message.message_id)).metadata == {"tags": ["a"]}


# ---- events -----------------------------------------------------------------------------
async def test_append_event_continues_dense_ids_and_get_events_filters(store, open_store, trace_id):
    store_events = len(await store.get_events(trace_id))  # four goal_added
    assert store_events == 4
    first = await store.append_event(trace_id, "progress", {"step": 1, "at": T0})
    with pytest.raises(InvalidUpdateError):
        await store.append_event(trace_id, "progress", {"bad": object()})
    with pytest.raises(InvalidUpdateError):
        await store.append_event(trace_id, "no_such_type", {})  # type: ignore[arg-type]
    second = await store.append_event(trace_id, "rewind", {"after_sequence": 0, "head_sequence": 0, "goal_tree_snapshot": None})
    assert (first, second) == (5, 6)
    events = await open_store().get_events(trace_id, since_event_id=4)
    assert [(e.event_id, e.type) for e in events] == [(5, "progress"), (6, "rewind")]
    assert events[0].payload == {"step": 1, "at": "2026-01-01T00:00:00Z"}
    assert await store.get_events(trace_id, since_event_id=6) == []
    everything = await store.get_events(trace_id)
    for since in range(-1, 8):
        assert await store.get_events(trace_id, since) == [e for e in everything if e.event_id > since]


# ---- concurrency ------------------------------------------------------------------------
async def _writer(store, trace_id, count, goal):
    parent = None
    for _ in range(count):
        message = assistant(trace_id, parent=parent, goal=goal, tokens=(3, 1), cost=0.5)
        await store.add_message(message)
        parent = message.sequence
        await asyncio.sleep(0)
    return parent


async def _check_totals(store, open_store, trace_id, total, heads):
    for reader in (store, open_store()):
        trace = await reader.get_trace(trace_id)
        assert (trace.total_messages, trace.total_tokens, trace.total_cost) == (total, 4 * total, 0.5 * total)
        assert [m.sequence for m in await reader.get_trace_messages(trace_id)] == list(range(1, total + 1))
        tree = await reader.get_goal_tree(trace_id)
        assert tree.find("1").cumulative_stats.message_count == total
        assert tree.find("3").self_stats.message_count + tree.find("2").self_stats.message_count == total
        events = await reader.get_events(trace_id)
        assert [e.event_id for e in events] == list(range(1, len(events) + 1))
        assert sum(e.type == "message_added" for e in events) == total
        for head in heads:  # every writer's chain is intact
            assert len(await reader.get_main_path_messages(trace_id, head)) == total // len(heads)


async def test_concurrent_coroutines_never_lose_an_update(store, open_store, trace_id):
    heads = await asyncio.gather(*(_writer(store, trace_id, 50, "3" if i % 2 else "2") for i in range(20)))
    await _check_totals(store, open_store, trace_id, 1000, heads)


async def test_concurrent_threads_never_lose_an_update(store, open_store, trace_id):
    heads: list[int] = []
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible to provoke races
    try:
        threads = [threading.Thread(target=lambda i=i: heads.append(asyncio.run(
            _writer(store, trace_id, 60, "3" if i % 2 else "2")))) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    await _check_totals(store, open_store, trace_id, 240, heads)
