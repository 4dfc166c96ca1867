"""Retries, Retry-After, error surfaces and key redaction, shared by both providers."""

from __future__ import annotations

import asyncio
import json
from email.utils import format_datetime
from datetime import datetime, timedelta, UTC

import httpx
import pytest

from cyber_agent.errors import LLMHTTPError, LLMTransportError
from cyber_agent.llm import AnthropicModel, OpenAICompatModel, RetryPolicy
from cyber_agent.llm.http_retry import parse_retry_after

KEY = "sk-live-should-never-leak-42"
USER = [{"role": "user", "content": "hi"}]
OK = {"choices": [{"index": 0, "message": {"content": "done"}, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 1, "completion_tokens": 1}}


class Script:
    """A handler answering from a list; an exception instance in the list is raised instead."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def openai(script: Script, sleeps, **kw) -> OpenAICompatModel:
    return OpenAICompatModel(api_key=KEY, transport=httpx.MockTransport(script), env={}, sleep=sleeps, **kw)


async def test_429_with_retry_after_seconds_waits_that_long_then_succeeds(sleeps):
    script = Script(httpx.Response(429, headers={"retry-after": "7"}, json={"error": "slow down"}),
                    httpx.Response(200, json=OK))
    reply = await openai(script, sleeps)(USER, "gpt-4o")
    assert reply.content == "done"
    assert script.calls == 2 and sleeps.delays == [7.0]


async def test_retry_after_is_capped(sleeps):
    script = Script(httpx.Response(503, headers={"retry-after": "86400"}), httpx.Response(200, json=OK))
    await openai(script, sleeps, retry=RetryPolicy(max_retry_after=12.0))(USER, "gpt-4o")
    assert sleeps.delays == [12.0]


async def test_streaming_request_is_retried_on_429_before_the_stream_starts(sleeps):
    stream = b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\ndata: [DONE]\n\n'
    script = Script(httpx.Response(429, headers={"retry-after-ms": "1500"}), httpx.Response(200, content=stream))
    deltas: list[str] = []
    reply = await openai(script, sleeps)(USER, "gpt-4o", on_delta=deltas.append)
    assert reply.content == "ok" and deltas == ["ok"] and sleeps.delays == [1.5]


async def test_500_is_retried_with_growing_backoff_then_raises_transport_error(sleeps):
    script = Script(*[httpx.Response(500, text="internal boom") for _ in range(4)])
    policy = RetryPolicy(max_retries=3, base_delay=1.0, jitter=0.0)
    with pytest.raises(LLMTransportError) as info:
        await openai(script, sleeps, retry=policy)(USER, "gpt-4o")
    assert script.calls == 4
    assert sleeps.delays == [1.0, 2.0, 4.0]
    assert "HTTP 500" in str(info.value) and "4 attempt" in str(info.value) and "internal boom" in str(info.value)


async def test_400_raises_http_error_at_once_without_retry(sleeps):
    script = Script(httpx.Response(400, json={"error": {"message": "bad tools schema"}}))
    with pytest.raises(LLMHTTPError) as info:
        await openai(script, sleeps)(USER, "gpt-4o")
    assert script.calls == 1 and sleeps.delays == []
    error = info.value
    assert error.status_code == 400 and "bad tools schema" in error.body
    assert error.url == "https://api.openai.com/v1/chat/completions"
    assert "HTTP 400" in str(error) and error.url in str(error)


async def test_api_key_is_never_echoed_in_errors(sleeps):
    echo = json.dumps({"error": f"invalid key {KEY}"})
    script = Script(httpx.Response(401, text=echo))
    with pytest.raises(LLMHTTPError) as info:
        await openai(script, sleeps)(USER, "gpt-4o")
    assert KEY not in str(info.value) and KEY not in info.value.body and "[redacted]" in info.value.body


async def test_transport_errors_are_retried_then_reported(sleeps):
    script = Script(httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.Response(200, json=OK))
    assert (await openai(script, sleeps)(USER, "gpt-4o")).content == "done"
    assert len(sleeps.delays) == 2

    failing = Script(*[httpx.ConnectError("refused") for _ in range(3)])
    with pytest.raises(LLMTransportError, match="ConnectError: refused"):
        await openai(failing, sleeps, retry=RetryPolicy(max_retries=2))(USER, "gpt-4o")
    assert failing.calls == 3


async def test_anthropic_uses_the_same_retry_layer(sleeps):
    ok = {"content": [{"type": "text", "text": "fine"}], "stop_reason": "end_turn",
          "usage": {"input_tokens": 1, "output_tokens": 1}}
    script = Script(httpx.Response(529, headers={"retry-after": "2"}), httpx.Response(200, json=ok))
    llm = AnthropicModel(api_key=KEY, transport=httpx.MockTransport(script), env={}, sleep=sleeps)
    assert (await llm(USER, "claude-sonnet-4-5")).content == "fine"
    assert sleeps.delays == [2.0]


async def test_cancellation_during_backoff_propagates():
    started = asyncio.Event()

    async def sleep_forever(seconds: float) -> None:
        started.set()
        await asyncio.Event().wait()

    script = Script(httpx.Response(503))
    llm = OpenAICompatModel(api_key=KEY, transport=httpx.MockTransport(script), env={}, sleep=sleep_forever)
    task = asyncio.create_task(llm(USER, "gpt-4o"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_retry_after_parses_seconds_http_dates_and_garbage():
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(httpx.Headers({"retry-after": "3.5"}), now.timestamp()) == 3.5
    assert parse_retry_after(httpx.Headers({"retry-after": later}), now.timestamp()) == pytest.approx(30.0)
    past = format_datetime(now - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(httpx.Headers({"retry-after": past}), now.timestamp()) == 0.0
    assert parse_retry_after(httpx.Headers({"retry-after": "soon"}), now.timestamp()) is None
    assert parse_retry_after(httpx.Headers({}), now.timestamp()) is None


def test_backoff_grows_exponentially_is_capped_and_jitter_stays_in_bounds():
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, jitter=0.25)
    assert [policy.backoff(i, 0.5) for i in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert policy.backoff(1, 0.0) == pytest.approx(1.5) and policy.backoff(1, 1.0) == pytest.approx(2.5)
