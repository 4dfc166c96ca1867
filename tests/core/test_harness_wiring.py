"""The harness inside the runner: result budget, summarizer, compaction, dialects, archetypes."""

from __future__ import annotations

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fakes import FunctionModel, ScriptedModel
from cyber_agent.llm.types import LLMResponse
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore

TASK = [{"role": "user", "content": "dump the logs"}]


def registry() -> ToolRegistry:
    reg = ToolRegistry()

    def dump(size: int) -> str:
        """Return a huge text."""
        return "x" * size

    reg.register(dump)
    return reg


async def test_a_5mb_tool_result_never_reaches_the_model_whole():
    seen: list[int] = []

    def model(messages, tools):
        seen.append(max(len(str(m.get("content") or "")) for m in messages))
        if len(seen) == 1:
            from cyber_agent.llm.types import ToolCall

            return LLMResponse(tool_calls=[ToolCall(id="c1", name="dump", arguments={"size": 5_000_000})])
        return LLMResponse(content="done")

    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=FunctionModel(model), tool_registry=registry())
    result = await runner.run_result(TASK, RunConfig(summarize_tool_results=False))
    assert result.status == "completed"
    assert seen[1] <= 16_384
    tool_message = [m for m in result.messages if m.role == "tool"][0]
    assert "truncated" in tool_message.text.lower() and tool_message.metadata["payload"]["path"] == "truncated"


async def test_oversized_results_are_summarized_and_the_summary_call_is_costed():
    replies = [
        ScriptedModel.tool_call("dump", {"size": 60_000}, call_id="c1"),
        ScriptedModel.text("short summary of the xs", cost=0.01),  # the payload summarizer's call
        ScriptedModel.text("done", cost=0.02),
    ]
    store = InMemoryTraceStore()
    with ScriptedModel(replies) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry())
        result = await runner.run_result(TASK, RunConfig())
    assert "short summary of the xs" in model.requests[2].messages[-1]["content"]
    assert model.requests[1].messages[0]["content"].startswith("You are the summarizer")
    assert abs(result.trace.total_cost - 0.03) < 1e-9  # the summary call reached the trace totals
    everything = await store.get_trace_messages(result.trace.trace_id)
    assert [m.branch for m in everything if m.branch] == ["summarizer"]


async def test_the_context_guard_compacts_near_the_window_and_records_it():
    replies = [ScriptedModel.tool_call("dump", {"size": 9_000}, call_id=f"c{i}") for i in range(6)] + ["done"]
    store = InMemoryTraceStore()
    with ScriptedModel(replies) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry())
        result = await runner.run_result(TASK, RunConfig(context_window=12_000, summarize_tool_results=False))
    assert result.status == "completed"
    events = [e for e in await store.get_events(result.trace.trace_id) if e.type == "compaction"]
    assert events
    last = model.requests[-1].messages
    assert last[0] == model.requests[0].messages[0]  # the system prompt stays byte-identical
    assert sum(len(str(m.get("content") or "")) for m in last) < 6 * 9_000


async def test_an_xml_dialect_run_goes_through_the_same_loop():
    def model(messages, tools):
        assert tools is None  # the XML dialect describes tools in the prompt instead
        assert "<tool_call>" in messages[0]["content"]
        if not any(m["role"] != "system" and "dump" in str(m.get("content")) for m in messages[2:]):
            return LLMResponse(content='Let me look.\n<tool_call>{"name": "dump", "arguments": {"size": 3}}</tool_call>')
        return LLMResponse(content="it was xxx")

    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=FunctionModel(model), tool_registry=registry())
    result = await runner.run_result(TASK, RunConfig(tool_dialect="xml"))
    assert result.answer == "it was xxx"
    tool_message = [m for m in result.messages if m.role == "tool"][0]
    assert tool_message.text == "xxx" and tool_message.tool_name == "dump"


async def test_an_archetype_fills_prompt_and_limits():
    with ScriptedModel(["planned"]) as model:
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, tool_registry=registry())
        result = await runner.run_result(TASK, RunConfig(agent_type="planner"))
    definition = runner.archetypes.get("planner")
    assert model.requests[0].messages[0]["content"].startswith(definition.prompt.strip()[:40])
    assert result.trace.agent_type == "planner"
