"""Each retried attempt is recorded: on the response, on the error, as an `llm_retry` event and as message totals."""

from __future__ import annotations

import httpx
import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.errors import LLMTransportError
from cyber_agent.llm import AnthropicModel, OpenAICompatModel, RetryPolicy, RetryRecord
from cyber_agent.trace import InMemoryTraceStore

USER = [{"role": "user", "content": "hi"}]
OK = {"choices": [{"index": 0, "message": {"content": "done"}, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 1, "completion_tokens": 1}}


class Script:
    """A handler answering from a list; an exception instance in the list is raised instead."""

    def __init__(self, *answers):
        self.answers = list(answers)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def openai(script: Script, sleeps, **kw) -> OpenAICompatModel:
    return OpenAICompatModel(base_url="http://127.0.0.1:9/v1", transport=httpx.MockTransport(script), env={},
                             sleep=sleeps, retry=RetryPolicy(jitter=0.0, **kw))


async def test_a_retried_call_returns_its_attempts_in_order(sleeps):
    script = Script(httpx.ConnectError("refused"), httpx.Response(429, headers={"retry-after": "2"}),
                    httpx.Response(200, json=OK))
    reply = await openai(script, sleeps)(USER, "m")
    assert reply.content == "done"
    assert reply.retries == [
        RetryRecord(attempt=1, status=None, error="ConnectError", wait_s=1.0, retry_after=False),
        RetryRecord(attempt=2, status=429, error="HTTP 429", wait_s=2.0, retry_after=True),
    ]
    assert sleeps.delays == [1.0, 2.0]


async def test_a_first_time_answer_has_no_retries(sleeps):
    assert (await openai(Script(httpx.Response(200, json=OK)), sleeps)(USER, "m")).retries == []


async def test_a_call_that_ran_out_of_retries_carries_them_on_the_error(sleeps):
    script = Script(httpx.Response(503), httpx.Response(503))
    with pytest.raises(LLMTransportError) as caught:
        await openai(script, sleeps, max_retries=1)(USER, "m")
    assert [(r.attempt, r.status) for r in caught.value.retries] == [(1, 503)]  # type: ignore[attr-defined]


async def test_anthropic_streamed_call_records_its_retries_too(sleeps):
    stream = (b'event: message_start\ndata: {"type":"message_start","message":{"model":"c","usage":{"input_tokens":1}}}\n\n'
              b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}\n\n'
              b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    script = Script(httpx.Response(529), httpx.Response(200, content=stream))
    llm = AnthropicModel(api_key="k", transport=httpx.MockTransport(script), env={}, sleep=sleeps,
                         retry=RetryPolicy(jitter=0.0))
    reply = await llm(USER, "claude-haiku-4-5", on_delta=lambda _: None)
    assert reply.content == "ok" and [(r.status, r.wait_s) for r in reply.retries] == [(529, 1.0)]


async def test_the_runner_records_an_event_per_retry_and_totals_on_the_message(sleeps):
    script = Script(httpx.Response(429, headers={"retry-after": "2"}), httpx.ReadTimeout("slow"),
                    httpx.Response(200, json=OK))
    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=openai(script, sleeps))
    result = await runner.run_result(USER, RunConfig(model="m"))
    assert result.trace.status == "completed"
    events = await store.get_events(result.trace.trace_id)
    retries = [e.payload for e in events if e.type == "llm_retry"]
    assert retries == [
        {"attempt": 1, "status": 429, "error": "HTTP 429", "wait_s": 2.0, "retry_after": True, "model": "m"},
        {"attempt": 2, "status": None, "error": "ReadTimeout", "wait_s": 2.0, "retry_after": False, "model": "m"},
    ]
    kinds = [e.type for e in events]
    assistant_added = next(i for i, e in enumerate(events)
                           if e.type == "message_added" and e.payload["message"]["role"] == "assistant")
    assert kinds.index("llm_retry") < assistant_added  # told in the order it happened
    assistant = next(m for m in await store.get_trace_messages(result.trace.trace_id) if m.role == "assistant")
    assert (assistant.metadata["http_retries"], assistant.metadata["retry_wait_s"]) == (2, 4.0)


async def test_a_run_whose_call_failed_still_records_the_retries(sleeps):
    script = Script(httpx.Response(500), httpx.Response(500), httpx.Response(500))
    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=openai(script, sleeps))
    result = await runner.run_result(USER, RunConfig(model="m"))
    assert result.trace.status == "failed" and "HTTP 500 after 3 attempt(s)" in (result.trace.error_message or "")
    events = await store.get_events(result.trace.trace_id)
    assert [(e.payload["attempt"], e.payload["wait_s"]) for e in events if e.type == "llm_retry"] == [(1, 1.0), (2, 2.0)]
