"""ScriptedModel and FunctionModel: replies, request recording, over-call and unused replies."""

from __future__ import annotations

import pytest

from cyber_agent.errors import LLMTransportError, ScriptExhaustedError
from cyber_agent.llm import FunctionModel, LLMCall, LLMResponse, ScriptedModel, ToolCall, Usage

USER = [{"role": "user", "content": "hi"}]


async def test_plays_replies_in_order_and_records_each_request():
    model = ScriptedModel([
        ScriptedModel.tool_call("search", {"q": "cats"}),
        "Cats are mammals.",
    ])
    assert isinstance(model, LLMCall)
    messages = list(USER)
    first = await model(messages, "fake-1", [{"type": "function", "function": {"name": "search"}}], 0.3)
    messages.append({"role": "assistant", "tool_calls": [first.tool_calls[0].to_openai()]})
    second = await model(messages, "fake-1")

    assert first.tool_calls == [ToolCall(id="call_0_0", name="search", arguments={"q": "cats"})]
    assert first.finish_reason == "tool_calls" and first.model == "fake-1"
    assert second.content == "Cats are mammals." and second.finish_reason == "stop"
    assert [len(r.messages) for r in model.requests] == [1, 2]  # snapshots, not the live list
    assert model.requests[0].tool_names == ["search"] and model.requests[0].temperature == 0.3
    assert model.requests[1].last_message["role"] == "assistant"
    model.assert_all_used()


async def test_over_call_raises_a_clear_error_and_is_recorded():
    model = ScriptedModel(["only"])
    await model(USER, "m")
    with pytest.raises(ScriptExhaustedError, match="called 2 times but holds 1 replies.*'user'.*'hi'"):
        await model(USER, "m")
    assert len(model.requests) == 2


async def test_unused_replies_are_reported_by_assert_and_by_the_context_manager():
    model = ScriptedModel(["a", ScriptedModel.tool_call("rm", {"path": "/"}), "c"])
    await model(USER, "m")
    with pytest.raises(AssertionError, match=r"left 2 of 3 replies unused after 1 call.*tool calls \['rm'\]"):
        model.assert_all_used()

    with pytest.raises(AssertionError, match="left 1 of 1"):
        with ScriptedModel(["never played"]):
            pass

    async with ScriptedModel(["x"]) as used:
        await used(USER, "m")


def test_context_manager_does_not_mask_the_real_failure():
    with pytest.raises(KeyError):
        with ScriptedModel(["unused"]):
            raise KeyError("the real bug")


async def test_pytest_fixture_builds_models(scripted_model):
    model = scripted_model(["one"])
    assert (await model(USER, "m")).content == "one"


async def test_exceptions_usage_cost_latency_and_deltas(sleeps):
    usage = Usage(prompt_tokens=100, completion_tokens=10)
    model = ScriptedModel(
        [LLMTransportError("provider down"), "plain", ScriptedModel.text("priced", cost=0.5,
                                                                           usage=Usage(prompt_tokens=1))],
        usage=usage, cost=0.01, latency=0.2, sleep=sleeps,
    )
    with pytest.raises(LLMTransportError, match="provider down"):
        await model(USER, "m")
    deltas: list[str] = []
    plain = await model(USER, "m", on_delta=deltas.append)
    priced = await model(USER, "m")
    assert deltas == ["plain"] and sleeps.delays == [0.2, 0.2, 0.2]
    assert (plain.usage, plain.cost, plain.cost_estimated) == (usage, 0.01, False)
    assert (priced.usage.prompt_tokens, priced.cost) == (1, 0.5)


async def test_default_cost_uses_the_price_table_for_the_requested_model():
    reply = await ScriptedModel(["x"], usage=Usage(prompt_tokens=1_000_000))(USER, "gpt-4o")
    assert reply.cost == pytest.approx(2.50) and reply.cost_estimated


async def test_tool_call_helpers_cover_parallel_calls_ids_and_malformed_json():
    model = ScriptedModel([
        ScriptedModel.tool_calls(("a", {"x": 1}), ("b", None, "fixed-id"), ToolCall(id="t", name="c")),
        ScriptedModel.tool_call("broken", "{\"x\": "),
        {"content": None, "tool_calls": [{"id": "d1", "function": {"name": "d", "arguments": "{}"}}]},
    ])
    parallel = await model(USER, "m")
    broken = await model(USER, "m")
    from_dict = await model(USER, "m")
    assert [(c.id, c.name, c.arguments) for c in parallel.tool_calls] == [
        ("call_0_0", "a", {"x": 1}), ("fixed-id", "b", {}), ("t", "c", {})]
    assert broken.tool_calls[0].parse_error and broken.tool_calls[0].raw_arguments == "{\"x\": "
    assert from_dict.tool_calls[0].name == "d" and from_dict.content == ""


async def test_function_model_sync_async_and_optional_info():
    seen: list[tuple] = []

    def sync_fn(messages, tools):
        seen.append((len(messages), tools))
        return "sync answer"

    async def async_fn(messages, tools, *, model, temperature):
        seen.append((model, temperature))
        return {"content": "", "tool_calls": [{"id": "1", "function": {"name": "go", "arguments": "{\"n\": 2}"}}]}

    def streaming_fn(messages, tools, on_delta):
        for piece in ("a", "b"):
            on_delta(piece)
        return LLMResponse(content="ab")

    assert (await FunctionModel(sync_fn)(USER, "m")).content == "sync answer"
    tool_reply = await FunctionModel(async_fn)(USER, "m-2", None, 0.7)
    assert tool_reply.tool_calls[0].arguments == {"n": 2} and tool_reply.finish_reason == "tool_calls"
    deltas: list[str] = []
    streamer = FunctionModel(streaming_fn)
    await streamer(USER, "m", on_delta=deltas.append)
    assert seen == [(1, None), ("m-2", 0.7)] and deltas == ["a", "b"]
    assert streamer.requests[0].messages == USER


async def test_function_model_cannot_mutate_the_callers_messages():
    def mutate(messages, tools):
        messages.append({"role": "user", "content": "injected"})
        return "ok"

    messages = list(USER)
    model = FunctionModel(mutate)
    await model(messages, "m")
    assert messages == USER and model.requests[0].messages == USER


async def test_function_model_rejects_unsupported_return_types():
    with pytest.raises(TypeError, match="LLMResponse, str or dict"):
        await FunctionModel(lambda messages, tools: 42)(USER, "m")
