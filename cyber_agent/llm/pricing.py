"""Price model calls: the provider's own charge when it reports one, else a lower-bound table.

The table holds list prices in USD per million tokens as published by OpenAI, Anthropic and
DeepSeek on `PRICES_AS_OF`. It is a *lower bound*: it ignores long-context surcharges, batch and
priority tiers, Anthropic's cache-write premium (cache-creation tokens are priced as plain
input) and reasoning-token details that providers fold into output tokens. Prices change;
update the table and the date together.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from cyber_agent.llm.types import LLMResponse, Usage

__all__ = ["ModelPrice", "PRICES_AS_OF", "PRICE_TABLE", "compute_cost", "lookup_price", "with_cost"]

PRICES_AS_OF = "2025-10-01"
"""Date the table's prices were copied from the providers' price pages."""


@dataclass(frozen=True, kw_only=True)
class ModelPrice:
    """List price of one model family in USD per million tokens."""

    input: float
    """Uncached input tokens."""
    cached_input: float
    """Input tokens served from the prompt cache."""
    output: float
    """Output tokens (including hidden reasoning tokens)."""


def _price(input: float, cached_input: float, output: float) -> ModelPrice:
    return ModelPrice(input=input, cached_input=cached_input, output=output)


# Keys are name prefixes; the longest prefix ending at a name boundary wins, so
# "gpt-4o-mini-2024-07-18" prices as gpt-4o-mini, not gpt-4o.
PRICE_TABLE: Mapping[str, ModelPrice] = MappingProxyType(
    {
        "gpt-4o": _price(2.50, 1.25, 10.00),
        "gpt-4o-mini": _price(0.15, 0.075, 0.60),
        "gpt-4.1": _price(2.00, 0.50, 8.00),
        "gpt-4.1-mini": _price(0.40, 0.10, 1.60),
        "gpt-4.1-nano": _price(0.10, 0.025, 0.40),
        "o3": _price(2.00, 0.50, 8.00),
        "o3-mini": _price(1.10, 0.55, 4.40),
        "o4-mini": _price(1.10, 0.275, 4.40),
        "claude-opus-4-5": _price(5.00, 0.50, 25.00),
        "claude-opus-4-1": _price(15.00, 1.50, 75.00),
        "claude-opus-4": _price(15.00, 1.50, 75.00),
        "claude-3-opus": _price(15.00, 1.50, 75.00),
        "claude-sonnet-4-5": _price(3.00, 0.30, 15.00),
        "claude-sonnet-4": _price(3.00, 0.30, 15.00),
        "claude-3-7-sonnet": _price(3.00, 0.30, 15.00),
        "claude-3-5-sonnet": _price(3.00, 0.30, 15.00),
        "claude-haiku-4-5": _price(1.00, 0.10, 5.00),
        "claude-3-5-haiku": _price(0.80, 0.08, 4.00),
        "claude-3-haiku": _price(0.25, 0.03, 1.25),
        "deepseek-chat": _price(0.28, 0.028, 0.42),
        "deepseek-reasoner": _price(0.28, 0.028, 0.42),
    }
)
"""Read-only price table keyed by model-name prefix (see the module docstring for its limits)."""

_BOUNDARY = re.compile(r"[-:.@_ ]")


def _normalize(model: str) -> str:
    # Routers prefix the vendor ("openai/gpt-4o", "anthropic/claude-sonnet-4"); the price is the
    # vendor's, so only the last path segment counts.
    return model.strip().lower().rsplit("/", 1)[-1]


def lookup_price(model: str, prices: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """Return the price of `model` by longest matching prefix, or None for an unknown model."""
    table = PRICE_TABLE if prices is None else prices
    name = _normalize(model)
    best: tuple[int, ModelPrice] | None = None
    for key, price in table.items():
        prefix = key.lower()
        if not name or not name.startswith(prefix):
            continue
        rest = name[len(prefix):]
        if rest and not _BOUNDARY.match(rest):
            continue  # "o3" must not price "o3x"; dated ids ("-2024-08-06", "@20250514") still match
        if best is None or len(prefix) > best[0]:
            best = (len(prefix), price)
    return best[1] if best is not None else None


def compute_cost(
    model: str, usage: Usage, prices: Mapping[str, ModelPrice] | None = None
) -> tuple[float, bool]:
    """Return `(usd, estimated)`: the provider's charge if reported, else the table's lower bound.

    An unknown model costs 0.0 with `estimated=True`, so a missing price never looks like a
    confirmed free call.
    """
    if usage.cost_usd is not None:
        return float(usage.cost_usd), False
    price = lookup_price(model, prices)
    if price is None:
        return 0.0, True
    cached = min(max(usage.cached_tokens, 0), max(usage.prompt_tokens, 0))
    uncached = max(usage.prompt_tokens, 0) - cached
    usd = (
        uncached * price.input + cached * price.cached_input + max(usage.completion_tokens, 0) * price.output
    ) / 1_000_000
    return usd, True


def with_cost(response: LLMResponse, requested_model: str, prices: Mapping[str, ModelPrice] | None = None) -> LLMResponse:
    """Return a copy of `response` with `cost` and `cost_estimated` filled in."""
    model = response.model or requested_model
    usd, estimated = compute_cost(model, response.usage, prices)
    if estimated and lookup_price(model, prices) is None and model != requested_model:
        # The answering id may be one the table lacks (a new dated snapshot); the requested
        # alias is a better guess than nothing.
        usd, estimated = compute_cost(requested_model, response.usage, prices)
    return response.model_copy(update={"cost": usd, "cost_estimated": estimated, "model": model})
