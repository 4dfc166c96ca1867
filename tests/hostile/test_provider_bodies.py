"""Bodies without end (answers and errors, both wire formats) are read only up to their caps.

On the code before the provider boundary, both read the whole body: an endless one hung the call.
The memory figures of big finite bodies are measured by bench/provider_bodies.py.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from cyber_agent.errors import LLMHTTPError, LLMTransportError
from tests.hostile.hostile_servers import FORMATS, Format, HostileServer, endless, json_head

GUARD = 60.0
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def _endless_answer(fmt: Format):
    opening = json.dumps(fmt.body("PLACEHOLDER")).split("PLACEHOLDER")[0].encode()

    async def behaviour(_attempt: int, writer: asyncio.StreamWriter) -> None:
        writer.write(json_head(200) + opening)
        await endless(writer, b"a" * 65536, every=0)
    return behaviour


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
async def test_an_endless_answer_body_stops_at_max_body_bytes(fmt: Format):
    async with HostileServer(_endless_answer(fmt)) as server:
        with pytest.raises(LLMTransportError) as caught:
            await asyncio.wait_for(fmt.model(server, retries=0, max_body_bytes=2 << 20)(USER, "m"), GUARD)
    assert "`max_body_bytes` setting" in str(caught.value) and "of 2097152 bytes" in str(caught.value)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
async def test_a_long_answer_is_capped_by_max_output_chars(fmt: Format):
    body = json.dumps(fmt.body("b" * 300_000)).encode()

    async def behaviour(_attempt: int, writer: asyncio.StreamWriter) -> None:
        writer.write(json_head(200, len(body)) + body)
        await writer.drain()

    async with HostileServer(behaviour) as server:
        with pytest.raises(LLMTransportError, match="max_output_chars.*of 100000 characters"):
            await asyncio.wait_for(fmt.model(server, retries=0, max_output_chars=100_000)(USER, "m"), GUARD)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("status", [400, 503])
async def test_an_endless_error_body_is_quoted_from_its_first_bytes_only(fmt: Format, status: int):
    async def behaviour(_attempt: int, writer: asyncio.StreamWriter) -> None:
        writer.write(json_head(status) + b'{"error": {"message": "')
        await endless(writer, b"e" * 65536, every=0)

    async with HostileServer(behaviour) as server:
        with pytest.raises((LLMHTTPError, LLMTransportError)) as caught:
            await asyncio.wait_for(fmt.model(server, retries=0, backoff_cap=0, max_error_bytes=4096)(USER, "m"), GUARD)
    text = str(caught.value)
    assert f"{status}" in text and '{"error": {"message": "eee' in text
    assert len(text) < 4000  # an excerpt, not the body
