"""Call OpenAI-compatible chat completions: OpenAI, vLLM, Ollama, llama.cpp, DeepSeek, Qwen, OpenRouter."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from cyber_agent.errors import ConfigurationError, LLMProtocolError
from cyber_agent.llm.boundary import CallLimits, Wire, call_provider
from cyber_agent.llm.http_retry import DEFAULT_TIMEOUT, ProviderHTTP, RetryPolicy, ServerSentEvent, Sleep
from cyber_agent.llm.pricing import ModelPrice
from cyber_agent.llm.provider_errors import Origin
from cyber_agent.llm.toolcall_json import parse_tool_arguments
from cyber_agent.llm.types import DeltaCallback, LLMResponse, ToolCall, Usage, normalise_finish_reason
from cyber_agent.llm.usage_check import estimated_usage, read_cost, read_count

__all__ = ["OPENAI_DEFAULT_BASE_URL", "OpenAICompatModel", "estimated_usage", "parse_chat_completion", "parse_openai_usage"]

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"


def parse_openai_usage(raw: Mapping[str, Any] | None) -> Usage:
    """Read a chat-completions `usage` object, including cached tokens and a reported charge.

    A count or charge that cannot be booked (negative, non-finite, absurd) reads 0 and is named
    in `Usage.invalid`; the provider boundary then books the estimate instead.
    """
    if not raw:
        return Usage(reported=False)  # missing, not zero: the caller estimates it
    problems: list[str] = []
    details = raw.get("prompt_tokens_details") or {}
    if not isinstance(details, Mapping):
        details = {}
    # DeepSeek reports cache hits under its own name instead of prompt_tokens_details.
    cached = read_count(details, "cached_tokens", problems) or read_count(raw, "prompt_cache_hit_tokens", problems)
    return Usage(
        prompt_tokens=read_count(raw, "prompt_tokens", problems),
        completion_tokens=read_count(raw, "completion_tokens", problems),
        cached_tokens=cached,
        cost_usd=read_cost(raw, "cost", problems),  # OpenRouter's charge in USD; 0 for free models is a real charge
        invalid="; ".join(problems) or None,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return ""


def _raise_body_error(data: Mapping[str, Any]) -> None:
    # OpenRouter and some proxies report failures inside a 2xx body or stream.
    error = data.get("error")
    if error:
        message = error.get("message", error) if isinstance(error, Mapping) else error
        raise LLMProtocolError(f"provider reported an error in its answer: {message}")


def parse_chat_completion(data: Mapping[str, Any], requested_model: str) -> LLMResponse:
    """Turn a non-streamed chat-completions body into an LLMResponse (cost not yet filled)."""
    _raise_body_error(data)
    choices = data.get("choices") or []
    if not choices or not isinstance(choices[0], Mapping):
        raise LLMProtocolError(f"chat completion has no choices: {str(data)[:200]}")
    choice = choices[0]
    message = choice.get("message") or {}
    calls = [
        parse_tool_arguments(call.get("id") or f"call_{i}", (call.get("function") or {}).get("name", ""),
                             (call.get("function") or {}).get("arguments"))
        for i, call in enumerate(message.get("tool_calls") or [])
    ]
    return LLMResponse(
        content=_text(message.get("content")),
        tool_calls=calls,
        usage=parse_openai_usage(data.get("usage")),
        model=data.get("model") or requested_model,
        finish_reason=normalise_finish_reason(choice.get("finish_reason")),
    ).checked()


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamAssembler:
    """Accumulate chat-completion chunks; tool-call fragments are keyed by their `index`."""

    requested_model: str
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: Usage = field(default_factory=lambda: Usage(reported=False))  # until a chunk reports it
    model: str = ""
    finish_reason: str | None = None
    chars: int = 0
    done: bool = False

    @property
    def ended(self) -> bool:
        """True once `[DONE]` arrived."""
        return self.done

    @property
    def complete(self) -> bool:
        """`[DONE]` or a `finish_reason` arrived (a few servers end with the usage chunk and close)."""
        return self.done or self.finish_reason is not None

    def partial_text(self) -> str:
        """The text absorbed so far."""
        return "".join(self.text)

    def feed_event(self, event: ServerSentEvent) -> str:
        """Absorb one server-sent event: `[DONE]` or a JSON chunk."""
        if event.data.strip() == "[DONE]":
            self.done = True
            return ""
        return self.feed(event.json())

    def feed(self, chunk: Mapping[str, Any]) -> str:
        """Absorb one chunk and return its text delta ("" when it carries none)."""
        _raise_body_error(chunk)
        if chunk.get("usage"):  # the last chunk (include_usage), or every chunk on some servers
            self.usage = parse_openai_usage(chunk["usage"])
        self.model = chunk.get("model") or self.model
        delta_text = ""
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            delta_text = _text(delta.get("content"))
            if delta_text:
                self.text.append(delta_text)
                self.chars += len(delta_text)
            for piece in delta.get("tool_calls") or []:
                self._feed_call(piece)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return delta_text

    def _feed_call(self, piece: Mapping[str, Any]) -> None:
        index = piece.get("index")
        if not isinstance(index, int):
            # Servers that omit `index` send each call whole: a new id starts a new call, a
            # fragment without id continues the last one.
            call_id = piece.get("id")
            known = [i for i, c in self.calls.items() if call_id and c.id == call_id]
            if known:
                index = known[0]
            elif call_id or not self.calls:
                index = len(self.calls)
            else:
                index = max(self.calls)
        call = self.calls.setdefault(index, _PartialCall())
        call.id = piece.get("id") or call.id
        fn = piece.get("function") or {}
        name = fn.get("name")
        if name and name != call.name:
            # OpenAI sends the name once; a few servers repeat it whole, which must not double it.
            call.name = name if not call.name else call.name + name
        if fn.get("arguments"):
            call.arguments.append(str(fn["arguments"]))
            self.chars += len(call.arguments[-1])

    def result(self) -> LLMResponse:
        """Return the assembled response."""
        calls: list[ToolCall] = [
            parse_tool_arguments(c.id or f"call_{i}", c.name, "".join(c.arguments))
            for i, c in sorted(self.calls.items())
        ]
        return LLMResponse(
            content="".join(self.text),
            tool_calls=calls,
            usage=self.usage,
            model=self.model or self.requested_model,
            finish_reason=normalise_finish_reason(self.finish_reason),
        ).checked()


_WIRE = Wire(name="chat completions", path="chat/completions", parse=parse_chat_completion,
             assembler=_StreamAssembler, end_marker="data: [DONE] or a finish_reason")


def _openai_message(message: dict[str, Any]) -> dict[str, Any]:
    # The runner marks failed tool results `is_error` for Anthropic; chat completions has no such
    # field (OpenAI refuses unknown message keys), so the error travels as the result text alone.
    if "is_error" in message and message.get("role") == "tool":
        return {key: value for key, value in message.items() if key != "is_error"}
    return message


def _max_tokens_field(base_url: str) -> str:
    return "max_completion_tokens" if httpx.URL(base_url).host == "api.openai.com" else "max_tokens"


class OpenAICompatModel:
    """Call an OpenAI-compatible `/chat/completions` endpoint; an instance is an `LLMCall`."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        stream: bool | None = None,
        max_tokens: int | None = None,
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
        self.base_url = (base_url or env.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL).rstrip("/")
        key = api_key or env.get("OPENAI_API_KEY") or None
        origin = Origin(
            provider="OpenAI-compatible server", base_url_env="OPENAI_BASE_URL", key_env="OPENAI_API_KEY", needs_v1=True,
            base_url_from="base_url=" if base_url else "OPENAI_BASE_URL" if env.get("OPENAI_BASE_URL") else "the default",
            key_from=None if key is None else "api_key=" if api_key else "OPENAI_API_KEY",
        )
        if key is None and self.base_url == OPENAI_DEFAULT_BASE_URL:
            raise ConfigurationError(
                "OPENAI_API_KEY",
                f"no API key for {OPENAI_DEFAULT_BASE_URL}; set OPENAI_API_KEY (or pass api_key=...), "
                "or set OPENAI_BASE_URL to a local server that needs no key",
            )
        headers = {"content-type": "application/json", **(extra_headers or {})}
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        # None streams only when the caller wants deltas: a non-streamed body is simpler for
        # servers with shaky SSE support, and nobody is watching the text arrive.
        self.stream = stream
        if max_tokens is not None and max_tokens <= 0:
            raise ConfigurationError("max_tokens", f"must be positive (or None for the server's default), got {max_tokens!r}")
        self.max_tokens = max_tokens
        self._extra_body = dict(extra_body or {})
        self._prices = prices
        self._limits = limits or CallLimits()
        self._http = ProviderHTTP(
            base_url=self.base_url, headers=headers, timeout=timeout, retry=retry, client=client,
            transport=transport, sleep=sleep, secrets=(key,) if key else (), origin=origin,
        )

    def __repr__(self) -> str:
        return f"OpenAICompatModel(base_url={self.base_url!r})"

    def build_body(self, messages: list[dict[str, Any]], model: str, tools: list[dict[str, Any]] | None,
                   temperature: float | None, *, stream: bool) -> dict[str, Any]:
        """Return the JSON body sent for one call."""
        body: dict[str, Any] = {"model": model, "messages": [_openai_message(m) for m in messages]}
        if tools:
            body["tools"] = tools
        if temperature is not None:
            body["temperature"] = temperature
        if self.max_tokens is not None:
            # OpenAI itself takes max_completion_tokens (its reasoning models refuse max_tokens);
            # vLLM, Ollama, llama.cpp, DeepSeek and Qwen servers read max_tokens.
            body[_max_tokens_field(self.base_url)] = self.max_tokens
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        # Last, so extra_body can override anything; None drops a field a server rejects
        # (e.g. {"stream_options": None} for servers without usage-in-stream support).
        body.update(self._extra_body)
        return {key: value for key, value in body.items() if value is not None}

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Send one chat completion and return its text, tool calls, usage and cost."""
        if not model:
            raise ConfigurationError("model", "is empty; pass the model name to call, e.g. 'gpt-4o-mini'")
        streaming = self.stream if self.stream is not None else on_delta is not None
        body = self.build_body(messages, model, tools, temperature, stream=streaming)
        return await call_provider(self._http, _WIRE, body, messages=messages, model=model, streaming=streaming,
                                   on_delta=on_delta, limits=self._limits, prices=self._prices)
