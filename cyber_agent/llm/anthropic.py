"""Call the Anthropic Messages API with OpenAI-format messages and tools."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from cyber_agent.errors import ConfigurationError, LLMProtocolError, LLMTransportError
from cyber_agent.llm.anthropic_format import (
    STOP_REASONS,
    from_anthropic_content,
    parse_anthropic_usage,
    to_anthropic_messages,
    to_anthropic_tools,
)
from cyber_agent.llm.boundary import CallLimits, Wire, call_provider
from cyber_agent.llm.http_retry import DEFAULT_TIMEOUT, ProviderHTTP, RetryPolicy, ServerSentEvent, Sleep
from cyber_agent.llm.pricing import ModelPrice
from cyber_agent.llm.provider_errors import Origin
from cyber_agent.llm.toolcall_json import parse_tool_arguments
from cyber_agent.llm.types import DeltaCallback, LLMResponse, normalise_finish_reason

__all__ = ["ANTHROPIC_DEFAULT_BASE_URL", "ANTHROPIC_VERSION", "AnthropicModel"]

ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


def _parse_message(data: Mapping[str, Any], requested_model: str) -> LLMResponse:
    if data.get("type") == "error" or "content" not in data:
        raise LLMProtocolError(f"Anthropic answer has no content: {str(data)[:200]}")
    text, calls = from_anthropic_content(data.get("content") or [])
    reason = data.get("stop_reason")
    return LLMResponse(
        content=text,
        tool_calls=calls,
        usage=parse_anthropic_usage(data.get("usage")),
        model=data.get("model") or requested_model,
        finish_reason=normalise_finish_reason(STOP_REASONS.get(reason, reason) if reason else None),
    ).checked()


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    id: str = ""
    name: str = ""
    input: Any = None


@dataclass
class _EventAssembler:
    """Accumulate Messages-API stream events into one response."""

    requested_model: str
    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    stop_reason: str | None = None
    chars: int = 0
    stopped: bool = False

    @property
    def ended(self) -> bool:
        """True once `message_stop` arrived."""
        return self.stopped

    @property
    def complete(self) -> bool:
        """`message_stop` or a `stop_reason` arrived."""
        return self.stopped or self.stop_reason is not None

    def partial_text(self) -> str:
        """The text absorbed so far."""
        return "".join("".join(b.text) for _, b in sorted(self.blocks.items()) if b.kind == "text")

    def feed_event(self, event: ServerSentEvent) -> str:
        """Absorb one server-sent event (a JSON object with a `type`)."""
        payload = event.json()
        if payload.get("type") == "message_stop":
            self.stopped = True
        return self.feed(payload)

    def feed(self, event: Mapping[str, Any]) -> str:
        """Absorb one event and return its text delta ("" when it carries none)."""
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            self.usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            self.blocks[event.get("index", len(self.blocks))] = _Block(
                kind=block.get("type", ""), text=[block.get("text", "")] if block.get("text") else [],
                id=block.get("id", ""), name=block.get("name", ""), input=block.get("input"),
            )
        elif kind == "content_block_delta":
            block = self.blocks.setdefault(event.get("index", 0), _Block(kind="text"))
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                text: str = str(delta.get("text", ""))
                block.text.append(text)
                self.chars += len(text)
                return text
            if delta.get("type") == "input_json_delta":
                block.text.append(str(delta.get("partial_json", "")))
                self.chars += len(block.text[-1])
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            # Counts in message_delta are cumulative, so they replace the message_start ones.
            self.usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
        elif kind == "error":
            error = event.get("error") or {}
            raise LLMTransportError(
                f"Anthropic stream failed: {error.get('type', 'error')}: {error.get('message', '')}"
            )
        return ""

    def result(self) -> LLMResponse:
        """Return the assembled response."""
        text: list[str] = []
        calls = []
        for _, block in sorted(self.blocks.items()):
            if block.kind == "text":
                text.extend(block.text)
            elif block.kind == "tool_use":
                # Streamed input arrives as JSON text; an empty stream means no arguments, and a
                # start block may already carry a complete object.
                raw = "".join(block.text)
                calls.append(parse_tool_arguments(block.id, block.name, raw if raw else (block.input or None)))
        return LLMResponse(
            content="".join(text),
            tool_calls=calls,
            usage=parse_anthropic_usage(self.usage),
            model=self.model or self.requested_model,
            finish_reason=normalise_finish_reason(
                STOP_REASONS.get(self.stop_reason, self.stop_reason) if self.stop_reason else None),
        ).checked()


_WIRE = Wire(name="Messages API", path="v1/messages", parse=_parse_message, assembler=_EventAssembler,
             end_marker="event: message_stop or a stop_reason")


class AnthropicModel:
    """Call the Anthropic Messages API; an instance is an `LLMCall` taking OpenAI-format input."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 8192,
        stream: bool | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
        env: Mapping[str, str] | None = None,
        limits: CallLimits | None = None,
    ) -> None:
        env = os.environ if env is None else env
        given = (base_url or env.get("ANTHROPIC_BASE_URL") or ANTHROPIC_DEFAULT_BASE_URL).rstrip("/")
        # The client appends /v1/messages; a base URL copied with its /v1 would call /v1/v1/messages.
        self.base_url = given.removesuffix("/v1")
        key = api_key or env.get("ANTHROPIC_API_KEY") or None
        origin = Origin(
            provider="Anthropic server", base_url_env="ANTHROPIC_BASE_URL", key_env="ANTHROPIC_API_KEY",
            base_url_from="base_url=" if base_url else "ANTHROPIC_BASE_URL" if env.get("ANTHROPIC_BASE_URL") else "the default",
            key_from=None if key is None else "api_key=" if api_key else "ANTHROPIC_API_KEY",
        )
        if key is None and self.base_url == ANTHROPIC_DEFAULT_BASE_URL:
            raise ConfigurationError(
                "ANTHROPIC_API_KEY",
                f"no API key for {ANTHROPIC_DEFAULT_BASE_URL}; set ANTHROPIC_API_KEY or pass api_key=...",
            )
        if max_tokens <= 0:
            raise ConfigurationError("max_tokens", f"must be positive, got {max_tokens!r}")
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION,
                   **(extra_headers or {})}
        if key is not None:
            headers["x-api-key"] = key
        self.max_tokens = max_tokens
        self.stream = stream  # as in OpenAICompatModel: None streams only when on_delta is given
        self._extra_body = dict(extra_body or {})
        self._prices = prices
        self._limits = limits or CallLimits()
        self._http = ProviderHTTP(
            base_url=self.base_url, headers=headers, timeout=timeout, retry=retry, client=client,
            transport=transport, sleep=sleep, secrets=(key,) if key else (), origin=origin,
        )

    def __repr__(self) -> str:
        return f"AnthropicModel(base_url={self.base_url!r}, max_tokens={self.max_tokens})"

    def build_body(self, messages: list[dict[str, Any]], model: str, tools: list[dict[str, Any]] | None,
                   temperature: float | None, *, stream: bool) -> dict[str, Any]:
        """Return the JSON body sent for one call."""
        system, turns = to_anthropic_messages(messages)
        body: dict[str, Any] = {"model": model, "max_tokens": self.max_tokens, "messages": turns}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = to_anthropic_tools(tools)
        if temperature is not None:
            body["temperature"] = temperature
        if stream:
            body["stream"] = True
        body.update(self._extra_body)
        return body

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Send one Messages-API request and return its text, tool calls, usage and cost."""
        if not model:
            raise ConfigurationError("model", "is empty; pass the model name to call, e.g. 'claude-sonnet-4-5'")
        streaming = self.stream if self.stream is not None else on_delta is not None
        body = self.build_body(messages, model, tools, temperature, stream=streaming)
        return await call_provider(self._http, _WIRE, body, messages=messages, model=model, streaming=streaming,
                                   on_delta=on_delta, limits=self._limits, prices=self._prices)
