"""A side branch (reflection) on a recursive trace is never protocol work (SPEC T9, A5).

Its final text is not a TaskReport and not a candidate answer: it runs no validator, leaves the
report, validations and reviews as they were, and protocol tools are withheld on the branch.
"""

from __future__ import annotations

from recursive_helpers import (  # noqa: F401 - clean_agent_env is an autouse fixture
    ROOT,
    TASK,
    TreeModel,
    clean_agent_env,
    delegate,
    brief,
    make_runner,
    recursive_config,
    trace_by_objective,
)

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.trace import Trace


async def _tree():
    model = TreeModel({ROOT: [delegate(brief("A"))]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed", result.trace.error_message
    return store, result.trace, await trace_by_objective(store, "A")


async def _reflect(store, trace: Trace, lesson: str):
    with ScriptedModel([lesson]) as model:
        runner = AgentRunner(trace_store=store, llm_call=model)
        side = await runner.run_result([{"role": "user", "content": "# Reflection\nWhat did you learn?"}],
                                       RunConfig(trace_id=trace.trace_id, side_branch="reflection"))
    return side, model


async def _validators_of(store, trace_id: str) -> list[Trace]:
    return await store.list_traces(parent_trace_id=trace_id, created_by_tool="validator")


async def test_a_reflection_on_a_child_leaves_its_report_and_validations_unchanged():
    store, _, child = await _tree()
    before = await _validators_of(store, child.trace_id)
    side, model = await _reflect(store, child, "- check the totals twice")
    after = await store.get_trace(child.trace_id)
    assert side.answer == "- check the totals twice"
    assert after.protocol == child.protocol  # report, validations, review: as they were
    assert after.protocol.report is not None and after.protocol.report.summary != side.answer
    assert after.status == child.status and after.result_summary == child.result_summary
    assert after.side_branches["reflection"].answer == "- check the totals twice"
    assert await _validators_of(store, child.trace_id) == before
    offered = set(model.requests[0].tool_names)
    assert not offered & {"submit_report", "agent", "review_task", "submit_validation"}


async def test_a_reflection_on_a_root_runs_no_validator_and_records_its_answer():
    store, root, _ = await _tree()
    before = await _validators_of(store, root.trace_id)
    side, _ = await _reflect(store, root, "- delegate less")
    after = await store.get_trace(root.trace_id)
    assert side.answer == "- delegate less"
    assert await _validators_of(store, root.trace_id) == before  # no root validator ran on the lesson
    assert after.protocol.validations == root.protocol.validations
    assert after.result_summary == root.result_summary and after.status == "completed"
    assert after.side_branches["reflection"].status == "completed"
