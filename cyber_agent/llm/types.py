"""Wire-level types shared by every model provider and by the trace records.

`llm/` is the lowest leaf of the package: it imports nothing else from cyber_agent except
`errors`. `trace/` reuses `ToolCall` and `Usage` from here so a message stores exactly what a
provider returned.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DeltaCallback", "LLMCall", "LLMResponse", "RetryRecord", "ToolCall", "Usage"]

FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "other"]
"""Why a model stopped, in one vocabulary for every provider."""

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop", "end_turn": "stop", "stop_sequence": "stop", "eos": "stop", "eos_token": "stop",
    "tool_calls": "tool_calls", "function_call": "tool_calls", "tool_use": "tool_calls",
    "length": "length", "max_tokens": "length", "model_context_window_exceeded": "length",
    "content_filter": "content_filter", "refusal": "content_filter", "safety": "content_filter",
}


def normalise_finish_reason(value: Any) -> FinishReason | None:
    """Map an OpenAI or Anthropic finish/stop reason onto `FinishReason`; None when there was none."""
    if value is None or value == "":
        return None
    return _FINISH_REASONS.get(str(value).strip().lower(), "other")

DeltaCallback = Callable[[str], None]

_dump_arguments = json.JSONEncoder(ensure_ascii=False).encode  # `json.dumps(..., ensure_ascii=False)`, built once


class ToolCall(BaseModel):
    """One tool call requested by a model."""

    model_config = ConfigDict(extra="ignore")

    id: str
    """Provider-assigned call id; tool results refer back to it."""
    name: str
    """Name of the tool the model asked for."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Parsed JSON arguments (empty when they could not be parsed)."""
    raw_arguments: str | None = None
    """The argument text as the model sent it, kept when it did not parse."""
    parse_error: str | None = None
    """Why the arguments did not parse; the runner returns it to the model as a tool error."""
    incomplete: str | None = None
    """Why the call is not whole (cut off by the output limit, no closing tag, arguments not valid
    JSON); None for a complete call. The runner never executes an incomplete call."""

    def to_openai(self) -> dict[str, Any]:
        """Render as an OpenAI chat-completions `tool_calls` entry."""
        args = self.raw_arguments if self.parse_error else _dump_arguments(self.arguments)
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": args}}


class Usage(BaseModel):
    """Token usage and charge of one or more model calls."""

    prompt_tokens: int = 0
    """Input tokens, including cached ones."""
    completion_tokens: int = 0
    """Output tokens."""
    cached_tokens: int = 0
    """Input tokens served from the provider's prompt cache."""
    cost_usd: float | None = None
    """Charge reported by the provider; None when it reported none."""
    reported: bool = True
    """False when the provider reported no usage: the counts are then an estimate (characters ÷ 4), never a silent 0."""
    invalid: str | None = None
    """What the provider reported when it could not be booked (negative, non-finite, absurd); the counts
    are then the estimate (`cyber_agent/llm/usage_check.py:validated_usage`)."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = None
        if self.cost_usd is not None or other.cost_usd is not None:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cost_usd=cost,
        )


class RetryRecord(BaseModel):
    """One failed attempt of a provider call that was retried: what failed and how long the client waited."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    attempt: int
    """The attempt that failed, from 1."""
    status: int | None = None
    """Its HTTP status; None for a network failure (refused connection, timeout)."""
    error: str
    """`HTTP 429`, or the transport exception's type (`ReadTimeout`, `ConnectError`)."""
    wait_s: float
    """Seconds slept before the next attempt."""
    retry_after: bool = False
    """True when the wait is the server's `Retry-After` hint (capped), False for backoff."""
    partial_text: str | None = None
    """Text the failed attempt had streamed before it was cut off (clipped), None when it sent none."""


class LLMResponse(BaseModel):
    """What one model call returned: text, tool calls, usage and cost."""

    content: str = ""
    """Assistant text (may be empty when the model only calls tools)."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Tool calls in the order the model made them."""
    usage: Usage = Field(default_factory=Usage)
    """Token usage of this call."""
    cost: float = 0.0
    """USD cost: the provider's charge when reported, else a price-table lower bound."""
    cost_estimated: bool = False
    """True when `cost` comes from the price table rather than the provider."""
    model: str = ""
    """Model name that answered."""
    finish_reason: FinishReason | None = None
    """Why the model stopped, normalised from the provider's value; "length" means the reply was
    cut by the output limit, so every tool call in it is incomplete."""
    retries: list[RetryRecord] = Field(default_factory=list)
    """Attempts of this call that failed and were retried, in order ([] when the first attempt answered)."""

    @field_validator("finish_reason", mode="before")
    @classmethod
    def _normalise_finish_reason(cls, value: Any) -> FinishReason | None:
        return normalise_finish_reason(value)

    def checked(self) -> LLMResponse:
        """This response with every tool call marked incomplete when the reply was cut ("length")."""
        cut = "the call was cut off (finish_reason=length)"
        if self.finish_reason != "length" or all(cut in (call.incomplete or "") for call in self.tool_calls):
            return self
        calls = [
            call if cut in (call.incomplete or "")
            else call.model_copy(update={"incomplete": f"{cut}; {call.incomplete}" if call.incomplete else cut})
            for call in self.tool_calls
        ]
        return self.model_copy(update={"tool_calls": calls})

    @classmethod
    def coerce(cls, value: LLMResponse | Mapping[str, Any]) -> LLMResponse:
        """Accept an LLMResponse or the original design's dict (content, tool_calls, prompt_tokens, ...)."""
        if isinstance(value, LLMResponse):
            return value
        data = dict(value)
        if "usage" not in data:
            data["usage"] = {
                "prompt_tokens": data.pop("prompt_tokens", 0) or 0,
                "completion_tokens": data.pop("completion_tokens", 0) or 0,
                "cached_tokens": data.pop("cached_tokens", 0) or 0,
            }
        calls = []
        for call in data.get("tool_calls") or []:
            if isinstance(call, Mapping) and "function" in call:
                from cyber_agent.llm.toolcall_json import parse_tool_arguments

                fn = call["function"]
                calls.append(parse_tool_arguments(call.get("id", ""), fn.get("name", ""), fn.get("arguments")))
            else:
                calls.append(call)
        data["tool_calls"] = calls
        data["content"] = data.get("content") or ""
        return cls.model_validate(data)


@runtime_checkable
class LLMCall(Protocol):
    """The model contract: any async callable with this shape plugs into the runner."""

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse: ...
