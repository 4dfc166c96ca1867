"""Batch scheduling (SPEC A7): recursive sequential by default, at most 2 in parallel, input order kept;
legacy runs every batch fully parallel.

Overlap is measured structurally — how many children's model calls are in flight at once — never
by wall time. Waits use `wait_until` only as a hang guard.
"""

from __future__ import annotations

from recursive_helpers import (
    ROOT,
    TASK,
    TreeModel,
    brief,
    call,
    clean_agent_env,  # noqa: F401  (autouse fixture)
    delegate,
    make_runner,
    recursive_config,
    trace_by_objective,
    wait_until,
)

from cyber_agent.core.config import RunConfig

PARALLEL = {"child_execution_mode": "parallel", "max_parallel_children": 2}


def gate(model: TreeModel, wanted: int):
    """A hold that keeps each child's call in flight until `wanted` calls are, or briefly when they never can.

    The brief wait gives any child the scheduler would wrongly admit the chance to show up in
    the in-flight count; it is not a measurement.
    """

    async def hold(key: str) -> None:
        await wait_until(lambda: model.in_flight >= wanted, timeout=0.05)

    return hold


async def test_recursive_batches_run_sequentially_by_default():
    model = TreeModel({ROOT: [delegate(brief("a"), brief("b"), brief("c"))]}, delays={"a": 0.01, "b": 0.01, "c": 0.01})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed"
    assert model.max_in_flight == 1
    assert model.finished == ["a", "b", "c"]
    root = await store.get_trace(result.trace.trace_id)
    assert root.root_setup.child_execution.model_dump() == {"mode": "sequential", "max_parallel_children": 2}


async def test_parallel_batches_overlap_but_never_more_than_two():
    model = TreeModel({ROOT: [delegate(brief("a"), brief("b"), brief("c"))]})
    model.hold = gate(model, 3)  # would wait for a third; only two may ever be in flight
    runner, _ = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config(**PARALLEL))
    assert result.status == "completed"
    assert model.max_in_flight == 2
    assert sorted(model.finished) == ["a", "b", "c"]


async def test_parallel_with_a_limit_of_one_runs_one_at_a_time():
    model = TreeModel({ROOT: [delegate(brief("a"), brief("b"))]})
    model.hold = gate(model, 2)
    runner, _ = make_runner(model.llm)
    await runner.run_result(TASK, recursive_config(child_execution_mode="parallel", max_parallel_children=1))
    assert model.max_in_flight == 1


async def test_results_keep_input_order_whatever_the_finish_order():
    async def slow_waits_for_fast(key: str) -> None:
        if key == "slow":
            fast = await wait_until(lambda: _status(store, "fast", "completed"))
            assert fast, "the fast child never completed while the slow one was in flight"

    model = TreeModel({ROOT: [delegate(brief("slow"), brief("fast"))]}, hold=slow_waits_for_fast)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config(**PARALLEL))
    assert result.status == "completed"
    assert model.finished == ["fast", "slow"]  # finish order is reversed ...
    joined = next(m.text for m in result.messages if m.tool_name == "agent")
    assert joined.index("report of slow") < joined.index("report of fast")  # ... the joined result is not
    slow, fast = await trace_by_objective(store, "slow"), await trace_by_objective(store, "fast")
    assert joined.index(slow.trace_id) < joined.index(fast.trace_id)
    assert slow.trace_id.endswith("-001") and fast.trace_id.endswith("-002")


async def _status(store, objective: str, status: str) -> bool:
    try:
        return (await trace_by_objective(store, objective)).status == status
    except AssertionError:
        return False


async def test_deeper_batches_follow_the_roots_frozen_schedule():
    plan = {ROOT: [delegate(brief("mid"))], "mid": [delegate(brief("x"), brief("y"), brief("z"))]}
    model = TreeModel(plan)
    model.hold = gate(model, 3)
    runner, _ = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config(**PARALLEL))
    assert result.status == "completed"
    assert model.max_in_flight == 2  # "mid" waits in its agent tool, outside any model call
    assert model.calls["x"] == model.calls["y"] == model.calls["z"] == 1


async def test_legacy_ignores_the_scheduling_fields_and_runs_the_whole_batch_in_parallel():
    model = TreeModel({ROOT: [call("agent", task=["a", "b", "c"])]})
    model.hold = gate(model, 3)
    runner, _ = make_runner(model.llm)
    config = RunConfig(agent_mode="legacy", child_execution_mode="sequential", max_parallel_children=1)
    result = await runner.run_result(TASK, config)
    assert result.status == "completed"
    assert model.max_in_flight == 3
    joined = next(m.text for m in result.messages if m.tool_name == "agent")
    assert joined.index("final answer of a") < joined.index("final answer of b") < joined.index("final answer of c")
