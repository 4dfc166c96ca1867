"""Stop hooks, post-turn hooks, live progress and the interrupt fence (H6, H8, H9)."""

from __future__ import annotations

import json

from cyber_agent.core.config import RunConfig
from cyber_agent.core.hooks import CostLogHook, MaxIterationsHook, SideEffectRateHook, UsdBudgetHook
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fakes import FunctionModel, ScriptedModel
from cyber_agent.llm.types import LLMResponse, ToolCall
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore

TASK = [{"role": "user", "content": "work"}]


def registry(log: list[str]) -> ToolRegistry:
    reg = ToolRegistry()

    def poke(n: int) -> str:
        """A side-effecting tool."""
        log.append(f"poke {n}")
        return "poked"

    def peek() -> str:
        """A read-only tool."""
        return "seen"

    reg.register(poke, side_effects=True)
    reg.register(peek)
    return reg


def pokes(n: int, cost: float = 0.0) -> list:
    return [ScriptedModel.tool_call("poke", {"n": i}, call_id=f"c{i}", cost=cost) for i in range(n)]


async def test_usd_budget_hook_stops_the_run_with_its_name_and_reason():
    with ScriptedModel(pokes(2, cost=0.6)) as model:
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, tool_registry=registry([]),
                             stop_hooks=[UsdBudgetHook(1.0)])
        result = await runner.run_result(TASK, RunConfig())
    assert result.status == "stopped"
    assert result.trace.error_message.startswith("stop hook usd_budget: cost $1.2000 reached the budget")


async def test_max_iterations_hook():
    with ScriptedModel(pokes(2)) as model:
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, tool_registry=registry([]),
                             stop_hooks=[MaxIterationsHook(2)])
        result = await runner.run_result(TASK, RunConfig(max_iterations=10))
    assert result.trace.error_message.startswith("stop hook max_iterations:")


async def test_side_effect_rate_is_a_sliding_hour_shared_across_runs():
    now = [0.0]
    hook = SideEffectRateHook(3, clock=lambda: now[0])
    log: list[str] = []
    store = InMemoryTraceStore()
    with ScriptedModel(pokes(3)) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry(log), stop_hooks=[hook])
        first = await runner.run_result(TASK, RunConfig())
    assert first.status == "stopped" and "side_effects_per_hour" in first.trace.error_message
    assert len(log) == 3
    now[0] = 3601.0  # an hour later the window has slid past the three calls
    with ScriptedModel(["fine"]) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry(log), stop_hooks=[hook])
        second = await runner.run_result(TASK, RunConfig())
    assert second.status == "completed"


async def test_post_turn_hooks_get_a_snapshot_and_a_failing_hook_never_fails_the_run(tmp_path):
    class Broken:
        name = "broken"

        async def after_turn(self, snapshot):
            raise RuntimeError("hook bug")

    log_path = tmp_path / "cost.jsonl"
    store = InMemoryTraceStore()
    with ScriptedModel([*pokes(1, cost=0.25), ScriptedModel.text("ok", cost=0.25)]) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry([]),
                             post_turn_hooks=[Broken(), CostLogHook(log_path)])
        result = await runner.run_result(TASK, RunConfig())
        assert await runner.drain_hooks() == 0  # hooks run in the background: wait for them before reading
    assert result.status == "completed"
    row = json.loads(log_path.read_text().splitlines()[0])
    assert row["iterations"] == 2 and row["tool_calls"] == ["poke"] and abs(row["cost_usd"] - 0.5) < 1e-9
    events = [e.payload for e in await store.get_events(result.trace.trace_id)
              if e.type == "progress" and "post_turn_hook" in e.payload]  # not the tool-start records
    assert events == [{"post_turn_hook": "broken", "error": "RuntimeError: hook bug"}]


async def test_progress_events_stream_deltas_tools_and_cost():
    seen = []
    with ScriptedModel([*pokes(1, cost=0.1), "the answer"]) as model:
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, tool_registry=registry([]),
                             on_progress=seen.append)
        await runner.run_result(TASK, RunConfig())
    kinds = [e.kind for e in seen]
    assert kinds == ["iteration", "cost", "tool_started", "tool_finished", "iteration", "text_delta", "cost"]
    assert seen[5].data == {"text": "the answer"}


async def test_interrupt_fence_halts_the_whole_tree_in_legacy_too():
    log: list[str] = []
    holder: dict[str, AgentRunner] = {}

    def model(messages, tools):
        names = {t["function"]["name"] for t in tools or []}
        if "agent" in names and not any(m["role"] == "tool" for m in messages):
            return LLMResponse(tool_calls=[ToolCall(id="a", name="agent", arguments={"task": "child work"})])
        if "agent" not in names:  # the child: trip the fence from inside the tree, then ask for a tool
            runner = holder["r"]
            runner.interrupt(runner.running()[0], "user pressed interrupt")
            return LLMResponse(tool_calls=[ToolCall(id="p", name="poke", arguments={"n": 1})])
        return LLMResponse(content="parent went on")

    from cyber_agent.protocol.agent_tool import register_agent_tool

    reg = register_agent_tool(registry(log))
    runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=FunctionModel(model), tool_registry=reg)
    holder["r"] = runner
    result = await runner.run_result(TASK, RunConfig())
    assert log == []  # the child's tool call never ran
    assert result.status == "stopped" and result.trace.error_message == "interrupt: user pressed interrupt"
