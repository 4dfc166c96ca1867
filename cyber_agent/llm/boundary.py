"""The one place provider bytes become `LLMResponse`s, and where any model's reply is normalised.

Both bundled providers (`cyber_agent/llm/openai_compat.py`, `cyber_agent/llm/anthropic.py`) describe
their wire format as a `Wire` and call `call_provider`; everything else is shared here:

- an overall **deadline** per call (every attempt, backoff wait and streamed chunk included);
- a cap on the **output** one answer may carry (`max_output_chars`, streamed or not), on the
  **bytes** of a non-streamed body or of one streamed event (`max_body_bytes`), and on the bytes
  of an **error body** read to quote it (`max_error_bytes`). Exceeding one raises
  `LLMTransportError` naming the setting and its value; it is not retried.
- a stream that ends **without its end marker** (`[DONE]` / a `finish_reason`; `message_stop` /
  a `stop_reason`), or whose connection **drops midway**, is a failed attempt: retried under the
  retry policy (`RetryRecord.partial_text` keeps what it had sent) and, once the retries are used
  up, a transport error. It is never a completed answer.
- **usage** is validated (`cyber_agent/llm/usage_check.py:validated_usage`) and the cost filled in.

`normalise_reply` is the runner's side of the same boundary: any `LLMCall`'s return value (a
custom one included) is coerced, its usage validated and, when it carries no cost, priced from
the price table (`cost_estimated`) or left unpriced for the runner to fail closed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from pydantic import ValidationError

from cyber_agent.errors import LLMError, LLMProtocolError, LLMTransportError
from cyber_agent.llm.http_retry import ProviderHTTP, RetryableRead, ServerSentEvent
from cyber_agent.llm.pricing import ModelPrice, with_cost
from cyber_agent.llm.provider_errors import limit_text
from cyber_agent.llm.settings import (
    DEFAULT_DEADLINE, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_ERROR_BYTES, DEFAULT_MAX_OUTPUT_CHARS,
)
from cyber_agent.llm.types import DeltaCallback, LLMResponse, RetryRecord, Usage
from cyber_agent.llm.usage_check import read_cost, read_count, validated_usage

__all__ = ["CallLimits", "StreamAssembler", "Wire", "call_provider", "normalise_reply", "output_chars"]

_log = logging.getLogger("cyber_agent.llm")


@dataclass(frozen=True, kw_only=True)
class CallLimits:
    """Per-call limits at the provider boundary (`cyber_agent/llm/settings.py:ProviderSettings` fills them)."""

    deadline: float = DEFAULT_DEADLINE
    """Seconds one call may take overall, every attempt and wait included."""
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    """Characters of text and tool arguments one answer may carry."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Bytes of a non-streamed body, or of one streamed event, read."""
    max_error_bytes: int = DEFAULT_MAX_ERROR_BYTES
    """Bytes of an error body read to quote it."""


class StreamAssembler(Protocol):
    """Builds one response from a provider's server-sent events (one per wire format)."""

    chars: int
    """Characters of text and tool arguments absorbed so far."""

    def feed_event(self, event: ServerSentEvent) -> str:
        """Absorb one event and return its text delta ("" when it carries none)."""

    @property
    def ended(self) -> bool:
        """True once the stream's end marker arrived (nothing after it is read)."""

    @property
    def complete(self) -> bool:
        """True when what arrived is a whole answer: its end marker, or the reason the model stopped."""

    def partial_text(self) -> str:
        """The text absorbed so far."""

    def result(self) -> LLMResponse:
        """The assembled response."""


@dataclass(frozen=True, kw_only=True)
class Wire:
    """What differs between two providers' wire formats; the rest of a call is `call_provider`."""

    name: str
    """The API's name for error texts ("chat completions", "Messages API")."""
    path: str
    """Endpoint path under the base URL."""
    parse: Callable[[Mapping[str, Any], str], LLMResponse]
    """A non-streamed JSON body and the requested model -> the response (cost not yet filled)."""
    assembler: Callable[[str], StreamAssembler]
    """A fresh stream assembler for the requested model."""
    end_marker: str
    """How a finished stream ends, for the cut-off text."""


def output_chars(response: LLMResponse) -> int:
    """Characters of text and tool arguments in `response` (what `max_output_chars` caps)."""
    return len(response.content or "") + sum(
        len(c.name) + len(c.raw_arguments or "") + len(json.dumps(c.arguments)) for c in response.tool_calls)


async def _lines(response: httpx.Response, limits: CallLimits) -> AsyncIterator[str]:
    """Split a streamed body into lines, never buffering more than `max_body_bytes` of one line."""
    pending = bytearray()
    async for chunk in response.aiter_bytes():
        pending += chunk
        if b"\n" in chunk:  # lines end in \n or \r\n (a lone \r is not used by these APIs)
            *lines, rest = pending.split(b"\n")
            pending = bytearray(rest)
            for line in lines:
                yield line.rstrip(b"\r").decode("utf-8", errors="replace")
        if len(pending) > limits.max_body_bytes:
            raise LLMTransportError(limit_text("max_body_bytes", limits.max_body_bytes, "bytes",
                                               "a streamed line grew without end"))
    if pending:
        yield bytes(pending).rstrip(b"\r").decode("utf-8", errors="replace")


async def _events(response: httpx.Response, limits: CallLimits) -> AsyncIterator[ServerSentEvent]:
    event, data, size = "", list[str](), 0
    async for line in _lines(response, limits):
        if not line:
            if data:
                yield ServerSentEvent(event or "message", "\n".join(data))
            event, data, size = "", [], 0
            continue
        if line.startswith(":"):  # comment / keep-alive: only the deadline ends a stream of them
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
            size += len(value)
            if size > limits.max_body_bytes:
                raise LLMTransportError(limit_text("max_body_bytes", limits.max_body_bytes, "bytes",
                                                   "one streamed event grew without end"))
        elif name == "event":
            event = value
    if data:  # a server that closes without the final blank line still meant the event
        yield ServerSentEvent(event or "message", "\n".join(data))


def _too_long(limits: CallLimits) -> LLMTransportError:
    return LLMTransportError(limit_text("max_output_chars", limits.max_output_chars, "characters", "the answer was cut"))


async def _read_stream(response: httpx.Response, wire: Wire, model: str, limits: CallLimits,
                       on_delta: DeltaCallback | None) -> LLMResponse:
    assembler = wire.assembler(model)
    try:
        async for event in _events(response, limits):
            text = assembler.feed_event(event)
            if assembler.chars > limits.max_output_chars:
                raise _too_long(limits)
            if text and on_delta is not None:
                on_delta(text)
            if assembler.ended:
                break
    except httpx.TransportError as exc:  # the connection dropped (or went silent) mid-answer
        partial = assembler.partial_text()
        raise RetryableRead(type(exc).__name__, f"the {wire.name} stream broke after {len(partial)} characters "
                            f"({type(exc).__name__}: {exc or 'no detail'})", partial) from exc
    if not assembler.complete:
        partial = assembler.partial_text()
        raise RetryableRead("stream cut off", f"the {wire.name} stream ended without its end marker "
                            f"({wire.end_marker}) after {len(partial)} characters", partial)
    return assembler.result()


async def _read_body(response: httpx.Response, wire: Wire, model: str, limits: CallLimits) -> LLMResponse:
    raw = bytearray()  # one buffer, never more than max_body_bytes
    try:
        async for chunk in response.aiter_bytes():
            if len(raw) + len(chunk) > limits.max_body_bytes:
                raise LLMTransportError(limit_text("max_body_bytes", limits.max_body_bytes, "bytes",
                                                   f"the {wire.name} answer body was not read whole"))
            raw += chunk
    except httpx.TransportError as exc:
        raise RetryableRead(type(exc).__name__, f"the {wire.name} answer broke after {len(raw)} bytes "
                            f"({type(exc).__name__}: {exc or 'no detail'})") from exc
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        excerpt = bytes(raw[:200]).decode("utf-8", errors="replace")
        raise LLMProtocolError(f"{wire.name} answered HTTP {response.status_code} with a body that is not JSON: "
                               f"{excerpt!r}") from exc
    if not isinstance(data, dict):
        raise LLMProtocolError(f"{wire.name} answered with JSON that is not an object")
    parsed = wire.parse(data, model)
    if output_chars(parsed) > limits.max_output_chars:
        raise _too_long(limits)
    return parsed


async def call_provider(
    http: ProviderHTTP, wire: Wire, body: Mapping[str, Any], *, messages: Sequence[Mapping[str, Any]], model: str,
    streaming: bool, on_delta: DeltaCallback | None, limits: CallLimits, prices: Mapping[str, ModelPrice] | None,
) -> LLMResponse:
    """Send one call over `http` in `wire`'s format and return its checked, validated and priced response."""
    retries: list[RetryRecord] = []

    async def read(response: httpx.Response) -> LLMResponse:
        if streaming:
            return await _read_stream(response, wire, model, limits, on_delta)
        return await _read_body(response, wire, model, limits)

    try:
        async with asyncio.timeout(limits.deadline) as scope:
            response = await http.call(wire.path, body, read, retries=retries, max_error_bytes=limits.max_error_bytes)
    except TimeoutError as exc:
        if not scope.expired():
            raise
        error = LLMTransportError(limit_text("deadline", limits.deadline, "s",
                                             f"POST {http.redact(http.url(wire.path))} did not finish"))
        error.retries = tuple(retries)
        _log.info("model call stopped at its deadline of %g s after %d retried attempt(s)", limits.deadline, len(retries))
        raise error from exc
    except LLMError as exc:
        exc.retries = exc.retries or tuple(retries)
        raise
    response = validated_usage(response, messages)
    if retries:
        response = response.model_copy(update={"retries": retries})
    return with_cost(response, model, prices)


def _sanitised(value: Mapping[str, Any]) -> dict[str, Any]:
    """The legacy dict form with unbookable token counts replaced by 0 and recorded as invalid usage."""
    data = dict(value)
    if "usage" in data:
        return data
    problems: list[str] = []
    counts = [read_count(data, key, problems) for key in ("prompt_tokens", "completion_tokens", "cached_tokens")]
    for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
        data.pop(key, None)
    if "cost" in data and read_cost(data, "cost", problems) is None:
        data.pop("cost")
    data["usage"] = Usage(prompt_tokens=counts[0], completion_tokens=counts[1], cached_tokens=counts[2],
                          invalid="; ".join(problems) or None)
    return data


def normalise_reply(raw: LLMResponse | Mapping[str, Any], messages: Sequence[Mapping[str, Any]], model: str,
                    prices: Mapping[str, ModelPrice] | None = None) -> LLMResponse:
    """Any `LLMCall`'s reply as the runner books it: checked, usage validated, and priced when it has no cost.

    A reply whose `cost` was never set (a custom `LLMCall` returning only usage) is priced from
    the table as a lower bound (`cost_estimated`); a model the table lacks stays at 0 with
    `cost_estimated` set, so `cyber_agent/llm/pricing.py:is_unpriced` flags it and a USD limit fails closed.
    """
    try:
        response = LLMResponse.coerce(raw if isinstance(raw, LLMResponse) else _sanitised(raw))
    except ValidationError as exc:
        raise LLMProtocolError(f"the model returned a reply that is not an LLMResponse: {exc}") from None
    response = validated_usage(response.checked(), messages)
    if "cost" not in response.model_fields_set:
        response = with_cost(response, model, prices)
    return response
