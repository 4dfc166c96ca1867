"""Hostile model servers on 127.0.0.1 speaking both wire formats (chat completions and the Messages API).

`HostileServer(behaviour)` runs an asyncio server in the test's own loop; each request is read
whole, counted, and answered by `behaviour(attempt, writer)` (attempt from 1), which writes raw
HTTP. `Format` builds the bytes of one wire format, so one test body covers both providers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from cyber_agent.llm import AnthropicModel, OpenAICompatModel, ProviderSettings

Behaviour = Callable[[int, asyncio.StreamWriter], Awaitable[None]]

SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"


def json_head(status: int = 200, length: int | None = None) -> bytes:
    """Status line and headers of a JSON answer (chunk-less: the body ends when the server closes)."""
    size = f"content-length: {length}\r\n" if length is not None else ""
    return f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{size}connection: close\r\n\r\n".encode()


class HostileServer:
    """An asyncio server on 127.0.0.1 answering every request with `behaviour`."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.requests: list[dict[str, Any]] = []
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in head.decode().split("\r\n")[1:]
                                                 if ": " in line)}
            self.requests.append(json.loads(await reader.readexactly(int(headers["content-length"]))))
            await self.behaviour(len(self.requests), writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client hung up, which is what a bounded client does
        finally:
            writer.close()

    async def __aenter__(self) -> HostileServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()


@dataclass(frozen=True)
class Format:
    """The bytes of one wire format and the model that speaks it."""

    name: str

    def model(self, server: HostileServer, **settings: Any) -> OpenAICompatModel | AnthropicModel:
        options = ProviderSettings(**settings).resolved({}).provider_options()
        if self.name == "openai":
            return OpenAICompatModel(base_url=f"http://127.0.0.1:{server.port}/v1", env={}, **options)
        return AnthropicModel(base_url=f"http://127.0.0.1:{server.port}", env={}, **options)

    def spec(self, server: HostileServer) -> tuple[str, dict[str, str]]:
        """A `resolve_llm` spec and environment naming this server."""
        if self.name == "openai":
            return "openai:gpt-4o", {"OPENAI_BASE_URL": f"http://127.0.0.1:{server.port}/v1"}
        return "anthropic:claude-sonnet-4-5", {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.port}"}

    @staticmethod
    def _event(data: dict[str, Any], name: str | None = None) -> bytes:
        return (f"event: {name}\n" if name else "").encode() + f"data: {json.dumps(data)}\n\n".encode()

    def start(self) -> bytes:
        """The events before the first text delta."""
        if self.name == "openai":
            return b""
        return (self._event({"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 5}}},
                            "message_start")
                + self._event({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
                              "content_block_start"))

    def delta(self, text: str) -> bytes:
        """One streamed text delta."""
        if self.name == "openai":
            return self._event({"choices": [{"index": 0, "delta": {"content": text}}]})
        return self._event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
                           "content_block_delta")

    def end(self, usage: dict[str, Any] | None = None) -> bytes:
        """The end of a whole stream: the stop reason, the usage, and the end marker."""
        usage = usage or {}
        if self.name == "openai":
            return (self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                    + self._event({"choices": [], "usage": usage}) + b"data: [DONE]\n\n")
        return (self._event({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage},
                            "message_delta")
                + self._event({"type": "message_stop"}, "message_stop"))

    def usage(self, prompt: Any, completion: Any) -> dict[str, Any]:
        """A usage object in this format."""
        if self.name == "openai":
            return {"prompt_tokens": prompt, "completion_tokens": completion}
        return {"input_tokens": prompt, "output_tokens": completion}

    def body(self, text: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        """A whole non-streamed answer."""
        if self.name == "openai":
            return {"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                              "finish_reason": "stop"}], "usage": usage or {}}
        return {"type": "message", "model": "m", "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn", "usage": usage or {}}


FORMATS = (Format("openai"), Format("anthropic"))


async def endless(writer: asyncio.StreamWriter, piece: bytes, every: float = 0.05) -> None:
    """Write `piece` every `every` seconds until the client hangs up."""
    while True:
        writer.write(piece)
        await writer.drain()
        await asyncio.sleep(every)
