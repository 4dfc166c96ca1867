"""Failures you can see: the stop reason and the refusal behind it on RunResult, the handle and budget_frame;
goals of failed or stopped traces; one definition of "agents" in progress, budget and usage over time."""

from __future__ import annotations

import asyncio

import pytest

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.llm.fakes import FunctionModel
from cyber_agent.llm.types import LLMResponse, ToolCall, Usage
from cyber_agent.notebook import budget_frame, launch, run_sync, to_frames, usage_over_time
from cyber_agent.trace import InMemoryTraceStore

from nb_helpers import CHILD, REPO, ROOT, add_trace

QUOTA = "child quota: this agent has created 0 of 6 direct children; a batch of 20 would exceed it"


def _greedy_planner(messages, tools):
    """A root that asks for 20 children on every turn (the recursive child quota is 6)."""
    briefs = [{"objective": f"part {i}", "completion_criteria": ["done"]} for i in range(20)]
    return LLMResponse(content="", tool_calls=[ToolCall(id=f"c{len(messages)}", name="agent", arguments={"task_brief": briefs})],
                       usage=Usage(prompt_tokens=10, completion_tokens=5))


@pytest.fixture(scope="module")
def refused_run():
    handle = run_sync(launch("split the work", mode="recursive", llm_call=FunctionModel(_greedy_planner, cost=0.001),
                             max_iterations=3, root_task_anchor=DEMO_ANCHOR, workspace=REPO, progress=False))
    return handle, handle.wait(timeout=60)


def test_run_result_names_the_stop_reason_and_the_refusal_behind_it(refused_run):
    _, result = refused_run
    assert result.status == "stopped" and result.answer is None
    assert result.reason == "max_iterations (3) reached without a final answer"
    assert result.refusal.startswith(QUOTA)
    assert "reason='max_iterations (3)" in repr(result) and "answer=" not in repr(result)


def test_the_handle_shows_reason_and_refusal(refused_run):
    handle, _ = refused_run
    text = handle.to_text()
    assert "  reason: max_iterations (3) reached without a final answer" in text
    assert "  refusal: " + QUOTA in text
    html = handle.to_html()
    assert "<td style=\"text-align:left;padding:2px 10px\">refusal</td>" in html and "child quota: this agent" in html


def test_budget_frame_has_the_child_quota_row_and_the_refusal(refused_run):
    handle, _ = refused_run
    frame = budget_frame(handle.store, handle.trace_id)
    children = frame.loc["children"]
    assert children["used"] == 0 and children["limit"] == 6 and children["unit"] == "children"
    assert children["refusal"].startswith(QUOTA)
    assert frame.drop(index="children")["refusal"].isna().all()
    assert frame.attrs["stop_reason"] == "max_iterations (3) reached without a final answer"
    assert frame.attrs["refusal"].startswith(QUOTA) and frame.attrs["refused_calls"] == 3


def test_frames_flag_refused_calls(refused_run):
    handle, _ = refused_run
    frames = to_frames(handle.store, handle.trace_id)
    tools = frames.messages[frames.messages["message_role"] == "tool"]
    assert list(tools["refused"]) == ["children"] * 3
    assert frames.messages.loc[frames.messages["message_role"] != "tool", "refused"].isna().all()
    assert list(frames.tool_calls["refused"]) == ["children"] * 3
    assert frames.traces.loc[0, "refusal"].startswith(QUOTA)


def test_a_legacy_tree_has_no_child_quota_and_no_refusal(demo_store, demo_root):
    frame = budget_frame(demo_store, demo_root)
    assert frame.loc["children", "used"] == 4  # the main agent's four explore agents
    assert frame["limit"].isna().all() and frame["refusal"].isna().all()
    assert frame.attrs["stop_reason"] is None and frame.attrs["refusal"] is None
    assert to_frames(demo_store, demo_root).traces["refusal"].isna().all()


def test_goals_left_open_by_a_stopped_or_failed_trace_take_its_status():
    store = InMemoryTraceStore()

    async def build() -> None:
        await add_trace(store, ROOT, status="completed")
        await store.update_goal(ROOT, "1", status="completed")
        await add_trace(store, CHILD, parent=ROOT, agent_type="delegate", status="stopped")

    asyncio.run(build())
    goals = to_frames(store).goals.set_index("trace_id")
    assert goals.loc[ROOT, ["status", "trace_status", "effective_status"]].tolist() == ["completed"] * 3
    assert goals.loc[CHILD, ["status", "trace_status", "effective_status"]].tolist() == ["pending", "stopped", "stopped"]


def test_agents_mean_the_same_in_progress_budget_and_usage_over_time(tmp_path):
    handle = run_sync(launch(DEMO_TASK, mode="recursive", store=tmp_path, workspace=REPO, root_task_anchor=DEMO_ANCHOR,
                             progress=False))
    assert handle.wait(timeout=120).status == "completed"
    traces = to_frames(tmp_path, handle.trace_id).traces
    agents, validators = int((~traces["is_validator"]).sum()), int(traces["is_validator"].sum())
    assert validators > 0 and agents > 1
    assert handle.snapshot.agents == agents and handle.snapshot.validators == validators
    assert budget_frame(tmp_path, handle.trace_id).loc["agents", "used"] == agents
    assert usage_over_time(tmp_path, handle.trace_id)["cumulative_agents"].iloc[-1] == agents
    assert f"{agents} agents + {validators} validators" in handle.snapshot.to_text()
