"""Issue 14 [loop-integrity], limit items: every limit a reply can overrun is checked before its
tools run, caps apply per call, a run's caps hold for its whole tree, unpriced usage fails closed."""

from __future__ import annotations

import json
from datetime import timedelta

from recursive_helpers import (
    ROOT,
    TASK,
    TreeModel,
    all_traces,
    brief,
    call,
    calls,
    clean_agent_env,  # noqa: F401  (autouse fixture)
    delegate,
    make_runner,
    recursive_config,
    usage_of,
)

from cyber_agent.core.config import RunConfig
from cyber_agent.core.hooks import SideEffectRateHook, UsdBudgetHook
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.llm.pricing import PRICES_ENV
from cyber_agent.llm.types import LLMResponse, ToolCall, Usage
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.models import utc_now

WORK = [{"role": "user", "content": "work"}]


def poke_registry(log: list[str]) -> ToolRegistry:
    reg = ToolRegistry()

    def poke(n: int) -> str:
        """A side-effecting tool."""
        log.append(f"poke {n}")
        return "poked"

    reg.register(poke, side_effects=True)
    return reg


def answers_every_call(messages) -> None:
    """Each assistant tool call has exactly one result, right after it, in order."""
    for i, message in enumerate(messages):
        if message.role == "assistant" and message.tool_calls:
            ids = [c.id for c in message.tool_calls]
            results = [m.tool_call_id for m in messages[i + 1: i + 1 + len(ids)]]
            assert results == ids, (ids, results)


# -- 1. a reply that overran a limit never has its tools run ------------------------------------------


async def test_a_reply_arriving_after_the_duration_limit_never_runs_its_tools():
    async def age_the_tree(key, messages, names):
        # The call was reserved in time; the reply arrives after AGENT_MAX_DURATION_SECONDS passed.
        root = [t for t in await store.list_traces(limit=None) if t.parent_trace_id is None][0]
        usage = await usage_of(store, root.trace_id)
        usage["started_at"] = (utc_now() - timedelta(hours=2)).isoformat()
        await store.replace_resource_usage(root.trace_id, usage)

    model = TreeModel({ROOT: [call("goal", add="never added")]}, on_call=age_the_tree)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "failed" and "duration_seconds" in result.trace.error_message
    assert len((await store.get_goal_tree(result.trace.trace_id)).goals) == 1  # the goal call never ran
    last = result.messages[-1]
    assert last.role == "tool" and last.content.startswith("not run: budget exceeded (duration_seconds")
    answers_every_call(result.messages)


async def test_a_reply_overrunning_the_usd_hook_never_runs_its_tools():
    log: list[str] = []
    replies = [ScriptedModel.tool_call("poke", {"n": i}, call_id=f"c{i}", cost=0.6) for i in range(2)]
    with ScriptedModel(replies) as model:
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, tool_registry=poke_registry(log),
                             stop_hooks=[UsdBudgetHook(1.0)])
        result = await runner.run_result(WORK, RunConfig())
    assert result.status == "stopped" and "usd_budget" in result.trace.error_message
    assert log == ["poke 0"]  # the second reply ($1.20 in total) overran the cap: its poke never ran
    assert result.messages[-1].content.startswith("not run: stop hook usd_budget")
    answers_every_call(result.messages)


# -- 2. caps apply per call ---------------------------------------------------------------------------


async def test_the_actions_per_hour_cap_is_checked_before_each_call():
    log: list[str] = []
    five = ScriptedModel.tool_calls(*[("poke", {"n": i}, f"c{i}") for i in range(5)])
    with ScriptedModel([five]) as model:
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, tool_registry=poke_registry(log),
                             stop_hooks=[SideEffectRateHook(2)])
        result = await runner.run_result(WORK, RunConfig())
    assert log == ["poke 0", "poke 1"]
    assert result.status == "stopped" and "side_effects_per_hour" in result.trace.error_message
    tools = [m for m in result.messages if m.role == "tool"]
    assert [m.metadata["is_error"] for m in tools] == [False, False, True, True, True]
    assert all("reached the cap of 2" in m.content and m.content.startswith("not run:") for m in tools[2:])
    answers_every_call(result.messages)


# -- 3. a run's caps hold for its tree ----------------------------------------------------------------


async def test_the_usd_hook_holds_for_recursive_children():
    model = TreeModel({ROOT: [delegate(brief("a"), brief("b"), brief("c"))]}, cost=0.01)
    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=model.llm, stop_hooks=[UsdBudgetHook(0.025)])
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "stopped" and "usd_budget" in result.trace.error_message
    children = [t for t in await all_traces(store) if t.parent_trace_id is not None and not t.is_validator]
    assert len(children) == 3
    # Each child alone spent $0.01 (< $0.025): only the tree's sum ($0.03 once two children
    # answered) stops the others, before their report ran.
    stopped = [t for t in children if t.status == "stopped"]
    assert len(stopped) >= 2 and all("usd_budget" in (t.error_message or "") for t in stopped)


async def test_the_usd_hook_holds_for_legacy_sub_agents():
    model = TreeModel({"work": [call("agent", task=["a", "b", "c"])]}, cost=0.01)
    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=model.llm, stop_hooks=[UsdBudgetHook(0.025)])
    result = await runner.run_result(WORK, RunConfig())
    assert result.status == "stopped" and "usd_budget" in result.trace.error_message
    subs = [t for t in await all_traces(store) if t.parent_trace_id is not None]
    stopped = [t for t in subs if t.status == "stopped"]
    # Each sub-agent alone spent $0.01: the tree's sum stops the later ones and the root's next turn
    # (without the fix all three answer and the root completes with a fifth call).
    assert len(subs) == 3 and len(stopped) >= 2 and all("usd_budget" in (t.error_message or "") for t in stopped)
    assert model.calls["work"] == 1


# -- 4. unpriced usage fails closed -------------------------------------------------------------------

UNPRICED = Usage(prompt_tokens=1000, completion_tokens=500)


def unpriced_poke() -> LLMResponse:
    return LLMResponse(content="", model="house-model-5", usage=UNPRICED,
                       tool_calls=[ToolCall(id="c0", name="poke", arguments={"n": 0})])


async def test_unpriced_usage_is_flagged_and_fails_the_usd_hook_closed():
    log: list[str] = []
    with ScriptedModel([unpriced_poke()]) as model:
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, tool_registry=poke_registry(log),
                             stop_hooks=[UsdBudgetHook(1.0)])
        result = await runner.run_result(WORK, RunConfig(model="house-model-5"))
    assistant = next(m for m in result.messages if m.role == "assistant")
    assert assistant.metadata["cost_unpriced"] is True and assistant.cost == 0.0
    assert result.trace.cost_unpriced is True and result.trace.unpriced_models == ["house-model-5"]
    assert "cost_unpriced" not in result.trace.context  # runner state never lands in the user's context
    assert result.status == "stopped" and log == []
    assert "house-model-5" in result.trace.error_message and PRICES_ENV in result.trace.error_message
    answers_every_call(result.messages)


async def test_a_user_price_file_prices_the_model(tmp_path, monkeypatch):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"house-model-5": {"input": 1.25, "cached_input": 0.125, "output": 10.0}}))
    monkeypatch.setenv(PRICES_ENV, str(prices))
    log: list[str] = []
    with ScriptedModel([unpriced_poke(), "done"]) as model:
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, tool_registry=poke_registry(log),
                             stop_hooks=[UsdBudgetHook(1.0)])
        result = await runner.run_result(WORK, RunConfig(model="house-model-5"))
    assistant = next(m for m in result.messages if m.role == "assistant")
    assert "cost_unpriced" not in assistant.metadata and not result.trace.cost_unpriced
    assert abs(assistant.cost - (1000 * 1.25 + 500 * 10.0) / 1e6) < 1e-12
    assert result.status == "completed" and log == ["poke 0"]


async def test_unpriced_usage_fails_the_tree_budget_closed():
    reply = calls(("goal", {"add": "never added"}))
    reply = reply.model_copy(update={"usage": UNPRICED, "model": "house-model-pro"})
    model = TreeModel({ROOT: [reply]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "failed" and PRICES_ENV in result.trace.error_message
    assert len((await store.get_goal_tree(result.trace.trace_id)).goals) == 1
    assert (await usage_of(store, result.trace.trace_id))["unpriced_calls"] == 1
    answers_every_call(result.messages)
