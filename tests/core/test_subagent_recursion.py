"""Recursive delegation limits (SPEC A4, T2, T11): depth, per-parent quota, batches, lineage, remote_*."""

from __future__ import annotations

import pytest
from recursive_helpers import (
    ROOT,
    TASK,
    VALIDATOR,
    TreeModel,
    brief,
    call,
    clean_agent_env,  # noqa: F401  (autouse fixture)
    delegate,
    make_runner,
    messages_of,
    recursive_config,
    reported_children,
    trace_by_objective,
    usage_of,
)

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import default_registry
from cyber_agent.errors import LLMError
from cyber_agent.trace import Trace
from cyber_agent.trace.trace_id import parse_trace_id


def tool_results(messages, name: str | None = None) -> list:
    """Tool messages of a run (optionally only those of one tool)."""
    return [m for m in messages if m.role == "tool" and (name is None or m.tool_name == name)]


async def children_of(store, trace_id: str) -> list[Trace]:
    return await store.list_traces(parent_trace_id=trace_id, created_by_tool="agent", limit=None)


# ---- depth -------------------------------------------------------------------------------------
async def test_a_five_deep_chain_runs_and_depth_five_has_no_agent_tool():
    plan = {ROOT: [delegate(brief("level 1"))]}
    plan.update({f"level {d}": [delegate(brief(f"level {d + 1}"))] for d in range(1, 5)})
    plan["level 5"] = [delegate(brief("level 6"))]  # forged: depth 5 is not offered `agent`
    model = TreeModel(plan)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed"
    for depth in range(1, 5):
        assert "agent" in model.offered[f"level {depth}"][0]
    assert "agent" not in model.offered["level 5"][0] and "submit_report" in model.offered["level 5"][0]
    deepest = await trace_by_objective(store, "level 5")
    refusal = tool_results(await messages_of(store, deepest.trace_id))[0]
    assert refusal.metadata["is_error"] and "tool 'agent' is not available to this agent" in refusal.text
    assert model.calls["level 6"] == 0
    assert deepest.protocol.model_dump(mode="json")["report"]["outcome"] == "completed"  # it went on and reported


async def test_sub_trace_ids_and_lineage_spell_out_the_chain():
    plan = {ROOT: [delegate(brief("level 1"))]}
    plan.update({f"level {d}": [delegate(brief(f"level {d + 1}"))] for d in range(1, 5)})
    runner, store = make_runner(TreeModel(plan).llm)
    root = (await runner.run_result(TASK, recursive_config())).trace
    parent = root
    for depth in range(1, 6):
        child = await trace_by_objective(store, f"level {depth}")
        parsed = parse_trace_id(child.trace_id)
        assert (parsed.depth, parsed.parent_id, parsed.root_id, parsed.mode, parsed.seq) == (
            depth, parent.trace_id, root.trace_id, "delegate", 1)
        assert child.parent_trace_id == parent.trace_id
        assert child.lineage.root_trace_id == root.trace_id and child.lineage.depth == depth
        goal = (await store.get_goal_tree(parent.trace_id)).find(child.parent_goal_id)
        assert goal is not None and child.trace_id in goal.sub_trace_ids
        parent = child


async def test_legacy_allows_depth_one_only():
    plan = {ROOT: [call("agent", task="sub task")], "sub task": [call("agent", task="sub sub task")]}
    model = TreeModel(plan)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, RunConfig(agent_mode="legacy"))
    assert result.status == "completed"
    assert "agent" in model.offered[ROOT][0] and "agent" not in model.offered["sub task"][0]
    child = (await children_of(store, result.trace.trace_id))[0]
    refusal = tool_results(await messages_of(store, child.trace_id))[0]
    assert refusal.metadata["is_error"] and "'agent' is not available" in refusal.text
    assert model.calls["sub sub task"] == 0
    assert len(await store.list_traces(limit=None)) == 2


# ---- the per-parent quota --------------------------------------------------------------------
SIX = [brief(f"child {i}") for i in range(1, 7)]


async def test_a_seventh_direct_child_is_refused():
    model = TreeModel({ROOT: [delegate(*SIX), delegate(brief("child 7"))]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed"
    refusal = tool_results(result.messages, "agent")[1]
    assert refusal.metadata["is_error"] and "created 6 of 6 direct children" in refusal.text
    assert len(await children_of(store, result.trace.trace_id)) == 6 and model.calls["child 7"] == 0


async def test_an_over_quota_batch_is_refused_whole_and_creates_nothing():
    snapshots: list[tuple[int, int, int]] = []

    async def snapshot(key, messages, names):
        if key == ROOT and "agent" in names:
            root = [t for t in await store.list_traces(limit=None) if t.parent_trace_id is None][0]
            usage = await usage_of(store, root.trace_id)
            snapshots.append((len(await children_of(store, root.trace_id)), root.lineage.child_count,
                              usage["agents"]))

    five = [brief(f"child {i}") for i in range(1, 6)]
    batch = [brief(f"extra {i}") for i in range(1, 4)]
    model = TreeModel({ROOT: [delegate(*five), delegate(*batch)]}, on_call=snapshot)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    refusal = tool_results(result.messages, "agent")[1]
    assert refusal.metadata["is_error"] and "batch of 3 would exceed it, so nothing was created" in refusal.text
    # Before the batch and after it (the final answer turn): same children, quota count and agents.
    assert snapshots[1] == snapshots[2] == (5, 5, 6)
    started = [e for e in await store.get_events(result.trace.trace_id) if e.type == "sub_trace_started"]
    assert len(started) == 5 and sum(model.calls[f"extra {i}"] for i in range(1, 4)) == 0


async def test_continue_from_revises_an_existing_child_without_using_quota():
    def revise_first(messages, names):
        return delegate(brief("child 1"), continue_from=reported_children(messages)[0])

    model = TreeModel({ROOT: [delegate(*SIX), revise_first]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed"
    revision = tool_results(result.messages, "agent")[1]
    assert not revision.metadata["is_error"] and "Review it again" in revision.text
    assert model.calls["child 1"] == 2 and model.calls["child 2"] == 1
    root = await store.get_trace(result.trace.trace_id)
    assert root.lineage.child_count == 6 and len(await children_of(store, root.trace_id)) == 6
    assert (await usage_of(store, root.trace_id))["agents"] == 7


async def test_failed_and_stopped_children_keep_their_quota_slots():
    async def stop_self(key, messages, names):
        if key == "halts":
            runner.stop((await trace_by_objective(store, "halts")).trace_id, "test stop")

    def crash(messages, names):
        raise LLMError("provider down")

    first = [brief("works"), brief("crashes"), brief("halts")]
    plan = {ROOT: [delegate(*first), delegate(*[brief(f"more {i}") for i in range(4)]),
                   delegate(*[brief(f"last {i}") for i in range(3)])], "crashes": [crash]}
    model = TreeModel(plan, on_call=stop_self)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    statuses = {t.task.splitlines()[1]: t.status for t in await children_of(store, result.trace.trace_id)}
    assert statuses["Objective: works"] == "completed"
    assert statuses["Objective: crashes"] == "failed" and statuses["Objective: halts"] == "stopped"
    over, fits = tool_results(result.messages, "agent")[1:3]
    assert over.metadata["is_error"] and "created 3 of 6" in over.text
    assert not fits.metadata["is_error"] and len(statuses) == 6


# ---- arguments per mode ------------------------------------------------------------------------
async def test_recursive_delegation_refuses_task_and_requires_task_brief():
    model = TreeModel({ROOT: [call("agent", task="do it"), call("agent")]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    with_task, empty = tool_results(result.messages, "agent")
    assert with_task.metadata["is_error"] and "task_brief" in with_task.text and "not task" in with_task.text
    assert empty.metadata["is_error"] and "needs task_brief" in empty.text
    assert await children_of(store, result.trace.trace_id) == []


async def test_legacy_delegation_refuses_task_brief_and_continue_from():
    model = TreeModel({ROOT: [call("agent", task_brief=brief("x")), call("agent", task="x", continue_from="abc")]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, RunConfig(agent_mode="legacy"))
    for refusal in tool_results(result.messages, "agent"):
        assert refusal.metadata["is_error"] and "legacy mode delegates with task" in refusal.text
    assert await children_of(store, result.trace.trace_id) == [] and model.calls["x"] == 0


@pytest.mark.parametrize(("bad", "named"), [
    ({"completion_criteria": ["x"]}, "objective: Field required"),
    ({"objective": "o", "completion_criteria": []}, "completion_criteria: List should have at least 1 item"),
    ({"objective": "o", "completion_criteria": ["x"], "colour": "red"}, "colour: unexpected argument"),
    ({"objective": "o" * 5000, "completion_criteria": ["x"]}, "objective: String should have at most 4000"),
    ({"objective": "o", "completion_criteria": ["c" * 1001]}, "items must be at most 1000 characters"),
    ({"objective": "o", "completion_criteria": ["x"], "context_refs": [f"r{i}" for i in range(9)]}, "at most 8 refs"),
])
async def test_a_malformed_task_brief_is_a_tool_error_naming_the_problem_and_creates_nothing(bad, named):
    model = TreeModel({ROOT: [delegate(brief("fine"), bad)]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed"  # the model read the error and went on
    refusal = tool_results(result.messages, "agent")[0]
    assert refusal.metadata["is_error"] and named in refusal.text
    assert await children_of(store, result.trace.trace_id) == [] and model.calls["fine"] == 0


async def test_an_unknown_task_brief_field_is_answered_with_the_fields_a_brief_accepts():
    model = TreeModel({ROOT: [delegate({"objective": "o", "completion_criteria": ["x"], "colour": "red"})]})
    runner, _ = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    refusal = tool_results(result.messages, "agent")[0].text
    line = next(line for line in refusal.splitlines() if "colour" in line and "accepted:" in line)
    accepted = line.split("accepted:", 1)[1]
    assert "objective" in accepted and "completion_criteria" in accepted


# ---- remote_* ----------------------------------------------------------------------------------
def registry_with_remote(calls: list[str]):
    registry = default_registry()

    def remote_agent(task: str) -> str:
        """Route a task to a remote agent."""
        calls.append(task)
        return "remote done"

    registry.register(remote_agent)
    return registry


async def test_recursive_revision_two_never_exposes_or_runs_remote_tools():
    remote_calls: list[str] = []
    plan = {ROOT: [call("remote_agent", task="elsewhere"), delegate(brief("child"))],
            "child": [call("remote_agent", task="from child")]}
    model = TreeModel(plan)
    runner, store = make_runner(model.llm, registry=registry_with_remote(remote_calls))
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed" and remote_calls == []
    assert all("remote_agent" not in offered for key in (ROOT, "child", VALIDATOR) for offered in model.offered[key])
    child = await trace_by_objective(store, "child")
    for refusal in [tool_results(result.messages)[0], tool_results(await messages_of(store, child.trace_id))[0]]:
        assert refusal.metadata["is_error"] and "'remote_agent' is not available" in refusal.text


async def test_legacy_keeps_remote_tools():
    remote_calls: list[str] = []
    model = TreeModel({ROOT: [call("remote_agent", task="elsewhere")]})
    runner, _ = make_runner(model.llm, registry=registry_with_remote(remote_calls))
    result = await runner.run_result(TASK, RunConfig(agent_mode="legacy"))
    assert "remote_agent" in model.offered[ROOT][0] and remote_calls == ["elsewhere"]
    assert result.status == "completed"
