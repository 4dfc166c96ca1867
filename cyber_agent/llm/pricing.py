"""Price model calls: the provider's own charge when it reports one, else a lower-bound table.

The table holds list prices in USD per million tokens as published by OpenAI, Anthropic and
DeepSeek on `PRICES_AS_OF`. It is a *lower bound*: it ignores long-context surcharges, batch and
priority tiers, Anthropic's cache-write premium (cache-creation tokens are priced as plain
input) and reasoning-token details that providers fold into output tokens. Prices change;
update the table and the date together.

A model the table lacks is *unpriced*: its usage costs 0.0 and `is_unpriced` says so, so a USD
limit can fail closed instead of never firing. Give prices for such models (or override the
table) with `PRICES_ENV` (`CYBER_AGENT_PRICES`): the path of a JSON file mapping a model-name
prefix to `{"input": ..., "cached_input": ..., "output": ...}` in USD per million tokens
(`cached_input` defaults to `input`). Its entries win over the built-in table.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.types import LLMResponse, Usage

__all__ = ["ModelPrice", "PRICES_AS_OF", "PRICES_ENV", "PRICE_TABLE", "compute_cost", "is_unpriced", "load_user_prices",
           "lookup_price", "with_cost"]

PRICES_ENV = "CYBER_AGENT_PRICES"
"""Environment variable naming a JSON file of user prices (see the module docstring)."""

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


_user_cache: dict[tuple[str, int, int], Mapping[str, ModelPrice]] = {}


def load_user_prices(path: str | None = None) -> Mapping[str, ModelPrice]:
    """Read the user price file (`path`, else `$CYBER_AGENT_PRICES`); empty when none is set.

    A file that cannot be read or is not a valid table raises `ConfigurationError` naming the
    variable: a typo in a price must never silently price a model at 0.
    """
    path = path if path is not None else os.environ.get(PRICES_ENV, "").strip()
    if not path:
        return {}
    try:
        stat = os.stat(path)
        key = (path, stat.st_mtime_ns, stat.st_size)
        cached = _user_cache.get(key)
        if cached is not None:
            return cached
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(PRICES_ENV, f"cannot read the price file {path!r}: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigurationError(PRICES_ENV, f"{path!r} must hold a JSON object of model prefix -> prices")
    table: dict[str, ModelPrice] = {}
    for key, entry in raw.items():
        try:
            if not isinstance(entry, dict) or not {"input", "output"} <= set(entry):
                raise ValueError("needs input and output")
            values = {k: float(entry[k] if k in entry else entry["input"]) for k in ("input", "cached_input", "output")}
            if any(v < 0 or v != v or v == float("inf") for v in values.values()):
                raise ValueError("prices must be finite and non-negative")
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(PRICES_ENV, f"{path!r}: price of {key!r}: {exc}") from None
        table[str(key)] = ModelPrice(**values)
    frozen = MappingProxyType(table)
    _user_cache[key] = frozen
    return frozen


def _default_table() -> Mapping[str, ModelPrice]:
    user = load_user_prices()
    return {**PRICE_TABLE, **user} if user else PRICE_TABLE


def lookup_price(model: str, prices: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """Return the price of `model` by longest matching prefix, or None for an unknown model.

    Without `prices`, the built-in table with the user's `CYBER_AGENT_PRICES` entries over it.
    """
    table = _default_table() if prices is None else prices
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


def is_unpriced(response: LLMResponse, requested_model: str = "", prices: Mapping[str, ModelPrice] | None = None) -> bool:
    """True when the response used tokens, the provider reported no charge and no price is known.

    Such usage was booked at $0: a USD limit cannot be enforced over it.
    """
    usage = response.usage
    if usage.cost_usd is not None or response.cost > 0 or not (usage.prompt_tokens or usage.completion_tokens):
        return False
    if "cost" in response.model_fields_set and not response.cost_estimated:
        return False  # an explicit charge of $0 (a free model, a caller's own price)
    models = [m for m in (response.model, requested_model) if m]
    return all(lookup_price(m, prices) is None for m in models)


def with_cost(response: LLMResponse, requested_model: str, prices: Mapping[str, ModelPrice] | None = None) -> LLMResponse:
    """Return a copy of `response` with `cost` and `cost_estimated` filled in."""
    model = response.model or requested_model
    usd, estimated = compute_cost(model, response.usage, prices)
    if estimated and lookup_price(model, prices) is None and model != requested_model:
        # The answering id may be one the table lacks (a new dated snapshot); the requested
        # alias is a better guess than nothing.
        usd, estimated = compute_cost(requested_model, response.usage, prices)
    return response.model_copy(update={"cost": usd, "cost_estimated": estimated, "model": model})
