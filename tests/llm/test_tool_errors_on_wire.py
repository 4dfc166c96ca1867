"""A failed tool result keeps `is_error: true` on Anthropic's wire; OpenAI gets the error text alone."""

from __future__ import annotations

import json

import httpx

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm import AnthropicModel, OpenAICompatModel
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore

TASK = [{"role": "user", "content": "read the file"}]


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    def read(path: str) -> str:
        """Read a file."""
        if path == "missing.txt":
            raise FileNotFoundError(path)
        return "contents"

    registry.register(read)
    return registry


def _anthropic_answers() -> list[dict]:
    usage = {"input_tokens": 3, "output_tokens": 2}
    return [
        {"content": [{"type": "tool_use", "id": "t_bad", "name": "read", "input": {"path": "missing.txt"}},
                     {"type": "tool_use", "id": "t_ok", "name": "read", "input": {"path": "here.txt"}}],
         "stop_reason": "tool_use", "usage": usage},
        {"content": [{"type": "text", "text": "one file was missing"}], "stop_reason": "end_turn", "usage": usage},
    ]


def _openai_answers() -> list[dict]:
    usage = {"prompt_tokens": 3, "completion_tokens": 2}
    calls = [{"id": "t_bad", "type": "function", "function": {"name": "read", "arguments": '{"path": "missing.txt"}'}}]
    return [
        {"choices": [{"index": 0, "message": {"content": None, "tool_calls": calls}, "finish_reason": "tool_calls"}],
         "usage": usage},
        {"choices": [{"index": 0, "message": {"content": "it was missing"}, "finish_reason": "stop"}], "usage": usage},
    ]


class Server:
    """A MockTransport handler answering from a list and keeping every JSON body it was sent."""

    def __init__(self, answers: list[dict]) -> None:
        self.answers = answers
        self.bodies: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        return httpx.Response(200, json=self.answers.pop(0))


async def _run(llm, model: str) -> AgentRunner:
    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=llm, tool_registry=_registry())
    result = await runner.run_result(TASK, RunConfig(model=model))
    assert result.trace.status == "completed"
    return runner


async def test_anthropic_tool_result_of_a_failed_call_carries_is_error():
    server = Server(_anthropic_answers())
    await _run(AnthropicModel(api_key="k", transport=httpx.MockTransport(server), env={}), "claude-haiku-4-5")
    results = [block for turn in server.bodies[1]["messages"] if turn["role"] == "user"
               for block in turn["content"] if isinstance(block, dict) and block.get("type") == "tool_result"]
    by_id = {block["tool_use_id"]: block for block in results}
    assert by_id["t_bad"]["is_error"] is True and "missing.txt" in str(by_id["t_bad"]["content"])
    assert "is_error" not in by_id["t_ok"]  # a tool that worked is not marked


async def test_openai_gets_the_error_text_and_no_unknown_field():
    server = Server(_openai_answers())
    await _run(OpenAICompatModel(base_url="http://127.0.0.1:9/v1", transport=httpx.MockTransport(server), env={}), "m")
    tool_messages = [m for m in server.bodies[1]["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 1 and set(tool_messages[0]) == {"role", "tool_call_id", "content"}
    assert "missing.txt" in tool_messages[0]["content"]
