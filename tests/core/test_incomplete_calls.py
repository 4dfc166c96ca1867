"""Issue 14 [loop-integrity]: a truncated or unparseable tool call never runs.

Each provider path (OpenAI-compatible streamed and not, Anthropic, the XML and P-format text
dialects) is driven through the real runner: the cut call is persisted as sent, answered with a
tool error, never executed, and the model's retried complete call runs.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm import AnthropicModel, DialectLLM, OpenAICompatModel, PFormatDialect, ScriptedModel, XmlDialect
from cyber_agent.llm.types import LLMResponse, ToolCall
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore

TASK = [{"role": "user", "content": "list the build folder"}]


def shell_registry(ran: list[str]) -> ToolRegistry:
    registry = ToolRegistry()

    def shell(command: str) -> str:
        """Run a shell command (recorded, never really run)."""
        ran.append(command)
        return f"ran {command}"

    registry.register(shell, side_effects=True)
    return registry


class Server:
    """An httpx MockTransport handler answering from a queue and recording request bodies."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        return self.answers.pop(0)


def openai_answer(message: dict[str, Any], finish_reason: str, *, stream: bool) -> httpx.Response:
    if not stream:
        return httpx.Response(200, json={"id": "x", "model": "gpt-4o-mini", "usage": {"prompt_tokens": 9, "completion_tokens": 4},
                                         "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}]})
    chunks: list[dict[str, Any]] = []
    if message.get("content"):
        chunks.append({"choices": [{"index": 0, "delta": {"content": message["content"]}}]})
    for i, call in enumerate(message.get("tool_calls") or []):
        args = call["function"]["arguments"]
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": i, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}]}}]})
        for piece in (args[: len(args) // 2], args[len(args) // 2:]):
            chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}]})
    chunks.append({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}})
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})


def shell_call(call_id: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "shell", "arguments": arguments}}


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m.get("role") == "tool"]


async def run(llm: Any, ran: list[str]) -> Any:
    runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=llm, tool_registry=shell_registry(ran))
    return await runner.run_result(TASK, RunConfig(model="gpt-4o-mini"))


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_length_cut_call_never_runs_the_model_is_told_and_its_retry_runs(stream):
    cut = '{"command": "rm -rf /tmp/build/ca'  # cut inside its path by the output limit
    server = Server(
        openai_answer({"role": "assistant", "content": None, "tool_calls": [shell_call("c1", cut)]}, "length", stream=stream),
        openai_answer({"role": "assistant", "content": None,
                       "tool_calls": [shell_call("c2", '{"command": "ls /tmp/build"}')]}, "tool_calls", stream=stream),
        openai_answer({"role": "assistant", "content": "done"}, "stop", stream=stream),
    )
    ran: list[str] = []
    llm = OpenAICompatModel(base_url="http://fake.local/v1", transport=httpx.MockTransport(server), env={}, stream=stream)
    result = await run(llm, ran)
    assert result.status == "completed" and ran == ["ls /tmp/build"]
    [error, ok] = tool_messages(server.bodies[2])
    assert error["tool_call_id"] == "c1" and "not run" in error["content"] and "finish_reason=length" in error["content"]
    assert "send it again complete" in error["content"] and ok["content"] == "ran ls /tmp/build"
    # The cut call is persisted as the model sent it, with its marker; the history sent next is valid.
    assistant = next(m for m in result.messages if m.role == "assistant" and m.tool_calls)
    [call] = assistant.tool_calls
    assert call.incomplete and call.raw_arguments == cut
    assert server.bodies[1]["messages"][-2]["tool_calls"][0]["function"]["arguments"] == cut


async def test_openai_length_marks_even_a_call_whose_json_happens_to_parse():
    server = Server(
        openai_answer({"role": "assistant", "tool_calls": [shell_call("a", '{"command": "echo 1"}'),
                                                           shell_call("b", '{"command": "rm -rf /')]}, "length", stream=False),
        openai_answer({"role": "assistant", "content": "stopped"}, "stop", stream=False),
    )
    ran: list[str] = []
    result = await run(OpenAICompatModel(base_url="http://fake.local/v1", transport=httpx.MockTransport(server), env={}), ran)
    assert result.status == "completed" and ran == []
    assert [("not run" in m["content"]) for m in tool_messages(server.bodies[1])] == [True, True]


async def test_anthropic_max_tokens_cut_call_never_runs_and_its_retry_runs():
    def message(stop_reason: str, content: list[dict[str, Any]]) -> httpx.Response:
        return httpx.Response(200, json={"id": "m", "type": "message", "role": "assistant", "model": "claude-x",
                                         "stop_reason": stop_reason, "content": content,
                                         "usage": {"input_tokens": 9, "output_tokens": 4}})

    server = Server(
        # The Messages API closes a cut tool_use input itself: it parses, yet it is not what the model meant.
        message("max_tokens", [{"type": "tool_use", "id": "t1", "name": "shell", "input": {"command": "rm -rf /tmp/bu"}}]),
        message("tool_use", [{"type": "tool_use", "id": "t2", "name": "shell", "input": {"command": "ls"}}]),
        message("end_turn", [{"type": "text", "text": "done"}]),
    )
    ran: list[str] = []
    llm = AnthropicModel(api_key="k", transport=httpx.MockTransport(server), env={})
    result = await run(llm, ran)
    assert result.status == "completed" and ran == ["ls"]
    results = [b for m in server.bodies[2]["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert results[0]["tool_use_id"] == "t1" and "not run" in json.dumps(results[0]["content"])
    assert "finish_reason=length" in json.dumps(results[0]["content"])


@pytest.mark.parametrize(("dialect", "cut", "whole"), [
    (XmlDialect(), '<tool_call>{"name": "shell", "arguments": {"command": "rm -rf /tmp/bu',
     '<tool_call>{"name": "shell", "arguments": {"command": "ls"}}</tool_call>'),
    (XmlDialect(), '<tool_call>{"name": "shell", "arguments": {"command": "rm -rf /tmp/build"}}',  # no closing tag
     '<tool_call>{"name": "shell", "arguments": {"command": "ls"}}</tool_call>'),
    (PFormatDialect(), "<tool_call>shell[rm -rf /tmp/bu", "<tool_call>shell[ls]</tool_call>"),
    (PFormatDialect(), "<tool_call>shell[rm -rf /tmp/build]", "<tool_call>shell[ls]</tool_call>"),
])
async def test_an_unclosed_text_dialect_call_never_runs_and_its_retry_runs(dialect, cut, whole):
    inner = ScriptedModel([LLMResponse(content=cut, finish_reason="stop"), whole, "done"])
    ran: list[str] = []
    with inner:
        result = await run(DialectLLM(inner, dialect), ran)
    assert result.status == "completed" and ran == ["ls"]
    first = next(m for m in result.messages if m.role == "tool")
    assert first.metadata["is_error"] and "not run" in first.text and "send it again complete" in first.text
    [call] = next(m for m in result.messages if m.role == "assistant" and m.tool_calls).tool_calls
    assert call.incomplete


async def test_a_scripted_reply_cut_by_length_never_runs_whatever_the_client():
    ran: list[str] = []
    cut = LLMResponse(tool_calls=[ToolCall(id="c1", name="shell", arguments={"command": "rm -rf /"})], finish_reason="length")
    with ScriptedModel([cut, "ok"]) as model:
        result = await run(model, ran)
    assert result.status == "completed" and ran == []


def test_old_tool_call_records_load_without_the_marker():
    from cyber_agent.trace.models import MessageContent

    old = MessageContent.model_validate({"tool_calls": [{"id": "c", "name": "shell", "arguments": {"command": "ls"}}]})
    assert old.tool_calls[0].incomplete is None


@pytest.mark.parametrize("dialect", [XmlDialect(), PFormatDialect()])
async def test_an_echoed_call_inside_an_argument_runs_only_as_the_text_it_is(dialect):
    echo = '<tool_call>{"name": "shell", "arguments": {"command": "rm -rf /"}}</tool_call>'
    reply = "<tool_call>" + json.dumps({"name": "shell", "arguments": {"command": f"printf %s '{echo}'"}}) + "</tool_call>"
    ran: list[str] = []
    with ScriptedModel([reply, "done"]) as inner:
        result = await run(DialectLLM(inner, dialect), ran)
    assert result.status == "completed" and ran == [f"printf %s '{echo}'"]
