"""Tool rights of recursive runs (SPEC A6): intersection, schema = dispatch, no forging, protocol state."""

from __future__ import annotations

import pytest
from recursive_helpers import (
    REVIEW_TURN,
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
    trace_by_objective,
)

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import default_registry
from cyber_agent.core.tool_rights import child_tool_snapshot, runtime_tool_names, tighten_by_state
from cyber_agent.tools.context import ToolContext
from cyber_agent.trace import InMemoryTraceStore, Trace

CHILD_BASE = {"goal", "read_file", "list_files", "agent", "read_context_ref"}


def counting_registry(counter: list[dict]):
    """The default tools plus `counter`, which records every call it receives."""
    registry = default_registry()

    def counter_tool(ctx: ToolContext, n: int) -> str:
        """Count a call (a side effect a test can observe)."""
        counter.append({"trace": ctx.trace_id, "n": n})
        return f"counted {n}"

    registry.register(counter_tool, name="counter")
    return registry


def child_trace(snapshot, *, depth: int = 1, mode: str = "recursive", **context) -> Trace:
    trace = Trace.create(task="t", parent_trace_id="p", context={
        "agent_mode": mode, "agent_mode_revision": 2, "agent_depth": depth, "tool_snapshot": sorted(snapshot), **context,
    })
    return trace


def tool_messages(messages) -> list:
    return [m for m in messages if m.role == "tool"]


# ---- the intersection (unit level) -------------------------------------------------------------
REGISTERED = set(default_registry().names()) | {"counter"}


@pytest.mark.parametrize(("parent", "depth", "expected"), [
    (CHILD_BASE | {"evaluate", "bash_command", "counter"}, 2, CHILD_BASE | {"submit_report", "review_task"}),
    (CHILD_BASE - {"agent"}, 2, CHILD_BASE - {"agent"} | {"submit_report"}),
    (CHILD_BASE, 5, CHILD_BASE - {"agent"} | {"submit_report"}),
    (CHILD_BASE - {"read_context_ref"}, 3, CHILD_BASE - {"read_context_ref"} | {"submit_report", "review_task"}),
    ({"evaluate", "bash_command"}, 1, {"submit_report"}),
])
def test_a_child_snapshot_is_parent_rights_within_child_and_depth_rights(parent, depth, expected):
    assert child_tool_snapshot(frozenset(parent), depth, REGISTERED) == frozenset(expected)


def test_child_rights_are_also_cut_to_what_is_registered_and_forbidden_tools_never_pass():
    forged = CHILD_BASE | {"evaluate", "bash_command", "submit_report", "counter"}
    registered = REGISTERED - {"list_files"}
    rights = runtime_tool_names(registered, None, child_trace(forged, depth=5))
    assert rights == frozenset(CHILD_BASE - {"agent", "list_files"} | {"submit_report"})


def test_the_root_never_holds_submit_report_and_validators_hold_only_validator_tools():
    root = Trace.create(task="t", context={"agent_mode": "recursive", "agent_mode_revision": 2, "agent_depth": 0})
    assert "submit_report" not in runtime_tool_names(REGISTERED, None, root)
    assert {"agent", "evaluate", "read_context_ref"} <= runtime_tool_names(REGISTERED, None, root)
    validator = child_trace(REGISTERED, created_by_tool="validator")
    assert runtime_tool_names(REGISTERED, None, validator) == {
        "read_trajectory", "read_artifact", "read_file", "list_files", "submit_validation"}


# ---- integration: what the model sees and what runs -------------------------------------------
async def test_children_never_see_or_run_evaluate_bash_or_tools_outside_the_child_set():
    counted: list[dict] = []
    plan = {ROOT: [call("counter", n=1), delegate(brief("child"))],
            "child": [call("evaluate", code="1+1"), call("bash_command", command="echo hi"), call("counter", n=2)]}
    model = TreeModel(plan)
    runner, store = make_runner(model.llm, registry=counting_registry(counted))
    tools = ["goal", "read_file", "agent", "evaluate", "bash_command", "counter"]
    result = await runner.run_result(TASK, recursive_config(tools=tools))
    assert result.status == "completed"
    assert set(tools) <= model.offered[ROOT][0]
    assert model.offered["child"][0] == {"agent", "goal", "read_file", "submit_report"}
    child = await trace_by_objective(store, "child")
    refusals = tool_messages(await messages_of(store, child.trace_id))[:3]
    assert [m.tool_name for m in refusals] == ["evaluate", "bash_command", "counter"]
    assert all(m.metadata["is_error"] and "is not available to this agent" in m.text for m in refusals)
    assert counted == [{"trace": result.trace.trace_id, "n": 1}]  # only the root's own call ran


async def test_agent_reaches_a_child_only_when_the_parent_holds_it():
    model = TreeModel({ROOT: [delegate(brief("child"))]})
    runner, store = make_runner(model.llm)
    await runner.run_result(TASK, recursive_config(tools=["goal", "read_file", "agent"]))
    assert "agent" in model.offered["child"][0]
    child = await trace_by_objective(store, "child")
    # A child rights snapshot without `agent` (its parent lacked it) never regains it at runtime.
    without = child_trace(set(child.lineage.tool_snapshot) - {"agent"}, depth=1)
    assert "agent" not in runtime_tool_names(REGISTERED, None, without)


async def test_read_context_ref_is_inherited_never_granted_afresh():
    model = TreeModel({ROOT: [delegate(brief("child"))], "child": [delegate(brief("grandchild"))]})
    runner, _ = make_runner(model.llm)
    await runner.run_result(TASK, recursive_config(tools=["goal", "agent"]))
    assert "read_context_ref" not in model.offered["child"][0] | model.offered["grandchild"][0]
    with_ref = TreeModel({ROOT: [delegate(brief("child"))]})
    runner, _ = make_runner(with_ref.llm)
    await runner.run_result(TASK, recursive_config(tools=["goal", "agent", "read_context_ref"]))
    assert "read_context_ref" in with_ref.offered["child"][0]


async def test_a_forged_call_is_refused_before_its_arguments_are_validated_or_the_context_injected():
    counted: list[dict] = []
    model = TreeModel({ROOT: [call("counter", n="not a number", ctx="forged context")]})
    runner, _ = make_runner(model.llm, registry=counting_registry(counted))
    result = await runner.run_result(TASK, recursive_config(tools=["goal", "agent"]))
    refusal = tool_messages(result.messages)[0]
    assert refusal.metadata["is_error"] and refusal.text.startswith("tool 'counter' is not available")
    assert "invalid arguments" not in refusal.text and "supplied by the runner" not in refusal.text
    assert "counter" not in model.offered[ROOT][0] and counted == []


async def test_registry_execute_refuses_an_unexposed_tool_outright():
    counted: list[dict] = []
    registry = counting_registry(counted)
    ctx = ToolContext(trace_id="t", store=InMemoryTraceStore())
    refused = await registry.execute("counter", {"n": "bad", "ctx": 1}, allowed=frozenset({"goal"}), context=ctx)
    assert refused.is_error and "not available" in refused.content and counted == []
    ran = await registry.execute("counter", {"n": 3}, allowed=frozenset({"counter"}), context=ctx)
    assert not ran.is_error and counted == [{"trace": "t", "n": 3}]


# ---- the runner's snapshot cannot be overridden through custom context --------------------------
FORGED_CONTEXT = {"tool_snapshot": ["evaluate"], "agent_depth": 5, "agent_mode": "legacy", "root_trace_id": "elsewhere",
                  "agent_mode_revision": 1}


async def test_custom_context_cannot_override_mode_depth_lineage_or_tool_rights():
    model = TreeModel({ROOT: [delegate(brief("child"))]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config(context=dict(FORGED_CONTEXT)))
    root = await store.get_trace(result.trace.trace_id)
    assert (root.lineage.mode, root.lineage.depth, root.lineage.root_trace_id,
            root.lineage.revision) == ("recursive", 0, root.trace_id, 2)
    assert root.context == {}  # forged runner keys are dropped, never stored
    assert {"agent", "goal", "read_file"} <= model.offered[ROOT][0]
    child = await trace_by_objective(store, "child")
    assert child.lineage.depth == 1 and "evaluate" not in child.lineage.tool_snapshot
    assert "agent" in model.offered["child"][0]


async def test_custom_context_cannot_make_a_root_skip_its_root_validator():
    model = TreeModel()
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config(context={"created_by_tool": "validator"}))
    assert result.status == "completed" and model.calls[VALIDATOR] == 1


async def test_custom_context_cannot_lower_the_child_quota_count():
    model = TreeModel({ROOT: [delegate(*[brief(f"child {i}") for i in range(7)])]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config(context={"child_count": -100}))
    agent_result = next(m for m in result.messages if m.tool_name == "agent")
    assert agent_result.metadata["is_error"] and "child quota" in agent_result.text


# ---- protocol tools tighten by state -------------------------------------------------------------
async def test_pending_reviews_leave_only_review_and_read_tools():
    forged = [call("agent", task_brief=brief("sneaky")), call("goal", add="x")]
    model = TreeModel({ROOT: [delegate(brief("child"))], ROOT + REVIEW_TURN: forged})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed"
    assert "review_task" not in model.offered[ROOT][0]
    assert model.offered[ROOT][1] == {"review_task", "read_file", "list_files", "read_context_ref"}
    refusals = tool_messages(result.messages)[1:3]
    assert [m.tool_name for m in refusals] == ["agent", "goal"]
    assert all(m.metadata["is_error"] and "is not available" in m.text for m in refusals)
    assert model.calls["sneaky"] == 0 and "agent" in model.offered[ROOT][-1]  # restored after the review


async def test_a_root_whose_tool_list_names_agent_can_still_review_its_children():
    model = TreeModel({ROOT: [delegate(brief("child"))]})
    runner, _ = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config(tools=["agent"]))
    assert result.status == "completed"
    assert model.offered[ROOT][0] == {"agent"} and model.offered[ROOT][1] == {"review_task"}


async def test_submit_report_is_for_children_only_and_submit_validation_for_validators_only():
    plan = {ROOT: [call("submit_report", outcome="completed", summary="I am not a child"), delegate(brief("child"))],
            "child": [call("submit_validation", verdicts=[], summary="self-judged")]}
    model = TreeModel(plan)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed"
    assert "submit_report" not in model.offered[ROOT][0] and "submit_report" in model.offered["child"][0]
    assert all("submit_validation" not in offered for offered in model.offered[ROOT] + model.offered["child"])
    root_refusal = tool_messages(result.messages)[0]
    child = await trace_by_objective(store, "child")
    child_refusal = tool_messages(await messages_of(store, child.trace_id))[0]
    for refusal in (root_refusal, child_refusal):
        assert refusal.metadata["is_error"] and "is not available" in refusal.text
    assert child.protocol.validation is None


def test_tighten_by_state_keeps_review_task_only_while_reviews_are_pending():
    static = frozenset(CHILD_BASE | {"submit_report", "review_task"})
    idle = child_trace(static, task_protocol={})
    pending = child_trace(static, task_protocol={"pending_reviews": ["c1"]})
    assert tighten_by_state(static, idle) == static - {"review_task"}
    assert tighten_by_state(static, pending) == {"review_task", "read_file", "list_files", "read_context_ref"}


async def test_legacy_runs_never_see_protocol_tools():
    model = TreeModel({ROOT: [call("agent", task="sub")]})
    runner, _ = make_runner(model.llm)
    await runner.run_result(TASK, RunConfig(agent_mode="legacy"))
    protocol = {"submit_report", "review_task", "read_context_ref", "read_trajectory", "submit_validation"}
    assert not protocol & (model.offered[ROOT][0] | model.offered["sub"][0])
    assert "evaluate" in model.offered[ROOT][0] and "evaluate" in model.offered["sub"][0]
