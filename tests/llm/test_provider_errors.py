"""Provider errors name the limit, the setting and the likely fix, never the key (against local servers)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from cyber_agent.errors import LLMHTTPError, LLMTransportError
from cyber_agent.llm import AnthropicModel, OpenAICompatModel, ProviderSettings, resolve_llm

USER = [{"role": "user", "content": "hi"}]
SECRET = "sk-local-secret-0123456789"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)  # a CI proxy must not intercept 127.0.0.1


@asynccontextmanager
async def local_server(status: int | None, body: dict | None = None) -> AsyncIterator[tuple[int, list[str]]]:
    """A real HTTP server on 127.0.0.1 answering every request with `status`, or never answering (None)."""
    paths: list[str] = []
    silent: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        paths.append(head.split(b" ")[1].decode())
        if status is None:
            silent.append(writer)  # accepted, read, never answered
            return
        payload = json.dumps(body or {"error": {"message": "nope"}}).encode()
        writer.write(f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(payload)}\r\n"
                     f"connection: close\r\n\r\n".encode() + payload)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        async with server:
            yield server.sockets[0].getsockname()[1], paths
    finally:
        for writer in silent:
            writer.close()


async def test_a_silent_server_times_out_naming_the_limit_and_the_setting():
    async with local_server(None) as (port, paths):
        resolved = resolve_llm("openai:m", settings=ProviderSettings(timeout=0.2, retries=1, backoff_cap=0),
                               env={"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"})
        started = time.perf_counter()
        with pytest.raises(LLMTransportError) as caught:
            await resolved.llm_call(USER, "m")
        elapsed = time.perf_counter() - started
    text = str(caught.value)
    assert "no answer within the read timeout of 0.2 s after 2 attempt(s)" in text
    assert "`timeout` setting (--timeout, CYBER_AGENT_TIMEOUT)" in text and "no detail" not in text
    assert "from OPENAI_BASE_URL" in text
    assert len(paths) == 2 and elapsed < 10  # two attempts, each cut at 0.2 s (a generous bound, not a timing test)


async def test_a_connect_timeout_names_connect_timeout():
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out")

    llm = OpenAICompatModel(base_url="http://127.0.0.1:9/v1", transport=httpx.MockTransport(handler), env={},
                            timeout=httpx.Timeout(5, connect=1.5), retry=ProviderSettings(retries=0).retry_policy())
    with pytest.raises(LLMTransportError, match=r"connect timeout of 1\.5 s after 1 attempt.*CYBER_AGENT_CONNECT_TIMEOUT"):
        await llm(USER, "m")


async def test_a_refused_connection_names_the_base_url_variable():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llm = OpenAICompatModel(env={"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"},
                            retry=ProviderSettings(retries=0).retry_policy())
    with pytest.raises(LLMTransportError, match=r"could not connect after 1 attempt.*is OPENAI_BASE_URL right "
                                                r"\(this one came from OPENAI_BASE_URL\)"):
        await llm(USER, "m")


async def test_404_without_v1_says_openai_base_url_should_end_in_v1():
    async with local_server(404) as (port, paths):
        llm = OpenAICompatModel(env={"OPENAI_BASE_URL": f"http://127.0.0.1:{port}"})
        with pytest.raises(LLMHTTPError) as caught:
            await llm(USER, "m")
    assert paths == ["/chat/completions"] and caught.value.status_code == 404
    assert caught.value.hint == (f"OPENAI_BASE_URL (here http://127.0.0.1:{port}, from OPENAI_BASE_URL) should probably "
                                 f"end in /v1, e.g. http://127.0.0.1:{port}/v1")
    assert caught.value.hint in str(caught.value)


async def test_404_with_v1_points_at_the_model_name_instead():
    async with local_server(404) as (port, _):
        llm = OpenAICompatModel(base_url=f"http://127.0.0.1:{port}/v1", env={})
        with pytest.raises(LLMHTTPError, match=r"check the model name and OPENAI_BASE_URL .*from base_url=") as caught:
            await llm(USER, "m")
    assert "end in /v1" not in str(caught.value)


async def test_anthropic_base_url_ending_in_v1_is_normalised():
    answer = {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
              "usage": {"input_tokens": 1, "output_tokens": 1}}
    async with local_server(200, answer) as (port, paths):
        llm = AnthropicModel(env={"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}/v1/"})
        assert llm.base_url == f"http://127.0.0.1:{port}"
        assert (await llm(USER, "claude-haiku-4-5")).content == "ok"
    assert paths == ["/v1/messages"]


@pytest.mark.parametrize(("status", "model_cls", "env", "kw", "says"), [
    (401, OpenAICompatModel, {"OPENAI_API_KEY": SECRET}, {}, "the key from OPENAI_API_KEY was refused"),
    (403, OpenAICompatModel, {}, {"api_key": SECRET}, "the key from api_key= was refused"),
    (401, OpenAICompatModel, {}, {}, "no key was sent: set OPENAI_API_KEY"),
    (401, AnthropicModel, {"ANTHROPIC_API_KEY": SECRET}, {}, "the key from ANTHROPIC_API_KEY was refused"),
])
async def test_a_refused_key_names_its_variable_never_its_value(status, model_cls, env, kw, says):
    async with local_server(status, {"error": {"message": f"bad key {SECRET}"}}) as (port, _):
        base = f"http://127.0.0.1:{port}" + ("/v1" if model_cls is OpenAICompatModel else "")
        llm = model_cls(base_url=base, env=env, **kw)
        with pytest.raises(LLMHTTPError) as caught:
            await llm(USER, "m")
    assert says in str(caught.value)
    if env or kw:  # the server echoed the key it was sent: the error shows neither it nor the body's copy
        assert SECRET not in str(caught.value) and SECRET not in caught.value.body


async def test_retries_used_up_name_the_retries_setting():
    async with local_server(503) as (port, paths):
        llm = OpenAICompatModel(base_url=f"http://127.0.0.1:{port}/v1", env={},
                                retry=ProviderSettings(retries=1, backoff_cap=0).retry_policy())
        with pytest.raises(LLMTransportError, match=r"HTTP 503 after 2 attempt\(s\).*--retries, CYBER_AGENT_RETRIES"):
            await llm(USER, "m")
    assert len(paths) == 2
