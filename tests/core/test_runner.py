"""AgentRunner loop: answers, tools, errors the model sees, limits, continue, rewind, stop."""

from __future__ import annotations

import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.fakes import FunctionModel, ScriptedModel
from cyber_agent.llm.types import LLMResponse, ToolCall, Usage
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore

TASK = [{"role": "user", "content": "add two numbers"}]


def make_registry() -> ToolRegistry:
    registry = ToolRegistry()

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def secret() -> str:
        """A tool that is registered but not exposed in the tests that narrow tools."""
        raise AssertionError("must never run")

    registry.register(add)
    registry.register(secret)
    return registry


def make_runner(model, store=None) -> tuple[AgentRunner, InMemoryTraceStore]:
    store = store or InMemoryTraceStore()
    return AgentRunner(trace_store=store, llm_call=model, tool_registry=make_registry()), store


async def test_text_answer_completes_the_trace_and_its_root_goal():
    with ScriptedModel(["4"]) as model:
        runner, store = make_runner(model)
        result = await runner.run_result(TASK, RunConfig())
    assert result.status == "completed"
    assert result.answer == "4"
    assert [m.role for m in result.messages] == ["system", "user", "assistant"]
    tree = await store.get_goal_tree(result.trace.trace_id)
    assert tree.goals[0].description == "add two numbers"
    assert tree.goals[0].status == "completed"
    events = [e.type for e in await store.get_events(result.trace.trace_id)]
    assert events[-1] == "trace_completed"


async def test_tool_results_reach_the_model_and_system_prompt_is_reused_byte_for_byte():
    with ScriptedModel([ScriptedModel.tool_call("add", {"a": 2, "b": 3}, call_id="c1"), "5"]) as model:
        runner, store = make_runner(model)
        result = await runner.run_result(TASK, RunConfig())
    second = model.requests[1].messages
    assert second[-1] == {"role": "tool", "tool_call_id": "c1", "content": "5"}
    assert model.requests[0].messages[0] == second[0]
    assert second[0]["role"] == "system"
    tool_msg = [m for m in result.messages if m.role == "tool"][0]
    assert tool_msg.tool_name == "add" and tool_msg.description == "add"
    assert tool_msg.metadata["is_error"] is False


async def test_unknown_or_unexposed_tool_gets_an_error_result_and_the_run_goes_on():
    replies = [ScriptedModel.tool_call("nope", {}, call_id="c1"), ScriptedModel.tool_call("secret", {}, call_id="c2"), "ok"]
    with ScriptedModel(replies) as model:
        runner, _ = make_runner(model)
        result = await runner.run_result(TASK, RunConfig(tools=["add"]))
    errors = [m for m in result.messages if m.role == "tool"]
    assert all(m.metadata["is_error"] for m in errors)
    assert "nope" in errors[0].text and "secret" in errors[1].text
    assert result.status == "completed"
    # The narrowed tool list is what the model saw.
    assert [t["function"]["name"] for t in model.requests[0].tools] == ["add"]


async def test_malformed_tool_arguments_come_back_as_a_tool_error():
    with ScriptedModel([ScriptedModel.tool_call("add", '{"a": 1, "b":', call_id="c1"), "sorry"]) as model:
        runner, _ = make_runner(model)
        result = await runner.run_result(TASK, RunConfig())
    tool_msg = [m for m in result.messages if m.role == "tool"][0]
    assert tool_msg.metadata["is_error"] and "JSON" in tool_msg.text
    assert result.status == "completed"


async def test_validation_errors_go_back_to_the_model():
    with ScriptedModel([ScriptedModel.tool_call("add", {"a": "x", "b": 1}, call_id="c1"), "sorry"]) as model:
        runner, _ = make_runner(model)
        result = await runner.run_result(TASK, RunConfig())
    tool_msg = [m for m in result.messages if m.role == "tool"][0]
    assert tool_msg.metadata["is_error"] and "a" in tool_msg.text


async def test_max_iterations_stops_with_a_reason():
    replies = [ScriptedModel.tool_call("add", {"a": i, "b": 1}, call_id=f"c{i}") for i in range(3)]
    with ScriptedModel(replies) as model:
        runner, _ = make_runner(model)
        result = await runner.run_result(TASK, RunConfig(max_iterations=3))
    assert result.status == "stopped"
    assert "max_iterations (3)" in result.trace.error_message
    assert result.answer is None


async def test_usage_and_cost_land_on_messages_and_trace():
    reply = LLMResponse(content="done", usage=Usage(prompt_tokens=100, completion_tokens=20, cached_tokens=40), cost=0.5)
    with ScriptedModel([reply]) as model:
        runner, _ = make_runner(model)
        result = await runner.run_result(TASK, RunConfig())
    assistant = result.messages[-1]
    assert (assistant.prompt_tokens, assistant.completion_tokens, assistant.cached_tokens) == (100, 20, 40)
    assert result.trace.total_tokens == 120 and result.trace.total_cost == pytest.approx(0.5)
    assert result.trace.total_cached_tokens == 40


def test_bad_configuration_is_refused_naming_the_setting():
    with pytest.raises(ValueError, match="max_iterations"):
        RunConfig(max_iterations=-1)
    with pytest.raises(ValueError, match="temperature"):
        RunConfig(temperature=7)


async def test_unknown_model_prefix_fails_before_any_call_or_trace():
    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, tool_registry=make_registry())
    with pytest.raises(ConfigurationError, match="model"):
        await runner.run_result(TASK, RunConfig(model="nosuch:thing"))
    assert await store.list_traces() == []


async def test_missing_api_key_fails_before_any_call(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, tool_registry=make_registry())
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        await runner.run_result(TASK, RunConfig(model="openai:gpt-4o-mini"))
    assert await store.list_traces() == []


async def test_custom_context_cannot_override_runner_owned_fields():
    with ScriptedModel(["ok"]) as model:
        runner, _ = make_runner(model)
        config = RunConfig(context={"agent_depth": 4, "agent_mode": "recursive", "note": "kept"})
        result = await runner.run_result(TASK, config)
    trace = result.trace
    assert trace.context == {"note": "kept"}  # runner keys never land in the user's context
    assert trace.lineage.depth == 0 and trace.lineage.mode == "legacy"
    assert trace.lineage.root_trace_id == trace.trace_id
    snapshot = trace.run_config
    assert snapshot is not None and snapshot.config["model"] == "demo" and len(snapshot.hash) == 64


async def test_continue_appends_to_the_same_trace_with_full_history():
    with ScriptedModel(["first", "second"]) as model:
        runner, store = make_runner(model)
        first = await runner.run_result(TASK, RunConfig())
        second = await runner.run_result(
            [{"role": "user", "content": "and again"}], RunConfig(trace_id=first.trace.trace_id)
        )
    assert second.trace.trace_id == first.trace.trace_id
    assert second.answer == "second"
    sent = model.requests[1].messages
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert second.trace.total_messages == 5


async def test_rewind_moves_the_head_and_deletes_nothing():
    with ScriptedModel(["first", "rewritten"]) as model:
        runner, store = make_runner(model)
        first = await runner.run_result(TASK, RunConfig())
        trace_id = first.trace.trace_id
        user_seq = first.messages[1].sequence
        second = await runner.run_result([], RunConfig(trace_id=trace_id, after_sequence=user_seq))
    assert second.answer == "rewritten"
    everything = await store.get_trace_messages(trace_id)
    assert [m.text for m in everything if m.role == "assistant"] == ["first", "rewritten"]
    path = await store.get_main_path_messages(trace_id, second.trace.head_sequence)
    assert [m.text for m in path if m.role == "assistant"] == ["rewritten"]
    assert "rewind" in [e.type for e in await store.get_events(trace_id)]


async def test_rewind_to_a_message_off_the_main_path_is_refused():
    with ScriptedModel(["first"]) as model:
        runner, _ = make_runner(model)
        first = await runner.run_result(TASK, RunConfig())
    with pytest.raises(ConfigurationError, match="after_sequence"):
        await runner.run_result([], RunConfig(trace_id=first.trace.trace_id, after_sequence=99))


async def test_stop_during_a_model_call_keeps_the_response_but_runs_no_tool():
    ran: list[int] = []
    registry = ToolRegistry()

    def work() -> str:
        """Do work."""
        ran.append(1)
        return "worked"

    registry.register(work)
    store = InMemoryTraceStore()
    holder: dict[str, AgentRunner] = {}

    def model(messages, tools):
        (trace_id,) = holder["runner"].running()
        holder["runner"].stop(trace_id, "user pressed stop")
        return LLMResponse(content="", tool_calls=[ToolCall(id="c1", name="work", arguments={})])

    runner = AgentRunner(trace_store=store, llm_call=FunctionModel(model), tool_registry=registry)
    holder["runner"] = runner
    result = await runner.run_result(TASK, RunConfig())
    assert result.status == "stopped" and result.trace.error_message == "user pressed stop"
    assert ran == []
    assert result.messages[-1].role == "assistant" and result.messages[-1].tool_calls[0].name == "work"
    # Continuing later closes the cut turn so the history stays valid for providers.
    with ScriptedModel(["resumed"]) as follow_up:
        runner2 = AgentRunner(trace_store=store, llm_call=follow_up, tool_registry=registry)
        resumed = await runner2.run_result([], RunConfig(trace_id=result.trace.trace_id))
    assert resumed.answer == "resumed"
    sent = follow_up.requests[0].messages
    assert sent[-1]["role"] == "tool" and "not executed" in sent[-1]["content"]
    assert ran == []


class CountingStore(InMemoryTraceStore):
    """Counts history reads, to show the loop never re-reads the history."""

    def __init__(self) -> None:
        super().__init__()
        self.history_reads = 0

    async def get_main_path_messages(self, trace_id, head_sequence):
        self.history_reads += 1
        return await super().get_main_path_messages(trace_id, head_sequence)

    async def get_trace_messages(self, trace_id):
        self.history_reads += 1
        return await super().get_trace_messages(trace_id)


async def test_the_loop_never_rereads_history_from_the_store():
    replies = [ScriptedModel.tool_call("add", {"a": i, "b": 1}, call_id=f"c{i}") for i in range(25)] + ["done"]
    store = CountingStore()
    with ScriptedModel(replies) as model:
        runner, _ = make_runner(model, store)
        result = await runner.run_result(TASK, RunConfig(max_iterations=30))
    assert result.status == "completed"
    assert store.history_reads == 0
    # Continuing reads the main path exactly once.
    with ScriptedModel(["again"]) as model:
        runner, _ = make_runner(model, store)
        await runner.run_result([{"role": "user", "content": "more"}], RunConfig(trace_id=result.trace.trace_id))
    assert store.history_reads == 1
