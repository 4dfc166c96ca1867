"""Streams from hostile servers (both wire formats) never hang a call and never end a run as completed.

Every test fails on the code before the provider boundary: endless streams hung forever (the
timeout applied between chunks only), cut-off streams completed the run, and a dropped
connection failed it without a retry. `GUARD` is a hang guard, not a timing claim.
"""

from __future__ import annotations

import asyncio

import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.errors import LLMTransportError
from cyber_agent.llm import ProviderSettings, resolve_llm
from cyber_agent.trace import InMemoryTraceStore
from tests.hostile.hostile_servers import FORMATS, SSE_HEAD, Format, HostileServer, endless

GUARD = 60.0  # far above deadline + margin; only turns a hang into a failure
USER = [{"role": "user", "content": "hi"}]
FAST = {"retries": 0, "timeout": 5}


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)  # a proxy must not intercept 127.0.0.1


async def _call(fmt: Format, server: HostileServer, **settings: object):
    model = fmt.model(server, **settings)
    return await asyncio.wait_for(model(USER, "m", on_delta=lambda _: None), GUARD)  # on_delta: streamed


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("kind", ["text", "keep-alive"])
async def test_an_endless_stream_ends_at_the_deadline(fmt: Format, kind: str):
    async def behaviour(_attempt: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + fmt.start())
        await endless(writer, fmt.delta("more ") if kind == "text" else b": keep-alive\n\n")

    async with HostileServer(behaviour) as server:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(LLMTransportError) as caught:
            await _call(fmt, server, deadline=1.0, **FAST)
        elapsed = loop.time() - started
    text = str(caught.value)
    assert "`deadline` setting" in text and "CYBER_AGENT_DEADLINE" in text and "of 1 s" in text
    assert elapsed < GUARD / 2  # ended by the deadline, not the guard


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
async def test_streamed_output_is_capped(fmt: Format):
    async def behaviour(_attempt: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + fmt.start())
        await endless(writer, fmt.delta("x" * 500) * 20, every=0)

    async with HostileServer(behaviour) as server:
        with pytest.raises(LLMTransportError, match="max_output_chars.*CYBER_AGENT_MAX_OUTPUT_CHARS.*of 50000 characters"):
            await _call(fmt, server, max_output_chars=50_000, **FAST)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
async def test_a_line_without_end_is_capped(fmt: Format):
    async def behaviour(_attempt: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + fmt.start() + b"data: {\"x\": \"")
        await endless(writer, b"y" * 65536, every=0)

    async with HostileServer(behaviour) as server:
        with pytest.raises(LLMTransportError, match="max_body_bytes.*of 1048576 bytes"):
            await _call(fmt, server, max_body_bytes=1 << 20, **FAST)


def _cut(fmt: Format, whole_from: int):
    """Attempts before `whole_from` send 'The file ' and close without the end marker; later ones answer whole."""
    async def behaviour(attempt: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + fmt.start() + fmt.delta("The file "))
        if attempt >= whole_from:
            writer.write(fmt.delta("is empty.") + fmt.end(fmt.usage(7, 3)))
        await writer.drain()
    return behaviour


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
async def test_a_cut_off_stream_is_retried_and_its_partial_text_kept(fmt: Format):
    async with HostileServer(_cut(fmt, whole_from=2)) as server:
        reply = await _call(fmt, server, retries=2, backoff_cap=0)
    assert reply.content == "The file is empty." and len(server.requests) == 2
    [retry] = reply.retries
    assert (retry.attempt, retry.error, retry.partial_text) == (1, "stream cut off", "The file ")


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
async def test_a_dropped_connection_mid_stream_is_retried(fmt: Format):
    async def behaviour(attempt: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + fmt.start() + fmt.delta("The file "))
        await writer.drain()
        if attempt == 1:
            writer.transport.abort()  # a reset, not an orderly close
            return
        writer.write(fmt.delta("is empty.") + fmt.end(fmt.usage(7, 3)))
        await writer.drain()

    async with HostileServer(behaviour) as server:
        reply = await _call(fmt, server, retries=1, backoff_cap=0)
    assert reply.content == "The file is empty." and len(reply.retries) == 1
    assert reply.retries[0].partial_text in ("The file ", None)  # what reached the client before the reset


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
async def test_a_run_whose_streams_are_always_cut_fails_and_says_why(fmt: Format):
    async with HostileServer(_cut(fmt, whole_from=99)) as server:
        spec, env = fmt.spec(server)
        resolved = resolve_llm(spec, settings=ProviderSettings(retries=1, backoff_cap=0, stream=True), env=env)
        store = InMemoryTraceStore()
        runner = AgentRunner(trace_store=store, llm_call=resolved.llm_call)
        result = await asyncio.wait_for(runner.run_result(USER, RunConfig(model=resolved.model)), GUARD)
    assert result.status == "failed"
    assert "without its end marker" in result.trace.error_message and "2 attempt(s)" in result.trace.error_message
    assert not [m for m in result.messages if m.role == "assistant"]  # the half answer never became the answer
    retries = [e.payload for e in await store.get_events(result.trace.trace_id) if e.type == "llm_retry"]
    assert [(r["error"], r["partial_text"]) for r in retries] == [("stream cut off", "The file ")]


def test_the_limits_are_cli_flags_and_a_bad_value_names_its_setting(capsys: pytest.CaptureFixture[str]):
    from cyber_agent.cli import main

    assert main(["--store", "memory:", "run", "hi", "--model", "openai:gpt-4o", "--deadline", "0"]) == 2
    assert "deadline" in capsys.readouterr().err
    assert main(["--store", "memory:", "run", "hi", "--model", "openai:gpt-4o", "--max-body-bytes", "0"]) == 2
    assert "max_body_bytes" in capsys.readouterr().err
