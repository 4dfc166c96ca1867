"""Send provider requests over httpx with timeouts, retries and errors that never leak a key.

Both providers go through `ProviderHTTP`; there is one async implementation and no sync twin.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timezone
from typing import Any, TypeVar

import httpx

from cyber_agent.errors import ConfigurationError, LLMError, LLMHTTPError, LLMProtocolError, LLMTransportError
from cyber_agent.llm.provider_errors import _SETTING, Origin, exhausted_text, status_hint, transport_text
from cyber_agent.llm.settings import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, DEFAULT_RETRIES
from cyber_agent.llm.types import RetryRecord

__all__ = [
    "DEFAULT_TIMEOUT",
    "ProviderHTTP",
    "RetryPolicy",
    "RetryableRead",
    "ServerSentEvent",
    "Sleep",
    "parse_retry_after",
]

T = TypeVar("T")
_log = logging.getLogger("cyber_agent.llm")
_RETRIES_SETTING = _SETTING["retries"]

Sleep = Callable[[float], Awaitable[None]]
"""An awaitable sleep; tests inject a recorder instead of `asyncio.sleep`."""

DEFAULT_TIMEOUT = httpx.Timeout(DEFAULT_READ_TIMEOUT, connect=DEFAULT_CONNECT_TIMEOUT)
"""The providers' timeout unless told otherwise: `ProviderSettings`' defaults (120 s per read, 10 s to connect)."""

# 408 and 409 are transient on OpenAI's side (request timeout, lock contention); other 4xx mean
# the request itself is wrong and retrying cannot help.
_RETRYABLE_4XX = frozenset({408, 409, 429})
_BODY_EXCERPT = 2000


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """Decide how often and how long to wait before retrying a failed provider call."""

    max_retries: int = DEFAULT_RETRIES
    """Retries after the first attempt (0 disables retrying)."""
    base_delay: float = 1.0
    """Seconds before the first retry; doubles with every further retry."""
    max_delay: float = 30.0
    """Upper bound of the exponential backoff, in seconds."""
    max_retry_after: float = 60.0
    """Upper bound on a server's `Retry-After` hint, so a hostile header cannot stall a run."""
    jitter: float = 0.25
    """Relative spread (±) applied to backoff delays so parallel agents do not retry in step."""

    def __post_init__(self) -> None:
        for name in ("max_retries", "base_delay", "max_delay", "max_retry_after", "jitter"):
            value = getattr(self, name)
            if value < 0:
                raise ConfigurationError(f"retry.{name}", f"must be >= 0, got {value!r}")
        if self.jitter > 1:
            raise ConfigurationError("retry.jitter", f"must be between 0 and 1, got {self.jitter!r}")

    def backoff(self, retry_index: int, rand: float) -> float:
        """Return the delay before retry `retry_index` (0-based) when the server gave no hint."""
        delay = min(self.max_delay, self.base_delay * (2.0**retry_index))
        return max(0.0, delay * (1.0 + self.jitter * (2.0 * rand - 1.0)))


def parse_retry_after(headers: httpx.Headers, now: float) -> float | None:
    """Return the server's requested wait in seconds (`retry-after-ms`, seconds or HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # HTTP dates are GMT by definition
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - now)


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One server-sent event: its `event:` name (default "message") and joined `data:` lines."""

    event: str
    data: str

    def json(self) -> dict[str, Any]:
        """Decode the data as a JSON object."""
        try:
            value = json.loads(self.data)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, digit limit, deep nesting
            raise LLMProtocolError(f"stream event {self.event!r} is not readable JSON ({exc}): {self.data[:200]!r}") from exc
        if not isinstance(value, dict):
            raise LLMProtocolError(f"stream event {self.event!r} is not a JSON object: {self.data[:200]!r}")
        return value


class RetryableRead(Exception):
    """Raised by a body reader when an answered attempt failed midway (a cut-off or dropped stream): retried."""

    def __init__(self, error: str, detail: str, partial_text: str = "") -> None:
        super().__init__(detail)
        self.error = error
        """Short kind for the retry record: `stream cut off`, `ReadError`, ..."""
        self.detail = detail
        """The full sentence for the error raised when the retries are used up."""
        self.partial_text = partial_text
        """Text the attempt had produced before it failed."""


_PARTIAL_KEPT = 4000


def _clip_partial(text: str) -> str | None:
    if not text:
        return None
    return text if len(text) <= _PARTIAL_KEPT else text[:_PARTIAL_KEPT] + f"... [{len(text) - _PARTIAL_KEPT} more characters]"


class ProviderHTTP:
    """Post JSON to one provider base URL, retrying 408/409/429/5xx and transport failures."""

    def __init__(
        self,
        *,
        base_url: str,
        headers: Mapping[str, str],
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        secrets: tuple[str, ...] = (),
        rand: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.time,
        origin: Origin | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigurationError("base_url", f"must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._headers = dict(headers)
        self._timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self._client = client
        self._transport = transport
        self._sleep = sleep
        self._secrets = tuple(s for s in secrets if s)
        self._rand = rand
        self._clock = clock
        self.origin = origin or Origin()
        """Where the base URL and key came from, named by error texts."""

    def url(self, path: str) -> str:
        """Join the base URL and an endpoint path."""
        return f"{self.base_url}/{path.lstrip('/')}"

    def redact(self, text: str) -> str:
        """Replace every configured secret in `text`."""
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text

    async def call(self, path: str, body: Mapping[str, Any], read: Callable[[httpx.Response], Awaitable[T]], *,
                   retries: list[RetryRecord] | None = None, max_error_bytes: int = _BODY_EXCERPT) -> T:
        """POST `body` and return `read(response)` of a 2xx answer, retrying failed attempts; retried ones go to `retries`.

        The body is always streamed: `read` decides how much of it is read (the provider boundary
        caps it), and an error answer is read only up to `max_error_bytes`. `read` raising
        `RetryableRead` (a cut-off or dropped stream) is a failed attempt like a 5xx.
        """
        log = [] if retries is None else retries
        url = self.url(path)
        try:
            async with self._client_scope() as client:
                return await self._attempts(client, url, body, read, log=log, max_error_bytes=max_error_bytes)
        except LLMError as exc:
            exc.retries = tuple(log)  # the caller records them even though the call failed
            raise

    @asynccontextmanager
    async def _client_scope(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._client is not None:
            yield self._client
            return
        # A client per call: an httpx pool is bound to the event loop that opened it, and the
        # notebook bridge runs coroutines on more than one loop. A TLS handshake is cheap next to
        # a model call.
        async with httpx.AsyncClient(transport=self._transport, timeout=self._timeout) as client:
            yield client

    async def _error_excerpt(self, response: httpx.Response, max_error_bytes: int) -> str:
        """Read at most `max_error_bytes` of an error body (the rest is never read) and return it redacted."""
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in response.aiter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size >= max_error_bytes:
                    break
        except httpx.TransportError:
            pass  # what arrived is the excerpt
        finally:
            await response.aclose()
        text = b"".join(chunks)[:max_error_bytes].decode(response.encoding or "utf-8", errors="replace")
        return self.redact(text[:_BODY_EXCERPT])

    async def _attempts(
        self, client: httpx.AsyncClient, url: str, body: Mapping[str, Any], read: Callable[[httpx.Response], Awaitable[T]],
        *, log: list[RetryRecord], max_error_bytes: int,
    ) -> T:
        safe_url = self.redact(url)
        attempts = self.retry.max_retries + 1
        for attempt in range(attempts):
            hinted, partial = False, None
            request = client.build_request("POST", url, json=body, headers=self._headers, timeout=self._timeout)
            try:
                response = await client.send(request, stream=True)
            except httpx.TransportError as exc:  # connect errors and timeouts; CancelledError passes
                if attempt + 1 >= attempts:
                    raise LLMTransportError(transport_text(
                        exc, url=safe_url, attempts=attempt + 1, timeout=self._timeout, origin=self.origin,
                        detail=self.redact(str(exc)) or "no detail",
                    )) from exc
                delay = self.retry.backoff(attempt, self._rand())
                status, failure = None, type(exc).__name__
            else:
                if response.is_success:
                    try:
                        return await read(response)
                    except RetryableRead as cut:
                        if attempt + 1 >= attempts:
                            raise LLMTransportError(
                                f"POST {safe_url}: {self.redact(cut.detail)} on each of {attempt + 1} attempt(s); "
                                f"the partial answer was not used (raise {_RETRIES_SETTING} to try more often)"
                            ) from cut
                        delay = self.retry.backoff(attempt, self._rand())
                        status, failure, partial = None, cut.error, _clip_partial(cut.partial_text)
                    finally:
                        await response.aclose()
                else:
                    status = response.status_code
                    excerpt = await self._error_excerpt(response, max_error_bytes)
                    if status < 500 and status not in _RETRYABLE_4XX:
                        raise LLMHTTPError(status, excerpt, safe_url,
                                           hint=status_hint(status, base_url=self.redact(self.base_url), origin=self.origin))
                    if attempt + 1 >= attempts:
                        raise LLMTransportError(exhausted_text(url=safe_url, status=status, attempts=attempt + 1,
                                                               excerpt=excerpt))
                    hint = parse_retry_after(response.headers, self._clock())
                    if hint is None:
                        delay = self.retry.backoff(attempt, self._rand())
                    else:
                        delay, hinted = min(hint, self.retry.max_retry_after), True
                    failure = f"HTTP {status}"
            log.append(RetryRecord(attempt=attempt + 1, status=status, error=failure, wait_s=round(delay, 3),
                                   retry_after=hinted, partial_text=partial))
            _log.info("model call to %s failed (attempt %d of %d: %s); retrying in %.2f s",
                      safe_url, attempt + 1, attempts, failure, delay)
            await self._sleep(delay)
        raise AssertionError("unreachable: the retry loop returns or raises")  # pragma: no cover
