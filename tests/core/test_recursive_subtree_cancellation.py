"""Stop propagation (SPEC A8): subtree stops, queued children, in-flight responses, legacy isolation."""

from __future__ import annotations

from recursive_helpers import (
    ROOT,
    TASK,
    VALIDATOR,
    TreeModel,
    brief,
    call,
    calls,
    clean_agent_env,  # noqa: F401  (autouse fixture)
    delegate,
    make_runner,
    messages_of,
    recursive_config,
    report,
    trace_by_objective,
)

from cyber_agent.core.config import RunConfig
from cyber_agent.core.stop import StopRegistry


def stopper(runner_box: dict, when: str, target: str, reason: str = "test stop"):
    """An on_call hook: when `when` calls the model, stop the trace of objective `target`."""

    async def on_call(key, messages, names):
        if key == when:
            runner, store = runner_box["runner"], runner_box["store"]
            trace = await trace_by_objective(store, target)
            runner_box.setdefault("flagged", []).append(runner.stop(trace.trace_id, reason))

    return on_call


def runner_with(model: TreeModel, box: dict):
    runner, store = make_runner(model.llm)
    box.update(runner=runner, store=store)
    return runner, store


async def test_a_stop_at_depth_two_halts_depths_three_to_five_while_the_root_and_siblings_go_on():
    box: dict = {}
    plan = {ROOT: [delegate(brief("d1"))], "d1": [delegate(brief("d2"), brief("d2 sibling"))],
            "d2": [delegate(brief("d3"))], "d3": [delegate(brief("d4"))], "d4": [delegate(brief("d5"))],
            "d5": [report("never executed")]}
    model = TreeModel(plan, on_call=stopper(box, when="d5", target="d2"))
    runner, store = runner_with(model, box)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed"
    status = {k: (await trace_by_objective(store, k)).status for k in ("d1", "d2", "d2 sibling", "d3", "d4", "d5")}
    assert status == {"d1": "completed", "d2": "stopped", "d2 sibling": "completed",
                      "d3": "stopped", "d4": "stopped", "d5": "stopped"}
    assert [model.calls[k] for k in ("d2", "d3", "d4", "d5")] == [1, 1, 1, 1]  # no turn after the stop
    assert len(box["flagged"][0]) == 4  # d2 and its three registered descendants
    d5 = await trace_by_objective(store, "d5")
    assert "ancestor" in d5.error_message and "test stop" in d5.error_message


async def test_a_stopped_child_returns_to_its_parent_as_a_failed_task_report():
    box: dict = {}
    model = TreeModel({ROOT: [delegate(brief("child"))]}, on_call=stopper(box, when="child", target="child"))
    runner, store = runner_with(model, box)
    result = await runner.run_result(TASK, recursive_config())
    child = await trace_by_objective(store, "child")
    assert child.status == "stopped"
    reported = child.protocol.model_dump(mode="json")["report"]
    assert reported["outcome"] == "failed" and reported["submitted_by"] == "runner"
    assert "test stop" in reported["summary"]
    joined = next(m.text for m in result.messages if m.tool_name == "agent")
    assert f"Child {child.trace_id} [stopped] outcome=failed" in joined and "verdict: fail" in joined
    assert model.calls[VALIDATOR] == 1  # only the root validator: a stopped child has nothing to validate
    assert result.status == "completed"


async def test_an_in_flight_response_is_recorded_but_its_tool_calls_never_run():
    box: dict = {}
    plan = {ROOT: [delegate(brief("child"))],
            "child": [calls(("goal", {"add": "a new step"}), ("submit_report", {"outcome": "completed", "summary": "x"}))]}
    model = TreeModel(plan, on_call=stopper(box, when="child", target="child"))
    runner, store = runner_with(model, box)
    await runner.run_result(TASK, recursive_config())
    child = await trace_by_objective(store, "child")
    messages = await messages_of(store, child.trace_id)
    assert messages[-1].role == "assistant" and [c.name for c in messages[-1].tool_calls] == ["goal", "submit_report"]
    assert not [m for m in messages if m.role == "tool"]
    assert len((await store.get_goal_tree(child.trace_id)).goals) == 1  # the goal call never ran
    assert model.calls["child"] == 1 and child.protocol.model_dump(mode="json")["report"]["submitted_by"] == "runner"


async def test_queued_children_of_a_stopped_parent_never_call_the_model():
    box: dict = {}
    queued_seen: list[list[str]] = []

    async def on_call(key, messages, names):
        if key == "q1":
            queued_seen.append(box["runner"].stops.queued())
        await stopper(box, when="q1", target="parent")(key, messages, names)

    plan = {ROOT: [delegate(brief("parent"))], "parent": [delegate(brief("q1"), brief("q2"), brief("q3"))]}
    model = TreeModel(plan, on_call=on_call)
    runner, store = runner_with(model, box)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed"
    q2, q3 = await trace_by_objective(store, "q2"), await trace_by_objective(store, "q3")
    assert sorted(queued_seen[0]) == sorted([q2.trace_id, q3.trace_id])
    assert model.calls["q1"] == 1 and model.calls["q2"] == model.calls["q3"] == 0
    assert q2.status == q3.status == "stopped" and (await trace_by_objective(store, "parent")).status == "stopped"


async def test_stopping_the_root_reaches_every_registered_descendant():
    box: dict = {}
    plan = {ROOT: [delegate(brief("child"))], "child": [delegate(brief("grandchild"))],
            "grandchild": [call("goal", add="never added")]}
    model = TreeModel(plan, on_call=stopper(box, when="grandchild", target=ROOT))
    runner, store = runner_with(model, box)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "stopped" and model.calls[ROOT] == 1 and model.calls[VALIDATOR] == 0
    for objective in ("child", "grandchild"):
        assert (await trace_by_objective(store, objective)).status == "stopped"
    assert len(box["flagged"][0]) == 3
    assert runner.running() == []


async def test_running_lists_active_traces_but_not_queued_ones():
    box: dict = {}
    seen: list[list[str]] = []

    def on_call(key, messages, names):
        if key == "first":
            seen.append(box["runner"].running())

    model = TreeModel({ROOT: [delegate(brief("first"), brief("second"))]}, on_call=on_call)
    runner, store = runner_with(model, box)
    result = await runner.run_result(TASK, recursive_config())
    first, second = await trace_by_objective(store, "first"), await trace_by_objective(store, "second")
    assert result.trace.trace_id in seen[0] and first.trace_id in seen[0]
    assert second.trace_id not in seen[0]
    assert runner.running() == []


# ---- legacy --------------------------------------------------------------------------------------
async def legacy_child(store, root_id: str, task: str):
    children = await store.list_traces(parent_trace_id=root_id, limit=None)
    return next(c for c in children if c.task == task)


async def test_a_legacy_stop_of_the_root_reaches_its_sub_agents():
    box: dict = {}

    async def stop_root(key, messages, names):
        if key == "a":
            root = [t for t in await box["store"].list_traces(limit=None) if t.parent_trace_id is None][0]
            box["runner"].stop(root.trace_id)

    model = TreeModel({ROOT: [call("agent", task=["a", "b"])]}, on_call=stop_root)
    runner, store = runner_with(model, box)
    result = await runner.run_result(TASK, RunConfig(agent_mode="legacy"))
    assert result.status == "stopped" and model.calls[ROOT] == 1
    # A stop reaches every descendant in both modes (issue 14): no sub-agent completes after it.
    for task in ("a", "b"):
        assert (await legacy_child(store, result.trace.trace_id, task)).status == "stopped"
    assert model.calls["a"] == 1 and model.calls.get("b", 0) <= 1
    assert next(m for m in result.messages if m.tool_name == "agent").metadata["is_error"] is False


async def test_a_legacy_stop_of_a_sub_agent_stops_only_that_sub_agent():
    box: dict = {}

    async def stop_a(key, messages, names):
        if key == "a":
            root = [t for t in await box["store"].list_traces(limit=None) if t.parent_trace_id is None][0]
            box["runner"].stop((await legacy_child(box["store"], root.trace_id, "a")).trace_id)

    model = TreeModel({ROOT: [call("agent", task=["a", "b"])]}, on_call=stop_a)
    runner, store = runner_with(model, box)
    result = await runner.run_result(TASK, RunConfig(agent_mode="legacy"))
    assert result.status == "completed"
    assert (await legacy_child(store, result.trace.trace_id, "a")).status == "stopped"
    assert (await legacy_child(store, result.trace.trace_id, "b")).status == "completed"


def test_the_stop_registry_flags_descendants_only_when_they_propagate():
    registry = StopRegistry()
    registry.register("root", propagate=True)
    registry.register("child", parent_id="root", propagate=True)
    registry.register("queued", parent_id="child", propagate=True, queued=True)
    registry.register("legacy", propagate=False)
    registry.register("legacy-child", parent_id="legacy", propagate=False)
    assert registry.request_stop("child") == ["child", "queued"]
    assert not registry.is_stopped("root") and registry.is_stopped("queued")
    assert registry.request_stop("legacy") == ["legacy"] and not registry.is_stopped("legacy-child")
    registry.register("late", parent_id="child", propagate=True, queued=True)
    assert registry.is_stopped("late")  # a child registered under a stopped parent starts stopped
    assert registry.active() == ["child", "legacy", "legacy-child", "root"] and registry.queued() == ["late", "queued"]
