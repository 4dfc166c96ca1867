"""Validate the usage a provider (or a custom `LLMCall`) reports before anything books it.

A reported count is booked only when it is a whole number between 0 and `MAX_CALL_TOKENS`, and a
reported charge only when it is finite and between 0 and `MAX_CALL_COST_USD`. Anything else
(negative, NaN, Infinity, 10**30) is *invalid*: the response's usage is replaced by the
characters ÷ 4 estimate (`estimated_usage`), `Usage.invalid` says what was reported, and the
runner writes both into the message (`usage_invalid`, `usage_estimated`) and the trace. A reply can
therefore never refund a budget, crash a run or overflow a store column.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from cyber_agent.llm.types import LLMResponse, Usage

__all__ = ["MAX_CALL_COST_USD", "MAX_CALL_TOKENS", "estimated_usage", "read_cost", "read_count", "usage_problem",
           "validated_usage"]

MAX_CALL_TOKENS = 100_000_000
"""More tokens than any model reads or writes in one call (the largest context windows are 10 M): above it a count is absurd."""
MAX_CALL_COST_USD = 1_000.0
"""More USD than any single call costs at list prices (1 M output tokens of the dearest model cost 600): above it a charge is absurd."""


def _describe(key: str, value: Any) -> str:
    text = repr(value)
    return f"{key}={text if len(text) <= 40 else text[:37] + '...'}"


def read_count(raw: Mapping[str, Any], key: str, problems: list[str]) -> int:
    """Read token count `key` of a provider's usage object; an unbookable value adds to `problems` and reads 0."""
    value = raw.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0  # absent or not a number: not reported (the OpenAI parser estimates what is missing)
    if isinstance(value, float) and not math.isfinite(value):
        problems.append(_describe(key, value))
        return 0
    count = int(value)
    if not 0 <= count <= MAX_CALL_TOKENS:
        problems.append(_describe(key, value))
        return 0
    return count


def read_cost(raw: Mapping[str, Any], key: str, problems: list[str]) -> float | None:
    """Read a reported charge in USD; None when absent, and an unbookable value adds to `problems`."""
    value = raw.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or not 0 <= value <= MAX_CALL_COST_USD:
        problems.append(_describe(key, value))
        return None
    return float(value)


def usage_problem(usage: Usage, cost: float | None = None) -> str | None:
    """Why `usage` (and a response's `cost`) cannot be booked as sent, or None when every number is sound."""
    problems = [usage.invalid] if usage.invalid else []
    for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
        value = getattr(usage, key)
        if not 0 <= value <= MAX_CALL_TOKENS:
            problems.append(_describe(key, value))
    for key, charge in (("cost_usd", usage.cost_usd), ("cost", cost)):
        if charge is not None and (not math.isfinite(charge) or not 0 <= charge <= MAX_CALL_COST_USD):
            problems.append(_describe(key, charge))
    return "; ".join(problems) or None


def estimated_usage(messages: Sequence[Mapping[str, Any]], response: LLMResponse) -> Usage:
    """Usage the provider did not report (e.g. a stream without its usage chunk), estimated as characters ÷ 4."""
    sent = sum(len(str(m.get("content") or "")) + len(str(m.get("tool_calls") or "")) for m in messages)
    answered = len(response.content or "") + sum(len(c.name) + len(str(c.arguments)) for c in response.tool_calls)
    return Usage(prompt_tokens=max(1, sent // 4), completion_tokens=max(1, answered // 4) if answered else 0,
                 reported=False)


def validated_usage(response: LLMResponse, messages: Sequence[Mapping[str, Any]]) -> LLMResponse:
    """`response` with usage it can book: estimated when missing, estimated and flagged `invalid` when unsound.

    An invalid report also drops the response's cost (it is priced again from the estimate).
    """
    problem = usage_problem(response.usage, response.cost if "cost" in response.model_fields_set else None)
    if problem is not None:
        estimate = estimated_usage(messages, response).model_copy(
            update={"invalid": f"reported {problem}; booked the estimate instead"})
        # A fresh response without its cost fields: the caller prices the estimate from the table.
        data = response.model_dump(exclude={"usage", "cost", "cost_estimated"})
        return LLMResponse.model_validate({**data, "usage": estimate})
    if not response.usage.reported and not (response.usage.prompt_tokens or response.usage.completion_tokens):
        return response.model_copy(update={"usage": estimated_usage(messages, response)})
    return response
