"""Fake models shipped with the library, so tests and notebooks run without a network.

`ScriptedModel` plays queued replies and fails loudly when over-called or left unused;
`FunctionModel` answers with a function of the request. Both are `LLMCall`s and record every
request they receive.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeAlias

from cyber_agent.errors import ScriptExhaustedError
from cyber_agent.llm.http_retry import Sleep
from cyber_agent.llm.pricing import compute_cost
from cyber_agent.llm.toolcall_json import parse_tool_arguments
from cyber_agent.llm.types import DeltaCallback, LLMResponse, ToolCall, Usage

__all__ = ["FunctionModel", "ModelFunction", "ModelRequest", "Reply", "ScriptedModel", "ToolCallSpec"]

Reply: TypeAlias = LLMResponse | str | Mapping[str, Any] | Exception
"""A scripted reply: a response, a text answer, a response dict, or an exception to raise."""

ToolCallSpec: TypeAlias = (
    ToolCall | tuple[str, Mapping[str, Any] | str | None] | tuple[str, Mapping[str, Any] | str | None, str]
)
"""A tool call for `ScriptedModel.tool_calls`: `(name, arguments[, call_id])` or a ToolCall."""

_Answer: TypeAlias = LLMResponse | str | Mapping[str, Any]
ModelFunction: TypeAlias = Callable[..., _Answer | Awaitable[_Answer]]
"""What FunctionModel wraps: `fn(messages, tools, **info)` returning (or awaiting) an answer."""


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """One request a fake model received.

    The message list is copied (appending to the history later does not change the record);
    the message dicts themselves are shared, as the runner never mutates a message once sent.
    A deep copy per call made long scripted runs quadratic in time.
    """

    messages: list[dict[str, Any]]
    model: str
    tools: list[dict[str, Any]] | None
    temperature: float | None

    @classmethod
    def capture(cls, messages: list[dict[str, Any]], model: str, tools: list[dict[str, Any]] | None,
                temperature: float | None) -> ModelRequest:
        """Snapshot the arguments of one call."""
        return cls(messages=list(messages), model=model,
                   tools=list(tools) if tools is not None else None, temperature=temperature)

    @property
    def last_message(self) -> dict[str, Any] | None:
        """Return the final message of the request, if any."""
        return self.messages[-1] if self.messages else None

    @property
    def tool_names(self) -> list[str]:
        """Return the names of the tools offered in the request."""
        return [(t.get("function") or t).get("name", "") for t in self.tools or []]


def _describe(reply: object) -> str:
    if isinstance(reply, LLMResponse):
        names = [c.name for c in reply.tool_calls]
        return f"tool calls {names}" if names else f"text {reply.content[:60]!r}"
    if isinstance(reply, Exception):
        return f"raise {type(reply).__name__}"
    return f"{type(reply).__name__} {str(reply)[:60]!r}"


def _to_response(reply: object, *, model: str, index: int, usage: Usage | None, cost: float | None) -> LLMResponse:
    explicit_usage = False
    if isinstance(reply, LLMResponse):
        response = reply
        explicit_usage = "usage" in reply.model_fields_set
    elif isinstance(reply, str):
        response = LLMResponse(content=reply)
    elif isinstance(reply, Mapping):
        response = LLMResponse.coerce(reply)
        explicit_usage = any(k in reply for k in ("usage", "prompt_tokens", "completion_tokens"))
    else:
        raise TypeError(f"a fake model reply must be LLMResponse, str or dict, got {type(reply).__name__}")
    update: dict[str, Any] = {}
    if any(not call.id for call in response.tool_calls):
        # Deterministic ids, so two runs of one script produce identical traces.
        update["tool_calls"] = [
            call if call.id else call.model_copy(update={"id": f"call_{index}_{j}"})
            for j, call in enumerate(response.tool_calls)
        ]
    if not response.model:
        update["model"] = model
    if response.finish_reason is None:
        update["finish_reason"] = "tool_calls" if response.tool_calls else "stop"
    if usage is not None and not explicit_usage:
        update["usage"] = usage
    if "cost" not in response.model_fields_set:
        if cost is not None:
            update["cost"], update["cost_estimated"] = cost, False
        else:
            update["cost"], update["cost_estimated"] = compute_cost(
                update.get("model", response.model), update.get("usage", response.usage)
            )
    return response.model_copy(update=update) if update else response


class ScriptedModel:
    """Play queued replies in order, record each request, and fail when over-called or left unused.

    Use it as a context manager (`with ScriptedModel([...]) as model:`) to check on exit that
    every reply was used, or call `assert_all_used()` yourself.
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        usage: Usage | None = None,
        cost: float | None = None,
        latency: float = 0.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._replies: list[Reply] = list(replies)
        self._next = 0
        self._usage = usage
        self._cost = cost
        self._latency = latency
        self._sleep = sleep
        self.requests: list[ModelRequest] = []
        """Every request received, in call order (including a failing over-call)."""

    @staticmethod
    def text(content: str, *, usage: Usage | None = None, cost: float | None = None) -> LLMResponse:
        """Build a text reply, optionally with its own usage and cost."""
        fields: dict[str, Any] = {"content": content}
        if usage is not None:
            fields["usage"] = usage
        if cost is not None:
            fields["cost"] = cost
        return LLMResponse(**fields)

    @staticmethod
    def tool_call(name: str, arguments: Mapping[str, Any] | str | None = None, *, call_id: str = "",
                  content: str = "", usage: Usage | None = None, cost: float | None = None) -> LLMResponse:
        """Build a reply with one tool call; string arguments are parsed as the model's raw JSON."""
        return ScriptedModel.tool_calls((name, arguments, call_id), content=content, usage=usage, cost=cost)

    @staticmethod
    def tool_calls(*calls: ToolCallSpec, content: str = "", usage: Usage | None = None,
                   cost: float | None = None) -> LLMResponse:
        """Build a reply with parallel tool calls given as `(name, arguments[, call_id])` or ToolCall."""
        parsed: list[ToolCall] = []
        for call in calls:
            if isinstance(call, ToolCall):
                parsed.append(call)
                continue
            name, arguments, *rest = call
            raw = dict(arguments) if isinstance(arguments, Mapping) else arguments
            parsed.append(parse_tool_arguments(rest[0] if rest else "", name, raw))
        reply = ScriptedModel.text(content, usage=usage, cost=cost)
        return reply.model_copy(update={"tool_calls": parsed})

    def add(self, *replies: Reply) -> None:
        """Append replies to the end of the script."""
        self._replies.extend(replies)

    @property
    def remaining(self) -> int:
        """Return how many replies are still queued."""
        return len(self._replies) - self._next

    def assert_all_used(self) -> None:
        """Raise AssertionError naming the replies that were never played."""
        if self.remaining:
            unused = "; ".join(f"#{i}: {_describe(r)}" for i, r in enumerate(self._replies) if i >= self._next)
            raise AssertionError(
                f"ScriptedModel left {self.remaining} of {len(self._replies)} replies unused after "
                f"{len(self.requests)} call(s): {unused}"
            )

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Record the request and play the next reply."""
        request = ModelRequest.capture(messages, model, tools, temperature)
        self.requests.append(request)
        index = self._next
        if index >= len(self._replies):
            last = request.last_message or {}
            raise ScriptExhaustedError(
                f"ScriptedModel was called {len(self.requests)} times but holds {len(self._replies)} "
                f"replies; the extra call's last message was {last.get('role')!r}: "
                f"{str(last.get('content'))[:120]!r}. Add a reply or find why the loop did not stop."
            )
        reply = self._replies[index]
        self._next += 1  # before any await, so concurrent callers take replies in call order
        if self._latency:
            await self._sleep(self._latency)
        if isinstance(reply, Exception):
            raise reply
        response = _to_response(reply, model=model, index=index, usage=self._usage, cost=self._cost)
        if on_delta is not None and response.content:
            on_delta(response.content)
        return response

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:  # do not hide the real failure behind an unused-replies complaint
            self.assert_all_used()

    async def __aenter__(self) -> ScriptedModel:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(exc_type, exc, tb)


class FunctionModel:
    """Answer each call with `fn(messages, tools, **info)`, where fn may be sync or async.

    `info` holds whichever of `model`, `temperature` and `on_delta` fn's signature accepts; when
    fn takes `on_delta` it streams for itself, otherwise the whole text is sent as one delta.
    """

    def __init__(self, fn: ModelFunction, *, usage: Usage | None = None, cost: float | None = None) -> None:
        parameters = inspect.signature(fn).parameters
        var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        self._fn = fn
        self._accepts = frozenset(n for n in ("model", "temperature", "on_delta") if var_kw or n in parameters)
        self._usage = usage
        self._cost = cost
        self.requests: list[ModelRequest] = []
        """Every request received, in call order."""

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Record the request and return fn's answer as an LLMResponse."""
        request = ModelRequest.capture(messages, model, tools, temperature)
        self.requests.append(request)
        info = {"model": model, "temperature": temperature, "on_delta": on_delta}
        # fn gets its own copy: whatever it does to the list must change neither the caller's
        # conversation nor the recorded request.
        fresh = ModelRequest.capture(messages, model, tools, temperature)
        result = self._fn(fresh.messages, fresh.tools, **{k: v for k, v in info.items() if k in self._accepts})
        if inspect.isawaitable(result):
            result = await result
        response = _to_response(result, model=model, index=len(self.requests) - 1, usage=self._usage, cost=self._cost)
        if on_delta is not None and response.content and "on_delta" not in self._accepts:
            on_delta(response.content)
        return response
