"""Error texts that name the setting behind a provider failure and the likely fix, never a key.

`ProviderHTTP` raises the errors; this module words them. Every text names the setting three
ways where it has them: the `ProviderSettings` field, the CLI flag and the environment
variable (docs/llm.md, settings table), because a user meets the failure in any of the three.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

__all__ = ["Origin", "exhausted_text", "limit_text", "status_hint", "transport_text"]

_SETTING = {
    "timeout": "the `timeout` setting (--timeout, CYBER_AGENT_TIMEOUT)",
    "connect_timeout": "the `connect_timeout` setting (CYBER_AGENT_CONNECT_TIMEOUT)",
    "retries": "the `retries` setting (--retries, CYBER_AGENT_RETRIES)",
    "deadline": "the `deadline` setting (--deadline, CYBER_AGENT_DEADLINE)",
    "max_output_chars": "the `max_output_chars` setting (--max-output-chars, CYBER_AGENT_MAX_OUTPUT_CHARS)",
    "max_body_bytes": "the `max_body_bytes` setting (--max-body-bytes, CYBER_AGENT_MAX_BODY_BYTES)",
    "max_error_bytes": "the `max_error_bytes` setting (--max-error-bytes, CYBER_AGENT_MAX_ERROR_BYTES)",
}


@dataclass(frozen=True, kw_only=True)
class Origin:
    """Where a provider's base URL and key came from, so an error can say what to change."""

    provider: str = "provider"
    """Who is called, for the text: "OpenAI-compatible server", "Anthropic"."""
    base_url_env: str = "base_url"
    """The variable that sets the base URL (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`)."""
    base_url_from: str = "base_url="
    """Where this base URL came from: the variable's name, `base_url=`, or `the default`."""
    key_env: str = "api_key"
    """The variable that holds the key (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`)."""
    key_from: str | None = None
    """Where the key came from (the variable's name or `api_key=`); None when no key was sent."""
    needs_v1: bool = False
    """True when the API lives under `/v1` of the base URL (OpenAI-compatible servers)."""


def _seconds(value: float | None) -> str:
    return "no limit" if value is None else f"{value:g} s"


def transport_text(exc: httpx.TransportError, *, url: str, attempts: int, timeout: httpx.Timeout, origin: Origin,
                   detail: str) -> str:
    """Say why POST `url` failed on the network after `attempts`, naming the limit and its setting."""
    tried = f"after {attempts} attempt(s)"
    source = origin.base_url_from
    if isinstance(exc, httpx.ConnectTimeout):
        return (f"POST {url}: could not connect within the connect timeout of {_seconds(timeout.connect)} {tried}; "
                f"check that the {origin.provider} at this address (from {source}) is up, or raise "
                f"{_SETTING['connect_timeout']}")
    if isinstance(exc, httpx.TimeoutException):  # read, write or pool: all set by `timeout`
        kind = {httpx.ReadTimeout: "read", httpx.WriteTimeout: "write", httpx.PoolTimeout: "pool"}.get(type(exc), "read")
        limit = getattr(timeout, kind, timeout.read)
        return (f"POST {url}: no answer within the {kind} timeout of {_seconds(limit)} {tried} ({type(exc).__name__}); "
                f"raise {_SETTING['timeout']} for a slow model (or stream with --stream), or check the server "
                f"(base URL from {source})")
    if isinstance(exc, httpx.ConnectError):
        return (f"POST {url}: could not connect {tried} ({type(exc).__name__}: {detail}); is the {origin.provider} running, and is "
                f"{origin.base_url_env} right (this one came from {source})?")
    return f"POST {url} failed {tried}: {type(exc).__name__}: {detail}"


def exhausted_text(*, url: str, status: int, attempts: int, excerpt: str) -> str:
    """Say that POST `url` kept answering a retryable `status` until the retries ran out."""
    return (f"POST {url} kept failing: HTTP {status} after {attempts} attempt(s); "
            f"wait and run again, or raise {_SETTING['retries']}: {excerpt[:500]}")


def status_hint(status: int, *, base_url: str, origin: Origin) -> str:
    """The likely fix of a non-retryable HTTP status, naming the variable (or key source) behind it."""
    if status in (401, 403):
        if origin.key_from is None:
            return f"no key was sent: set {origin.key_env} (or pass api_key=...)"
        return f"the key from {origin.key_from} was refused: check its value and that it is for this server"
    if status == 404:
        path = httpx.URL(base_url).path.rstrip("/")
        if origin.needs_v1 and not path.endswith("/v1"):
            return (f"{origin.base_url_env} (here {base_url}, from {origin.base_url_from}) should probably end in /v1, "
                    f"e.g. {base_url.rstrip('/')}/v1")
        return f"check the model name and {origin.base_url_env} (here {base_url}, from {origin.base_url_from})"
    return ""


def limit_text(setting: str, value: float, unit: str, what: str) -> str:
    """Say that one call ran past a per-call limit (`deadline`, `max_output_chars`, ...), naming its setting and value."""
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return (f"{what}: it exceeded {_SETTING[setting]} of {shown} {unit}; raise it if the answer is "
            "genuinely that long, otherwise the server (or a proxy in between) is misbehaving")
