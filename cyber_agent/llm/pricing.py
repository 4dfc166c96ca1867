"""Price model calls: the provider's own charge when it reports one, else a lower-bound table.

The table holds list prices in USD per million tokens of OpenAI, Anthropic, Google (Gemini),
DeepSeek and Qwen models as of `PRICES_AS_OF`, each vendor's page named in a comment. It is a
*lower bound*: it ignores long-context surcharges, batch and priority tiers, Anthropic's
cache-write premium (cache-creation tokens are priced as plain input), tiered prices above the
lowest tier (Gemini over 200k prompt tokens, Qwen over its first input tier, Qwen's thinking
output) and reasoning-token details that providers fold into output tokens. Prices change;
update the table and the date together.

A model the table lacks is *unpriced*: its usage costs 0.0 and `is_unpriced` says so, so a USD
limit can fail closed instead of never firing. Give prices for such models (or override the
table) with a price file: `PRICES_ENV` (`CYBER_AGENT_PRICES`) or `ProviderSettings.price_file`
names a TOML (`.toml`) or JSON file mapping a model-name prefix to `{input, cached_input,
output}` in USD per million tokens (`cached_input` defaults to `input`). Its entries win over
the built-in table.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.types import LLMResponse, Usage

__all__ = ["ModelPrice", "PRICES_AS_OF", "PRICES_ENV", "PRICE_TABLE", "compute_cost", "default_price_table", "is_unpriced",
           "load_user_prices", "lookup_price", "with_cost"]

PRICES_ENV = "CYBER_AGENT_PRICES"
"""Environment variable naming a TOML or JSON file of user prices (see the module docstring)."""

PRICES_AS_OF = "2025-11-30"
"""Date of the table's prices as known when it was written, not checked against the live price pages
(docs/llm.md names each vendor's page): check a price before you rely on it, or override it."""


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
        # OpenAI (openai.com/api/pricing, standard tier)
        "gpt-5": _price(1.25, 0.125, 10.00),
        "gpt-5.1": _price(1.25, 0.125, 10.00),
        "gpt-5.1-codex-mini": _price(0.25, 0.025, 2.00),
        "gpt-5-mini": _price(0.25, 0.025, 2.00),
        "gpt-5-nano": _price(0.05, 0.005, 0.40),
        "gpt-5-pro": _price(15.00, 15.00, 120.00),
        "gpt-4.1": _price(2.00, 0.50, 8.00),
        "gpt-4.1-mini": _price(0.40, 0.10, 1.60),
        "gpt-4.1-nano": _price(0.10, 0.025, 0.40),
        "gpt-4o": _price(2.50, 1.25, 10.00),
        "gpt-4o-mini": _price(0.15, 0.075, 0.60),
        "gpt-4-turbo": _price(10.00, 10.00, 30.00),
        "gpt-3.5-turbo": _price(0.50, 0.50, 1.50),
        "o1": _price(15.00, 7.50, 60.00),
        "o1-mini": _price(1.10, 0.55, 4.40),
        "o1-pro": _price(150.00, 150.00, 600.00),
        "o3": _price(2.00, 0.50, 8.00),
        "o3-mini": _price(1.10, 0.55, 4.40),
        "o3-pro": _price(20.00, 20.00, 80.00),
        "o4-mini": _price(1.10, 0.275, 4.40),
        "codex-mini-latest": _price(1.50, 0.375, 6.00),
        # Anthropic (claude.com/pricing; cache reads at 10 % of input)
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
        # Google Gemini API (ai.google.dev/gemini-api/docs/pricing; prompts up to 200k tokens, paid tier)
        "gemini-3-pro": _price(2.00, 0.20, 12.00),
        "gemini-2.5-pro": _price(1.25, 0.125, 10.00),
        "gemini-2.5-flash": _price(0.30, 0.03, 2.50),
        "gemini-2.5-flash-lite": _price(0.10, 0.01, 0.40),
        "gemini-2.0-flash": _price(0.10, 0.025, 0.40),
        "gemini-2.0-flash-lite": _price(0.075, 0.075, 0.30),
        "gemini-1.5-pro": _price(1.25, 0.3125, 5.00),
        "gemini-1.5-flash": _price(0.075, 0.01875, 0.30),
        # DeepSeek (api-docs.deepseek.com/quick_start/pricing; V3.2: cache hit / miss / output)
        "deepseek-chat": _price(0.28, 0.028, 0.42),
        "deepseek-reasoner": _price(0.28, 0.028, 0.42),
        # Qwen on Alibaba Cloud Model Studio, international (lowest input tier; implicit cache hits at 20 %)
        "qwen3-max": _price(1.20, 0.24, 6.00),
        "qwen-max": _price(1.60, 0.32, 6.40),
        "qwen-plus": _price(0.40, 0.08, 1.20),
        "qwen-flash": _price(0.05, 0.01, 0.40),
        "qwen-turbo": _price(0.05, 0.01, 0.20),
        "qwen3-coder-plus": _price(1.00, 0.20, 5.00),
        "qwen3-coder-flash": _price(0.30, 0.06, 1.50),
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
        if path.lower().endswith(".toml"):
            with open(path, "rb") as binary:
                raw: object = tomllib.load(binary)
        else:
            with open(path, encoding="utf-8") as handle:
                raw = json.load(handle)
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError and JSONDecodeError are ValueErrors
        raise ConfigurationError(PRICES_ENV, f"cannot read the price file {path!r}: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigurationError(PRICES_ENV, f"{path!r} must hold a table (TOML) or object (JSON) of model prefix -> prices")
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


def default_price_table() -> Mapping[str, ModelPrice]:
    """The table lookups use without one: the built-in prices, the user's `CYBER_AGENT_PRICES` entries over them."""
    user = load_user_prices()
    return {**PRICE_TABLE, **user} if user else PRICE_TABLE



def lookup_price(model: str, prices: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """Return the price of `model` by longest matching prefix, or None for an unknown model.

    Without `prices`, the built-in table with the user's `CYBER_AGENT_PRICES` entries over it.
    """
    table = default_price_table() if prices is None else prices
    if table is PRICE_TABLE:  # read-only: its answers never change (a reply is priced three or four times)
        found = _builtin_lookups.get(model, _UNSEEN)
        if found is _UNSEEN:
            found = _lookup(model, table)
            if len(_builtin_lookups) < 4096:  # bounded: model names come from replies
                _builtin_lookups[model] = found
        return found if isinstance(found, ModelPrice) else None
    return _lookup(model, table)


_UNSEEN = object()
_builtin_lookups: dict[str, object] = {}


def _lookup(model: str, table: Mapping[str, ModelPrice]) -> ModelPrice | None:
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
