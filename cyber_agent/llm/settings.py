"""Provider settings: timeouts, retries, streaming, output cap, extra headers and prices, in one model.

`ProviderSettings` is set on `RunConfig.provider` (the CLI, the server's create request and
`launch()` all fill it), read from `CYBER_AGENT_*` environment variables for any field left
unset, and recorded in the run-config snapshot with every field resolved, so a trace says
which limits its model calls ran under. The tool-call dialect is not here: it is
`RunConfig.tool_dialect` (one source per setting), whose variable `DIALECT_ENV` is listed with
these.

Explicit fields win over the environment, the environment over the defaults:

    settings = ProviderSettings(timeout=30).resolved(os.environ)   # CYBER_AGENT_RETRIES etc. fill the rest
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from cyber_agent.errors import ConfigurationError

if TYPE_CHECKING:
    import httpx

    from cyber_agent.llm.boundary import CallLimits
    from cyber_agent.llm.http_retry import RetryPolicy
    from cyber_agent.llm.pricing import ModelPrice

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_DEADLINE", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_ERROR_BYTES",
           "DEFAULT_MAX_OUTPUT_CHARS", "DEFAULT_READ_TIMEOUT", "DEFAULT_RETRIES", "DIALECT_ENV", "ENV_VARS", "PriceEntry",
           "ProviderSettings"]

# A server that never answers holds a run for (retries + 1) x timeout plus the backoff between
# attempts: 3 x 120 s + about 3 s, six minutes, where 600 s x 5 attempts held it for 50.
DEFAULT_READ_TIMEOUT = 120.0
"""Default seconds per read (`ProviderSettings.timeout`)."""
DEFAULT_CONNECT_TIMEOUT = 10.0
"""Default seconds to connect (`ProviderSettings.connect_timeout`)."""
DEFAULT_RETRIES = 2
"""Default retries after the first attempt (`ProviderSettings.retries`), as in the OpenAI and Anthropic SDKs."""
# Limits of one model call at the provider boundary (cyber_agent/llm/boundary.py). Each is far
# above what a real answer needs: 128k output tokens are about 0.5 M characters and a 1 MB body.
DEFAULT_DEADLINE = 1200.0
"""Default seconds one model call may take overall, every attempt and wait included (`ProviderSettings.deadline`)."""
DEFAULT_MAX_OUTPUT_CHARS = 4_000_000
"""Default cap on the characters of text and tool arguments one answer may carry (`ProviderSettings.max_output_chars`)."""
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
"""Default cap on the bytes of a non-streamed body, or of one streamed event, read (`ProviderSettings.max_body_bytes`)."""
DEFAULT_MAX_ERROR_BYTES = 64 * 1024
"""Default cap on the bytes of an error body read to quote it (`ProviderSettings.max_error_bytes`)."""

ENV_VARS: Mapping[str, str] = {
    "timeout": "CYBER_AGENT_TIMEOUT",
    "connect_timeout": "CYBER_AGENT_CONNECT_TIMEOUT",
    "retries": "CYBER_AGENT_RETRIES",
    "backoff_cap": "CYBER_AGENT_BACKOFF_CAP",
    "stream": "CYBER_AGENT_STREAM",
    "max_tokens": "CYBER_AGENT_MAX_TOKENS",
    "extra_headers": "CYBER_AGENT_EXTRA_HEADERS",
    "price_file": "CYBER_AGENT_PRICES",
    "deadline": "CYBER_AGENT_DEADLINE",
    "max_output_chars": "CYBER_AGENT_MAX_OUTPUT_CHARS",
    "max_body_bytes": "CYBER_AGENT_MAX_BODY_BYTES",
    "max_error_bytes": "CYBER_AGENT_MAX_ERROR_BYTES",
}
"""The environment variable behind each settings field (`prices` has none: use `price_file`)."""

_RESOLVED: dict[tuple[str, tuple[str, ...]], ProviderSettings] = {}
"""`ProviderSettings.resolved` by (explicit fields as JSON, the variables' values): a cache, not state."""

DIALECT_ENV = "CYBER_AGENT_DIALECT"
"""Environment variable for `RunConfig.tool_dialect` when the config leaves it unset."""

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_MAX_RETRIES = 10
_WHOLE = ("retries", "max_tokens", "max_output_chars", "max_body_bytes", "max_error_bytes")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


class PriceEntry(BaseModel):
    """One user price, in USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, allow_inf_nan=False)
    """Uncached input tokens."""
    output: float = Field(ge=0, allow_inf_nan=False)
    """Output tokens."""
    cached_input: float | None = Field(None, ge=0, allow_inf_nan=False)
    """Cached input tokens; None prices them as `input`."""


def _positive(name: str, value: float) -> float:
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return value


class ProviderSettings(BaseModel):
    """How model calls reach a provider: limits, retries, streaming, output cap, headers, prices."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    timeout: float = DEFAULT_READ_TIMEOUT
    """Seconds to wait for each read (first byte, then between chunks); also the write and pool limits."""
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    """Seconds to open the connection."""
    retries: int = DEFAULT_RETRIES
    """Retries after the first attempt on 408/409/429/5xx and transport failures (0 disables)."""
    backoff_cap: float = 30.0
    """Upper bound, in seconds, of the exponential backoff between retries (1 s, 2 s, 4 s, ...)."""
    stream: bool | None = None
    """True always streams, False never does, None streams when the caller watches text arrive."""
    max_tokens: int | None = None
    """Output-token cap sent with each call; None: the provider's default (Anthropic: 8192)."""
    extra_headers: dict[str, str] = Field(default_factory=dict, max_length=64)
    """Headers added to every request (recorded in the snapshot: put no secrets here)."""
    price_file: str | None = None
    """TOML or JSON price table merged over the built-in one (`cyber_agent/llm/pricing.py:load_user_prices`)."""
    prices: dict[str, PriceEntry] = Field(default_factory=dict, max_length=1000)
    """Prices by model-name prefix, merged over the built-in table and `price_file`."""
    deadline: float = DEFAULT_DEADLINE
    """Seconds one model call may take overall, every attempt, backoff wait and streamed chunk included."""
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    """Characters of text and tool arguments one answer may carry, streamed or not."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Bytes of a non-streamed answer body, or of one streamed event, read before the call fails."""
    max_error_bytes: int = DEFAULT_MAX_ERROR_BYTES
    """Bytes of an error answer read to quote it in the error (the rest is not read)."""

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: float) -> float:
        return _positive("timeout", value)

    @field_validator("deadline")
    @classmethod
    def _deadline(cls, value: float) -> float:
        return _positive("deadline", value)

    @field_validator("max_output_chars", "max_body_bytes", "max_error_bytes")
    @classmethod
    def _caps(cls, value: int, info: ValidationInfo) -> int:
        if value < 1:
            raise ValueError(f"{info.field_name} must be >= 1, got {value!r}")
        return value

    @field_validator("connect_timeout")
    @classmethod
    def _connect(cls, value: float) -> float:
        return _positive("connect_timeout", value)

    @field_validator("retries")
    @classmethod
    def _retries(cls, value: int) -> int:
        if not 0 <= value <= _MAX_RETRIES:
            raise ValueError(f"retries must be between 0 and {_MAX_RETRIES}, got {value!r}")
        return value

    @field_validator("backoff_cap")
    @classmethod
    def _cap(cls, value: float) -> float:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"backoff_cap must be a finite number of seconds >= 0, got {value!r}")
        return value

    @field_validator("extra_headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"extra_headers: {name!r} is not a header name (letters, digits, !#$%&'*+-.^_`|~)")
            if "\r" in text or "\n" in text or "\x00" in text:
                raise ValueError(f"extra_headers: the value of {name!r} holds a line break or NUL")
        return value

    @field_validator("max_tokens")
    @classmethod
    def _max_tokens(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"max_tokens must be >= 1 (or unset for the provider's default), got {value!r}")
        return value

    # ---- environment ------------------------------------------------------------------------
    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ProviderSettings:
        """Settings holding only the fields the environment sets (`ENV_VARS`); a bad value names its variable."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, variable in ENV_VARS.items():
            raw = env.get(variable, "").strip()
            if raw:
                values[name] = _parse_env(name, variable, raw)
        try:
            return cls(**values)
        except ValueError as exc:
            variables = ", ".join(ENV_VARS[n] for n in values)
            raise ConfigurationError(variables, f"invalid provider setting from the environment: {exc}") from None

    def resolved(self, env: Mapping[str, str] | None = None) -> ProviderSettings:
        """Every field decided: this object's explicit fields, then the environment's, then the defaults."""
        env = os.environ if env is None else env
        # Every run resolves its settings: the answer for the same explicit fields and the same
        # variables is kept (the settings are frozen; a few distinct keys in a process).
        key = (self.model_dump_json(include=set(self.model_fields_set)) if self.model_fields_set else "",
               tuple(env.get(variable, "") for variable in ENV_VARS.values()))
        cached = _RESOLVED.get(key)
        if cached is None:
            cached = self._resolve(env)
            if len(_RESOLVED) >= 64:
                _RESOLVED.clear()
            _RESOLVED[key] = cached
        return cached

    def _resolve(self, env: Mapping[str, str]) -> ProviderSettings:
        explicit = self.model_dump(include=set(self.model_fields_set))
        from_env = ProviderSettings.from_env(env)
        data = {**ProviderSettings().model_dump(), **from_env.model_dump(include=set(from_env.model_fields_set)),
                **explicit}
        return ProviderSettings.model_validate(data)  # every key given: the result resolves to itself

    # ---- what the providers take --------------------------------------------------------------
    def http_timeout(self) -> httpx.Timeout:
        """The httpx timeout these settings describe."""
        import httpx

        return httpx.Timeout(self.timeout, connect=self.connect_timeout)

    def retry_policy(self) -> RetryPolicy:
        """The retry policy these settings describe."""
        from cyber_agent.llm.http_retry import RetryPolicy

        return RetryPolicy(max_retries=self.retries, max_delay=self.backoff_cap)

    def price_table(self) -> Mapping[str, ModelPrice] | None:
        """The built-in prices with `price_file` and `prices` merged over them; None when neither is set."""
        if self.price_file is None and not self.prices:
            return None
        from cyber_agent.llm.pricing import PRICE_TABLE, ModelPrice, load_user_prices

        table: dict[str, ModelPrice] = {**PRICE_TABLE}
        if self.price_file is not None:
            table.update(load_user_prices(self.price_file))
        for prefix, entry in self.prices.items():
            cached = entry.cached_input if entry.cached_input is not None else entry.input
            table[prefix] = ModelPrice(input=entry.input, cached_input=cached, output=entry.output)
        return table

    def call_limits(self) -> CallLimits:
        """The per-call limits these settings describe (`cyber_agent/llm/boundary.py:CallLimits`)."""
        from cyber_agent.llm.boundary import CallLimits

        return CallLimits(deadline=self.deadline, max_output_chars=self.max_output_chars,
                          max_body_bytes=self.max_body_bytes, max_error_bytes=self.max_error_bytes)

    def provider_options(self) -> dict[str, Any]:
        """Constructor options of `OpenAICompatModel` / `AnthropicModel` these settings give."""
        options: dict[str, Any] = {"timeout": self.http_timeout(), "retry": self.retry_policy(), "stream": self.stream,
                                   "limits": self.call_limits()}
        if self.max_tokens is not None:
            options["max_tokens"] = self.max_tokens
        if self.extra_headers:
            options["extra_headers"] = dict(self.extra_headers)
        prices = self.price_table()
        if prices is not None:
            options["prices"] = prices
        return options


def _parse_env(name: str, variable: str, raw: str) -> Any:
    """Read one variable's text as its field's type, or raise ConfigurationError naming the variable."""
    if name == "stream":
        lowered = raw.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        if lowered == "auto":
            return None
        raise ConfigurationError(variable, f"must be 1/true, 0/false or auto, got {raw!r}")
    if name == "extra_headers":
        try:
            headers = json.loads(raw)
        except ValueError as exc:
            raise ConfigurationError(variable, f"must be a JSON object of header name -> value: {exc}") from None
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise ConfigurationError(variable, 'must be a JSON object of string values, e.g. {"X-Title": "my-run"}')
        return headers
    if name == "price_file":
        return raw
    try:
        return int(raw) if name in _WHOLE else float(raw)
    except ValueError:
        kind = "a whole number" if name in _WHOLE else "a number of seconds"
        raise ConfigurationError(variable, f"must be {kind}, got {raw!r}") from None
