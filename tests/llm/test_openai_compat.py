"""OpenAICompatModel against httpx.MockTransport: bodies, streaming, tool calls, usage and cost."""

from __future__ import annotations

import json

import httpx
import pytest

from cyber_agent.errors import ConfigurationError, LLMProtocolError
from cyber_agent.llm import LLMCall, OpenAICompatModel, RetryPolicy

KEY = "sk-test-secret-0123456789"


def sse(*chunks: dict, done: bool = True) -> bytes:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (body + ("data: [DONE]\n\n" if done else "")).encode()


def completion(message: dict, usage: dict | None = None, model: str = "gpt-4o-mini-2024-07-18") -> dict:
    return {"id": "x", "model": model, "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage or {"prompt_tokens": 10, "completion_tokens": 5}}


class Server:
    """A MockTransport handler that records requests and answers from a queue."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answers.pop(0)

    def body(self, i: int = 0) -> dict:
        return json.loads(self.requests[i].content)


def model(server: Server, **kw) -> OpenAICompatModel:
    kw.setdefault("api_key", KEY)
    return OpenAICompatModel(transport=httpx.MockTransport(server), env={}, **kw)


USER = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "add", "description": "Add", "parameters": {"type": "object"}}}]


async def test_non_streaming_text_sends_openai_body_and_reads_usage():
    server = Server(httpx.Response(200, json=completion(
        {"role": "assistant", "content": "hello"},
        {"prompt_tokens": 1000, "completion_tokens": 100, "prompt_tokens_details": {"cached_tokens": 400}},
    )))
    llm = model(server)
    assert isinstance(llm, LLMCall)
    reply = await llm(USER, "gpt-4o-mini", TOOLS, 0.2)
    request = server.requests[0]
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert server.body() == {"model": "gpt-4o-mini", "messages": USER, "tools": TOOLS, "temperature": 0.2}
    assert reply.content == "hello" and reply.finish_reason == "stop"
    assert reply.model == "gpt-4o-mini-2024-07-18"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.cached_tokens) == (1000, 100, 400)
    # gpt-4o-mini: 600 uncached * 0.15 + 400 cached * 0.075 + 100 out * 0.60, per million
    assert reply.cost == pytest.approx((600 * 0.15 + 400 * 0.075 + 100 * 0.60) / 1e6)
    assert reply.cost_estimated is True


async def test_provider_reported_charge_wins_over_table():
    server = Server(httpx.Response(200, json=completion(
        {"content": "x"}, {"prompt_tokens": 1000, "completion_tokens": 1000, "cost": 0.0123})))
    reply = await model(server, base_url="https://openrouter.ai/api/v1")(USER, "openai/gpt-4o")
    assert reply.cost == 0.0123 and reply.cost_estimated is False
    assert reply.usage.cost_usd == 0.0123


async def test_unknown_model_costs_zero_marked_estimated():
    server = Server(httpx.Response(200, json=completion({"content": "x"}, model="my-local-llama")))
    reply = await model(server, base_url="http://localhost:8000/v1")(USER, "my-local-llama")
    assert (reply.cost, reply.cost_estimated) == (0.0, True)


async def test_streaming_text_calls_on_delta_and_requests_usage():
    server = Server(httpx.Response(200, headers={"content-type": "text/event-stream"}, content=sse(
        {"model": "gpt-4o", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
        {"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2,
                                  "prompt_tokens_details": {"cached_tokens": 3}}},
    )))
    deltas: list[str] = []
    reply = await model(server)(USER, "gpt-4o", on_delta=deltas.append)
    body = server.body()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert deltas == ["Hel", "lo"]
    assert reply.content == "Hello" and reply.finish_reason == "stop" and reply.model == "gpt-4o"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.cached_tokens) == (7, 2, 3)
    assert reply.cost > 0


async def test_streamed_tool_calls_are_assembled_by_index_across_chunks():
    server = Server(httpx.Response(200, content=sse(
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_a", "type": "function", "function": {"name": "add", "arguments": ""}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 1, "id": "call_b", "type": "function", "function": {"name": "echo", "arguments": "{\"te"}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\": 1,"}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": "xt\": \"hi\"}"}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": " \"b\": 2}"}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )))
    reply = await model(server, stream=True)(USER, "gpt-4o", TOOLS)
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_a", "add", {"a": 1, "b": 2}), ("call_b", "echo", {"text": "hi"})]
    assert reply.finish_reason == "tool_calls"
    assert all(c.parse_error is None for c in reply.tool_calls)


async def test_malformed_tool_arguments_become_parse_error_not_crash():
    server = Server(
        httpx.Response(200, json=completion({"content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1"}}]})),
        httpx.Response(200, content=sse(
            {"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "c2", "function": {"name": "add", "arguments": "[1, 2]"}}]}}]})),
    )
    llm = model(server)
    plain = await llm(USER, "gpt-4o")
    streamed = await llm(USER, "gpt-4o", on_delta=lambda _: None)
    for reply, raw in ((plain, "{\"a\": 1"), (streamed, "[1, 2]")):
        (call,) = reply.tool_calls
        assert call.parse_error and "JSON" in call.parse_error
        assert call.raw_arguments == raw and call.arguments == {}
    assert plain.content == ""


async def test_error_inside_a_200_stream_raises_protocol_error():
    server = Server(httpx.Response(200, content=sse({"error": {"message": "upstream overloaded"}})))
    with pytest.raises(LLMProtocolError, match="upstream overloaded"):
        await model(server)(USER, "gpt-4o", on_delta=lambda _: None)


async def test_non_json_success_body_raises_protocol_error():
    server = Server(httpx.Response(200, content=b"<html>proxy</html>"))
    with pytest.raises(LLMProtocolError, match="not JSON"):
        await model(server, retry=RetryPolicy(max_retries=0))(USER, "gpt-4o")


def test_missing_key_for_default_base_url_names_the_env_var():
    with pytest.raises(ConfigurationError) as info:
        OpenAICompatModel(env={})
    assert info.value.setting == "OPENAI_API_KEY"


async def test_local_server_needs_no_key_and_reads_env():
    server = Server(httpx.Response(200, json=completion({"content": "ok"})))
    llm = OpenAICompatModel(env={"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1/"},
                            transport=httpx.MockTransport(server))
    assert (await llm(USER, "qwen2.5:7b")).content == "ok"
    assert str(server.requests[0].url) == "http://127.0.0.1:11434/v1/chat/completions"
    assert "authorization" not in server.requests[0].headers


async def test_extra_body_is_sent_can_drop_fields_and_empty_model_is_refused():
    server = Server(httpx.Response(200, json=completion({"content": "ok"})),
                    httpx.Response(200, content=sse({"choices": [{"index": 0, "delta": {"content": "s"}}]})))
    llm = model(server, extra_body={"max_tokens": 50, "stream_options": None})
    await llm(USER, "gpt-4o")
    assert server.body(0)["max_tokens"] == 50
    assert (await llm(USER, "gpt-4o", on_delta=lambda _: None)).content == "s"
    assert server.body(1)["stream"] is True and "stream_options" not in server.body(1)
    with pytest.raises(ConfigurationError, match="model"):
        await llm(USER, "")


def test_repr_never_shows_the_key():
    assert KEY not in repr(model(Server()))


@pytest.mark.parametrize(("raw", "expected"), [
    ("stop", "stop"), ("length", "length"), ("tool_calls", "tool_calls"), ("function_call", "tool_calls"),
    ("content_filter", "content_filter"), ("eos", "stop"), ("weird", "other"), (None, None),
])
def test_finish_reason_is_normalised(raw, expected):
    body = {"choices": [{"index": 0, "message": {"content": "x"}, "finish_reason": raw}]}
    from cyber_agent.llm.openai_compat import parse_chat_completion

    assert parse_chat_completion(body, "m").finish_reason == expected


def test_a_reply_cut_by_length_marks_every_call_incomplete():
    from cyber_agent.llm.openai_compat import parse_chat_completion

    calls = [{"id": "a", "function": {"name": "add", "arguments": '{"x": 1}'}},
             {"id": "b", "function": {"name": "add", "arguments": '{"x": '}}]
    body = {"choices": [{"index": 0, "message": {"tool_calls": calls}, "finish_reason": "length"}]}
    response = parse_chat_completion(body, "m")
    assert [("finish_reason=length" in (c.incomplete or "")) for c in response.tool_calls] == [True, True]
    assert response.tool_calls[0].arguments == {"x": 1}  # kept as sent, for the trace


async def test_a_stream_without_its_usage_chunk_is_estimated_and_flagged_never_zero():
    server = Server(httpx.Response(200, headers={"content-type": "text/event-stream"}, content=sse(
        {"model": "gpt-4o", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello there"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )))
    reply = await model(server)([{"role": "user", "content": "x" * 400}], "gpt-4o", on_delta=lambda _: None)
    assert reply.usage.reported is False
    assert reply.usage.prompt_tokens == 100 and reply.usage.completion_tokens == 2  # characters ÷ 4
    assert reply.cost > 0 and reply.cost_estimated


async def test_a_runner_message_records_estimated_usage():
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.trace import InMemoryTraceStore

    server = Server(httpx.Response(200, json={"id": "x", "model": "gpt-4o", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}]}))
    runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model(server))
    result = await runner.run_result(USER, RunConfig(model="gpt-4o"))
    (assistant,) = [m for m in result.messages if m.role == "assistant"]
    assert assistant.metadata["usage_estimated"] is True and assistant.prompt_tokens > 0
