"""AnthropicModel: message/tool translation, parsing, streaming events, usage and cost."""

from __future__ import annotations

import json

import httpx
import pytest

from cyber_agent.errors import ConfigurationError, LLMError, LLMTransportError
from cyber_agent.llm import AnthropicModel, to_anthropic_messages, to_anthropic_tools

KEY = "sk-ant-test-key"
TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]

CONVERSATION = [
    {"role": "system", "content": "You are careful."},
    {"role": "user", "content": "Read a.txt and b.txt"},
    {"role": "assistant", "content": "Reading both.", "tool_calls": [
        {"id": "tu_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a.txt\"}"}},
        {"id": "tu_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"b.txt\"}"}},
    ]},
    {"role": "tool", "tool_call_id": "tu_1", "content": "alpha"},
    {"role": "tool", "tool_call_id": "tu_2", "content": "beta"},
    {"role": "user", "content": "Now summarize."},
    {"role": "system", "content": "Be brief."},
    {"role": "assistant", "content": ""},
    {"role": "assistant", "content": "Summary: alpha, beta."},
]


def test_conversation_translates_to_alternating_anthropic_turns():
    system, turns = to_anthropic_messages(CONVERSATION)
    assert system == "You are careful.\n\nBe brief."
    assert turns == [
        {"role": "user", "content": [{"type": "text", "text": "Read a.txt and b.txt"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading both."},
            {"type": "tool_use", "id": "tu_1", "name": "read_file", "input": {"path": "a.txt"}},
            {"type": "tool_use", "id": "tu_2", "name": "read_file", "input": {"path": "b.txt"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "tu_1", "content": "alpha"},
            {"type": "tool_result", "tool_use_id": "tu_2", "content": "beta"},
            {"type": "text", "text": "Now summarize."},
        ]},
        {"role": "assistant", "content": [{"type": "text", "text": "Summary: alpha, beta."}]},
    ]


def test_tool_results_precede_text_in_a_merged_user_turn_and_images_translate():
    _, turns = to_anthropic_messages([
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "tool", "tool_call_id": "t", "content": "r"},
    ])
    assert [b["type"] for b in turns[0]["content"]] == ["tool_result", "text", "image"]
    assert turns[0]["content"][2]["source"] == {"type": "base64", "media_type": "image/png", "data": "AAAA"}


def test_unknown_role_is_refused_with_its_index():
    with pytest.raises(LLMError, match="message 1 has role 'function'"):
        to_anthropic_messages([{"role": "user", "content": "x"}, {"role": "function", "content": "y"}])


def test_tool_schemas_become_input_schema():
    assert to_anthropic_tools(TOOLS) == [{"name": "read_file", "description": "Read a file",
                                          "input_schema": TOOLS[0]["function"]["parameters"]}]


class Server:
    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.response


def model(server: Server, **kw) -> AnthropicModel:
    return AnthropicModel(api_key=KEY, transport=httpx.MockTransport(server), env={}, **kw)


async def test_non_streaming_request_headers_body_and_tool_use_parsing():
    server = Server(httpx.Response(200, json={
        "id": "msg_1", "model": "claude-sonnet-4-5-20250929", "stop_reason": "tool_use",
        "content": [{"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "tu_9", "name": "read_file", "input": {"path": "c.txt"}}],
        "usage": {"input_tokens": 100, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 0,
                  "output_tokens": 50},
    }))
    reply = await model(server, max_tokens=1000)(CONVERSATION[:2], "claude-sonnet-4-5", TOOLS, 0.0)
    request = server.requests[0]
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == KEY and request.headers["anthropic-version"] == "2023-06-01"
    body = json.loads(request.content)
    assert body["system"] == "You are careful." and body["max_tokens"] == 1000 and body["temperature"] == 0.0
    assert body["tools"][0]["input_schema"]["required"] == ["path"] and "stream" not in body
    assert reply.content == "Let me look." and reply.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("tu_9", "read_file", {"path": "c.txt"})]
    assert (reply.usage.prompt_tokens, reply.usage.cached_tokens, reply.usage.completion_tokens) == (1000, 900, 50)
    assert reply.cost == pytest.approx((100 * 3.0 + 900 * 0.30 + 50 * 15.0) / 1e6) and reply.cost_estimated


def events(*items: tuple[str, dict]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in items).encode()


STREAM = events(
    ("message_start", {"type": "message_start", "message": {
        "id": "m", "model": "claude-haiku-4-5", "content": [],
        "usage": {"input_tokens": 20, "cache_read_input_tokens": 10, "cache_creation_input_tokens": 5,
                  "output_tokens": 1}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ("ping", {"type": "ping"}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi "}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "there"}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
        "type": "tool_use", "id": "tu_s", "name": "read_file", "input": {}}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 1,
                             "delta": {"type": "input_json_delta", "partial_json": "{\"pa"}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 1,
                             "delta": {"type": "input_json_delta", "partial_json": "th\": \"d.txt\"}"}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 1}),
    ("content_block_start", {"type": "content_block_start", "index": 2, "content_block": {
        "type": "tool_use", "id": "tu_bad", "name": "read_file", "input": {}}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 2,
                             "delta": {"type": "input_json_delta", "partial_json": "{\"path\": "}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 2}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}}),
    ("message_stop", {"type": "message_stop"}),
)


async def test_streaming_assembles_text_tool_input_usage_and_flags_bad_json():
    server = Server(httpx.Response(200, headers={"content-type": "text/event-stream"}, content=STREAM))
    deltas: list[str] = []
    reply = await model(server)(CONVERSATION[:2], "claude-haiku-4-5", TOOLS, on_delta=deltas.append)
    assert json.loads(server.requests[0].content)["stream"] is True
    assert deltas == ["Hi ", "there"] and reply.content == "Hi there"
    good, bad = reply.tool_calls
    assert (good.id, good.name, good.arguments, good.parse_error) == ("tu_s", "read_file", {"path": "d.txt"}, None)
    assert bad.id == "tu_bad" and bad.parse_error and bad.raw_arguments == "{\"path\": "
    assert reply.finish_reason == "tool_calls" and reply.model == "claude-haiku-4-5"
    assert (reply.usage.prompt_tokens, reply.usage.cached_tokens, reply.usage.completion_tokens) == (35, 10, 42)


async def test_stream_error_event_raises_transport_error():
    server = Server(httpx.Response(200, content=events(
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))))
    with pytest.raises(LLMTransportError, match="overloaded_error: Overloaded"):
        await model(server, stream=True)([{"role": "user", "content": "x"}], "claude-sonnet-4-5")


def test_missing_key_names_the_env_var_and_env_key_is_used():
    with pytest.raises(ConfigurationError) as info:
        AnthropicModel(env={})
    assert info.value.setting == "ANTHROPIC_API_KEY"
    llm = AnthropicModel(env={"ANTHROPIC_API_KEY": "sk-ant-env", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"})
    assert llm.base_url == "http://127.0.0.1:9" and "sk-ant-env" not in repr(llm)


async def test_streamed_max_tokens_is_length_and_marks_the_cut_call_incomplete():
    cut = STREAM.replace(b'"stop_reason": "tool_use"', b'"stop_reason": "max_tokens"')
    assert cut != STREAM
    reply = await model(Server(httpx.Response(200, headers={"content-type": "text/event-stream"}, content=cut)))(
        CONVERSATION[:2], "claude-haiku-4-5", TOOLS, on_delta=lambda _: None)
    assert reply.finish_reason == "length"
    assert all("finish_reason=length" in (c.incomplete or "") for c in reply.tool_calls)


@pytest.mark.parametrize(("raw", "expected"), [("end_turn", "stop"), ("max_tokens", "length"), ("tool_use", "tool_calls"),
                                               ("refusal", "content_filter"), ("pause_turn", "other")])
async def test_stop_reasons_are_normalised(raw, expected):
    server = Server(httpx.Response(200, json={"id": "m", "model": "c", "stop_reason": raw,
                                              "content": [{"type": "text", "text": "x"}]}))
    assert (await model(server)(CONVERSATION[:2], "claude-haiku-4-5")).finish_reason == expected
