"""Turn a model spec string ("openai:gpt-4o-mini", "anthropic:...", "replay:PATH", "demo", "fallible:0.3") into an LLMCall."""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.settings import ProviderSettings
from cyber_agent.llm.types import LLMCall

__all__ = ["Provider", "ResolvedModel", "resolve_llm", "suggest_spec"]

Provider = Literal["openai", "anthropic", "replay", "demo", "fallible"]
"""The spec prefixes `resolve_llm` understands."""

_PROVIDERS: tuple[str, ...] = get_args(Provider)
_FORMS = {"openai": "openai:MODEL", "anthropic": "anthropic:MODEL", "replay": "replay:PATH",
          "demo": "demo[:latency=SECONDS]", "fallible": "fallible:RATE"}


@dataclass(frozen=True, kw_only=True)
class ResolvedModel:
    """A ready model: the callable to give the runner and the model name to send with each call."""

    llm_call: LLMCall
    """The provider (or fake, or replayer), already configured."""
    model: str
    """Model name to pass as `model=` on every call."""
    provider: Provider
    """Which spec prefix produced it."""


def _check_options(factory: Callable[..., object], options: dict[str, Any], spec: str) -> None:
    parameters = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    unknown = sorted(set(options) - set(parameters))
    if unknown:
        names = sorted(n for n in parameters if not n.startswith("_"))
        close = difflib.get_close_matches(unknown[0], names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigurationError(unknown[0], f"is not an option of {spec!r}; {hint}accepted options: {', '.join(names) or 'none'}")


def suggest_spec(spec: str) -> str | None:
    """The spec a mistyped `spec` most likely meant ("dmeo" → "demo", "gpt-4o" → "openai:gpt-4o"), or None.

    Known names are the spec prefixes and the model names of the price table
    (`cyber_agent/llm/pricing.py:PRICE_TABLE`): a bare model name gets its provider's prefix
    (claude-* → anthropic:, any other priced name → openai:, the OpenAI-compatible client).
    """
    from cyber_agent.llm.pricing import PRICE_TABLE

    text = spec.strip()
    prefix, sep, rest = text.partition(":")
    lowered = prefix.lower()

    def provider_of(name: str) -> str:
        return "anthropic" if name.startswith("claude") else "openai"

    models = sorted(PRICE_TABLE, key=len, reverse=True)
    known = next((m for m in models if text.lower() == m or text.lower().startswith(m + "-")), None)
    if not sep and known is not None:  # a bare model name, e.g. "gpt-4o" or "claude-sonnet-4-5-20250929"
        return f"{provider_of(known)}:{text}"
    close = difflib.get_close_matches(lowered, [*_PROVIDERS, *models], n=1, cutoff=0.6)
    if not close:
        return None
    if close[0] in _PROVIDERS:
        return f"{close[0]}{sep}{rest}" if close[0] != lowered else None
    return f"{provider_of(close[0])}:{close[0]}"


def _build(factory: Callable[..., LLMCall], options: dict[str, Any], spec: str) -> LLMCall:
    _check_options(factory, options, spec)
    return factory(**options)


def _demo_settings(rest: str, spec: str) -> tuple[dict[str, Any], str]:
    """`demo:latency=0.2` -> ({"latency": "0.2"}, ""); `demo:NAME` -> ({}, NAME)."""
    if "=" not in rest:
        return {}, rest
    settings: dict[str, Any] = {}
    for part in rest.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError("model", f"{spec!r}: write demo options as key=value, e.g. 'demo:latency=0.2'")
        settings[key.strip()] = value.strip()
    return settings, ""


def resolve_llm(
    spec: str, *, settings: ProviderSettings | None = None, record_to: str | Path | None = None, **options: Any,
) -> ResolvedModel:
    """Build the model a spec names, failing with ConfigurationError before any call is made.

    `settings` (timeouts, retries, stream, max_tokens, headers, prices; fields left unset come
    from the `CYBER_AGENT_*` variables) configure the HTTP providers and are ignored by
    `replay:` and `demo`; `options` go to the provider's
    constructor (api_key, base_url, timeout, retry, transport, env, ...) and win over
    `settings`. `record_to` wraps the result in a RecordingLLM writing to that path.
    """
    prefix, _, rest = spec.strip().partition(":")
    prefix = prefix.strip().lower()
    rest = rest.strip()
    if prefix not in _PROVIDERS:
        valid = ", ".join(repr(_FORMS[p]) for p in _PROVIDERS)
        guess = suggest_spec(spec)
        hint = f"did you mean {guess!r}? " if guess else ""
        raise ConfigurationError("model", f"unknown provider {prefix!r} in {spec!r}; {hint}use one of {valid}")
    llm_call: LLMCall
    if prefix in ("openai", "anthropic"):
        if not rest:
            raise ConfigurationError("model", f"{spec!r} names no model; write e.g. '{prefix}:MODEL_NAME'")
        # Without settings the CYBER_AGENT_* variables still apply (of `env=` when given).
        effective = (settings or ProviderSettings()).resolved(options.get("env"))
        options = {**effective.provider_options(), **options}
        if prefix == "openai":
            from cyber_agent.llm.openai_compat import OpenAICompatModel

            llm_call = _build(OpenAICompatModel, options, spec)
        else:
            from cyber_agent.llm.anthropic import AnthropicModel

            llm_call = _build(AnthropicModel, options, spec)
        model = rest
    elif prefix == "replay":
        if not rest:
            raise ConfigurationError("replay path", f"{spec!r} names no file; write 'replay:PATH'")
        from cyber_agent.llm.replay import ReplayLLM

        replay = _build(ReplayLLM, {"path": rest, **options}, spec)
        llm_call, model = replay, replay.model  # type: ignore[attr-defined]
    elif prefix == "fallible":
        from cyber_agent.llm.fallible import FallibleModel, parse_fallible_spec

        model = f"fallible:{rest}" if rest else "fallible"
        llm_call = _build(FallibleModel, {**parse_fallible_spec(rest), "name": model, **options}, spec)
    else:
        try:
            demo_module = importlib.import_module("cyber_agent.llm.demo")
        except ModuleNotFoundError as exc:
            if exc.name != "cyber_agent.llm.demo":
                raise  # the demo module exists but something it imports is missing
            raise ConfigurationError("model", "the 'demo' model is not installed in this build") from exc
        demo_options, name = _demo_settings(rest, spec)
        llm_call = _build(demo_module.DemoModel, {**demo_options, **options}, spec)
        model = name or "demo"
    if record_to is not None:
        from cyber_agent.llm.replay import RecordingLLM

        llm_call = RecordingLLM(llm_call, record_to)
    return ResolvedModel(llm_call=llm_call, model=model, provider=prefix)  # type: ignore[arg-type]
