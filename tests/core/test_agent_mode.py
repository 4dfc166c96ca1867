"""Agent modes (SPEC A1, A2, A7, A12): default, configuration errors, freezing, legacy goal behaviour."""

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
    recursive_config,
    trace_by_objective,
)

from cyber_agent.core.agent_mode import AgentPolicy, policy_from_environment, validate_recursive_child_execution
from cyber_agent.core.config import RunConfig
from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.trace import Trace

FROZEN = ("agent_mode", "agent_mode_revision", "agent_depth", "root_trace_id")


def frozen(trace: Trace) -> dict[str, object]:
    lineage = trace.lineage
    return {"agent_mode": lineage.mode, "agent_mode_revision": lineage.revision, "agent_depth": lineage.depth,
            "root_trace_id": lineage.root_trace_id}


# ---- A1: choosing the mode of a new root -----------------------------------------------------
def test_policy_from_environment_defaults_to_legacy_and_reads_agent_mode():
    assert policy_from_environment({}).mode == "legacy"
    assert policy_from_environment({"AGENT_MODE": "recursive"}).is_recursive
    assert policy_from_environment({"AGENT_MODE": "legacy"}, override="recursive").is_recursive


async def test_a_new_root_without_agent_mode_is_legacy_and_freezes_it():
    with ScriptedModel(["done"]) as model:
        runner, store = make_runner(model)
        result = await runner.run_result(TASK)
    trace = await store.get_trace(result.trace.trace_id)
    assert frozen(trace) == {"agent_mode": "legacy", "agent_mode_revision": 2, "agent_depth": 0,
                             "root_trace_id": trace.trace_id}
    # Legacy has no tree budget, no anchor and no protocol tools.
    assert "resource_budget" not in trace.context and await store.get_resource_usage(trace.trace_id) is None
    assert "submit_report" not in model.requests[0].tool_names


@pytest.mark.parametrize("value", ["turbo", "recursive2", "1", "Recursive ", "RECURSIVE", " legacy", "Legacy"])
async def test_an_invalid_agent_mode_refuses_the_root_before_any_model_call(monkeypatch, value):
    monkeypatch.setenv("AGENT_MODE", value)
    model = ScriptedModel(["never played"])
    runner, store = make_runner(model)
    with pytest.raises(ConfigurationError) as caught:
        await runner.run_result(TASK)
    assert caught.value.setting == "AGENT_MODE" and repr(value) in str(caught.value)
    assert model.requests == []
    assert await store.list_traces(limit=None) == []


@pytest.mark.parametrize("value", ["1", "false", ""])
@pytest.mark.parametrize("mode", [None, "legacy", "recursive"])
async def test_agent_recursion_enabled_in_the_environment_is_an_error_whatever_its_value(monkeypatch, value, mode):
    monkeypatch.setenv("AGENT_RECURSION_ENABLED", value)
    model = ScriptedModel(["never played"])
    runner, store = make_runner(model)
    with pytest.raises(ConfigurationError, match="AGENT_RECURSION_ENABLED.*AGENT_MODE"):
        await runner.run_result(TASK, recursive_config(agent_mode=mode))
    assert model.requests == [] and await store.list_traces(limit=None) == []


# ---- A2: freezing and inheritance ------------------------------------------------------------
async def test_a_recursive_root_from_the_environment_freezes_its_policy_anchor_and_budget(monkeypatch):
    monkeypatch.setenv("AGENT_MODE", "recursive")
    model = TreeModel({ROOT: [delegate(brief("child task"))]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config(agent_mode=None))
    root = result.trace
    assert result.status == "completed"
    assert frozen(root) == {"agent_mode": "recursive", "agent_mode_revision": 2, "agent_depth": 0,
                            "root_trace_id": root.trace_id}
    assert root.root_setup is not None and root.root_setup.anchor.objective == ROOT
    assert len(root.root_setup.anchor_hash) == 64 and root.root_setup.resource_budget.max_llm_calls == 150
    child = await trace_by_objective(store, "child task")
    assert frozen(child) == {"agent_mode": "recursive", "agent_mode_revision": 2, "agent_depth": 1,
                             "root_trace_id": root.trace_id}


async def test_children_inherit_the_persisted_policy_even_when_the_environment_changes_mid_run(monkeypatch):
    monkeypatch.setenv("AGENT_MODE", "recursive")

    def change_environment(key, messages, names):
        if key == ROOT:
            # Anything read from the environment now would turn the child legacy or fail it.
            monkeypatch.setenv("AGENT_MODE", "legacy")
            monkeypatch.setenv("AGENT_MAX_LLM_CALLS", "garbage")

    model = TreeModel({ROOT: [delegate(brief("child task"))]}, on_call=change_environment)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config(agent_mode=None))
    assert result.status == "completed"
    child = await trace_by_objective(store, "child task")
    assert child.lineage.mode == "recursive" and child.lineage.depth == 1
    # The child ran under the recursive protocol: it was offered submit_report and was validated.
    assert "submit_report" in model.offered["child task"][0]
    assert model.calls[VALIDATOR] == 2


async def test_continuing_or_rewinding_a_legacy_trace_never_makes_it_recursive(monkeypatch):
    with ScriptedModel(["first answer", "second answer", "third answer"]) as model:
        runner, store = make_runner(model)
        first = await runner.run_result(TASK)
        monkeypatch.setenv("AGENT_MODE", "recursive")
        again = await runner.run_result([{"role": "user", "content": "more"}],
                                        RunConfig(trace_id=first.trace.trace_id, agent_mode="recursive"))
        rewound = await runner.run_result([{"role": "user", "content": "other"}],
                                          RunConfig(trace_id=first.trace.trace_id, after_sequence=2))
    assert again.status == rewound.status == "completed"
    assert (await store.get_trace(first.trace.trace_id)).lineage.mode == "legacy"
    # No root validator ran: the scripted model held exactly one reply per run.
    assert all("submit_report" not in r.tool_names and "review_task" not in r.tool_names for r in model.requests)


async def test_continuing_a_recursive_root_keeps_it_recursive_whatever_the_environment(monkeypatch):
    model = TreeModel()
    runner, store = make_runner(model.llm)
    first = await runner.run_result(TASK, recursive_config())
    assert model.calls[VALIDATOR] == 1
    monkeypatch.setenv("AGENT_MODE", "legacy")
    again = await runner.run_result([{"role": "user", "content": "refine it"}],
                                    RunConfig(trace_id=first.trace.trace_id, agent_mode="legacy"))
    assert again.status == "completed"
    assert (await store.get_trace(first.trace.trace_id)).lineage.mode == "recursive"
    assert model.calls[VALIDATOR] == 2  # the continued answer went through the root validator again


async def test_a_historic_trace_without_agent_mode_continues_as_legacy_and_gets_the_field(monkeypatch):
    monkeypatch.setenv("AGENT_MODE", "recursive")
    with ScriptedModel(["continued"]) as model:
        runner, store = make_runner(model)
        old = Trace.create(task="an old task", context={"note": "created before modes existed"})
        await store.create_trace(old)
        await store.update_trace(old.trace_id, status="completed")
        result = await runner.run_result([{"role": "user", "content": "go on"}], RunConfig(trace_id=old.trace_id))
    assert result.status == "completed" and result.answer == "continued"
    persisted = await store.get_trace(old.trace_id)
    assert persisted.lineage.mode == "legacy" and persisted.context["note"] == "created before modes existed"
    assert "submit_report" not in model.requests[0].tool_names
    assert AgentPolicy.of(Trace.create(task="t")).mode == "legacy"


# ---- A12 / T6: goal behaviour per mode -------------------------------------------------------
GOAL_STEPS_LEGACY = [call("goal", add="step a; step b"), call("goal", focus="2"), call("goal", done="a finished"),
                     call("goal", done="b finished")]
GOAL_STEPS_RECURSIVE = [call("goal", add="step a; step b"), call("goal", focus="2"), call("goal", done="a finished"),
                        call("goal", focus="3"), call("goal", done="b finished")]


async def _root_goal_statuses(mode: str) -> tuple[list[str], list[str]]:
    """Run the goal steps; return the root goal's status at each root call and the tool results."""
    seen: list[str] = []
    holder: dict[str, object] = {}

    async def watch(key, messages, names):
        if key == ROOT and "store" in holder:
            root = (await holder["store"].list_traces(limit=None))[-1]
            tree = await holder["store"].get_goal_tree(root.trace_id)
            seen.append(tree.find("1").status)

    steps = GOAL_STEPS_LEGACY if mode == "legacy" else GOAL_STEPS_RECURSIVE
    model = TreeModel({ROOT: list(steps)}, on_call=watch)
    runner, store = make_runner(model.llm)
    holder["store"] = store
    config = recursive_config() if mode == "recursive" else RunConfig(agent_mode="legacy")
    result = await runner.run_result(TASK, config)
    assert result.status == "completed"
    tools = [m.text for m in result.messages if m.role == "tool"]
    return seen, tools


async def test_legacy_goals_auto_advance_and_cascade_completion_to_the_parent():
    seen, tools = await _root_goal_statuses("legacy")
    assert "focus moved to goal 3" in tools[2]
    assert "parents completed too: 1" in tools[3]
    assert seen[-1] == "completed"  # before the final answer: the cascade, not the run's end


async def test_recursive_goals_neither_auto_advance_nor_cascade():
    seen, tools = await _root_goal_statuses("recursive")
    assert "does not auto-advance" in tools[2] and "focus moved" not in tools[2]
    assert "parents completed" not in tools[4]
    assert seen[-1] == "in_progress"


async def test_a_recursive_goal_waits_for_children_then_goes_to_pending_review():
    statuses: dict[str, list[str]] = {}

    async def watch(key, messages, names):
        roots = [t for t in await store.list_traces(limit=None) if t.parent_trace_id is None]
        if roots:
            tree = await store.get_goal_tree(roots[0].trace_id)
            statuses.setdefault(key, []).append(tree.find("1").status)

    model = TreeModel({ROOT: [delegate(brief("child task"))]}, on_call=watch)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed"
    assert statuses["child task"] == ["waiting_children"]
    # Root calls: delegate (in progress), review (pending_review), answer (back in progress after accept).
    assert statuses[ROOT] == ["in_progress", "pending_review", "in_progress"]


async def test_a_legacy_goal_never_waits_for_review():
    statuses: list[str] = []

    async def watch(key, messages, names):
        if key == "sub task":
            roots = [t for t in await store.list_traces(limit=None) if t.parent_trace_id is None]
            statuses.append((await store.get_goal_tree(roots[0].trace_id)).find("1").status)

    model = TreeModel({ROOT: [call("agent", task="sub task")]}, on_call=watch)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, RunConfig(agent_mode="legacy"))
    assert result.status == "completed" and statuses == ["in_progress"]
    assert model.calls[VALIDATOR] == 0


# ---- A7: scheduling settings -----------------------------------------------------------------
@pytest.mark.parametrize(("mode", "limit"), [("sequential", 1), ("sequential", 2), ("parallel", 1), ("parallel", 2)])
def test_valid_child_execution_settings_pass(mode, limit):
    validate_recursive_child_execution(mode, limit)


@pytest.mark.parametrize(("mode", "limit", "setting"), [
    ("parallel", 0, "max_parallel_children"), ("parallel", 3, "max_parallel_children"),
    ("sequential", -1, "max_parallel_children"), ("parallel", True, "max_parallel_children"),
    ("parallel", 1.5, "max_parallel_children"), ("batch", 1, "child_execution_mode"),
])
def test_invalid_child_execution_settings_name_the_setting(mode, limit, setting):
    with pytest.raises(ConfigurationError) as caught:
        validate_recursive_child_execution(mode, limit)
    assert caught.value.setting == setting


async def test_a_recursive_root_with_three_parallel_children_is_refused_before_any_model_call():
    model = ScriptedModel(["never played"])
    runner, store = make_runner(model)
    with pytest.raises(ConfigurationError, match="max_parallel_children"):
        await runner.run_result(TASK, recursive_config(child_execution_mode="parallel", max_parallel_children=3))
    assert model.requests == [] and await store.list_traces(limit=None) == []


async def test_legacy_ignores_the_scheduling_fields():
    with ScriptedModel(["done"]) as model:
        runner, _ = make_runner(model)
        result = await runner.run_result(TASK, RunConfig(agent_mode="legacy", max_parallel_children=9))
    assert result.status == "completed"
