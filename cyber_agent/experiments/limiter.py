"""Adaptive concurrency per provider (AIMD): cut on 429, honour Retry-After, grow back slowly.

Each provider (`ModelEntry.limiter_key`) has an `AdaptiveLimiter`. A sweep cell holds one of
its provider's slots while it runs, so a provider that is rate limited runs fewer cells while
the others keep theirs; each model call first waits out the provider's Retry-After window.

- **Cut.** A 429 halves the limit (`LimitPolicy.decrease`, never below `minimum`) and blocks
  the provider's calls until its Retry-After has passed (capped by `max_retry_after`; without a
  header, `default_retry_after`). The 429s of one burst cut once: no second cut until the
  window the first one opened has passed.
- **Grow.** After `limit` successes in a row (one window, as TCP's additive increase) the limit
  grows by one, up to `maximum`.
- **Start open.** A fresh sweep is not throttled before any signal: a policy without `initial`
  starts at the sweep's `concurrency` (`ProviderLimits.concurrency`, set by `run_sweep`) and,
  without `maximum`, grows back up to it. The limiter only ever adapts *down* from what the
  sweep asked for, on 429s; an explicit `initial` / `maximum` caps one provider on purpose.

HTTP providers (`openai:`, `anthropic:`) are observed on the wire by `RateLimitTransport`, which
sees every attempt of the provider's own retry loop; other models are observed per call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.http_retry import parse_retry_after
from cyber_agent.llm.types import DeltaCallback, LLMCall, LLMResponse

__all__ = ["AdaptiveLimiter", "LimitPolicy", "LimitedLLM", "LimiterState", "ProviderLimits", "RateLimitTransport",
           "merge_states"]

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
_log = logging.getLogger("cyber_agent.sweeps")
DEFAULT_CONCURRENCY = 8
"""Cells in flight of a sweep that does not say (`run_sweep(concurrency=...)`'s default)."""


@dataclass(frozen=True, kw_only=True)
class LimitPolicy:
    """How one provider's concurrency adapts."""

    initial: int | None = None
    """Cells in flight before any signal (None: the sweep's `concurrency`)."""
    minimum: int = 1
    """Floor of a cut."""
    maximum: int | None = None
    """Ceiling of growth (None: the sweep's `concurrency`, or `initial` when that is larger)."""
    decrease: float = 0.5
    """Factor applied to the limit on a 429."""
    max_retry_after: float = 60.0
    """Longest Retry-After honoured, in seconds (a hostile header cannot stall a sweep)."""
    default_retry_after: float = 1.0
    """Wait after a 429 without a Retry-After header."""

    def __post_init__(self) -> None:
        given = [v for v in (self.minimum, self.initial, self.maximum) if v is not None]
        if self.minimum < 1 or given != sorted(given):
            raise ConfigurationError("limits", "need 1 <= minimum <= initial <= maximum, got "
                                     f"{self.minimum}, {self.initial}, {self.maximum}")
        if not 0.0 < self.decrease < 1.0:
            raise ConfigurationError("limits.decrease", f"must be between 0 and 1, got {self.decrease}")

    def divided(self, workers: int) -> LimitPolicy:
        """This policy for one of `workers` worker processes: an explicit cap split between them (rounded up)."""
        def part(value: int | None) -> int | None:
            return None if value is None else -(-value // workers)

        initial, maximum = part(self.initial), part(self.maximum)
        floor = min(v for v in (self.minimum, initial, maximum) if v is not None)
        return replace(self, minimum=floor, initial=initial, maximum=maximum)

    def bounds(self, concurrency: int) -> tuple[int, int]:
        """(initial, maximum) for a sweep of `concurrency` cells in flight: unset ones are the sweep's concurrency."""
        maximum = self.maximum if self.maximum is not None else max(concurrency, self.initial or 0, self.minimum)
        initial = self.initial if self.initial is not None else max(self.minimum, min(concurrency, maximum))
        return initial, maximum


@dataclass(frozen=True, kw_only=True)
class LimiterState:
    """A snapshot of one provider's limiter."""

    key: str
    limit: int
    in_flight: int
    rate_limited: int
    """429s seen."""
    cuts: int
    """Times the limit was cut."""
    lowest: int
    """The lowest the limit went."""
    blocked_for: float
    """Seconds until calls may go again (0 when not blocked)."""


def merge_states(parts: Sequence[Mapping[str, LimiterState]]) -> dict[str, LimiterState]:
    """One snapshot per provider for limiters split between worker processes (each saw only its own cells).

    Limits, calls in flight, 429s and cuts add up (the workers' slots together are the provider's);
    `lowest` is the sum of each worker's lowest (what the provider was held to at worst, if the
    workers' lows coincided); `blocked_for` is the longest wait any worker still has.
    """
    merged: dict[str, LimiterState] = {}
    for part in parts:
        for key, state in part.items():
            seen = merged.get(key)
            merged[key] = state if seen is None else LimiterState(
                key=key, limit=seen.limit + state.limit, in_flight=seen.in_flight + state.in_flight,
                rate_limited=seen.rate_limited + state.rate_limited, cuts=seen.cuts + state.cuts,
                lowest=seen.lowest + state.lowest, blocked_for=max(seen.blocked_for, state.blocked_for))
    return merged


class AdaptiveLimiter:
    """One provider's slots: `async with limiter.slot():` around a cell, `await limiter.ready()` before a call."""

    def __init__(self, key: str, policy: LimitPolicy | None = None, *, concurrency: int = DEFAULT_CONCURRENCY,
                 clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> None:
        self.key = key
        self.policy = policy or LimitPolicy()
        self.limit, self.maximum = self.policy.bounds(concurrency)
        self.in_flight = 0
        self.rate_limited = 0
        self.cuts = 0
        self.lowest = self.limit
        self._clock = clock
        self._sleep = sleep
        self._blocked_until = 0.0
        self._no_cut_before = 0.0
        self._successes = 0
        self._changed: asyncio.Event | None = None

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the provider's slots (waits while the provider is at its limit)."""
        while self.in_flight >= self.limit:
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self._notify()

    async def ready(self) -> None:
        """Return once the provider's Retry-After window has passed."""
        while (wait := self._blocked_until - self._clock()) > 0:
            _log.info("provider %s: waiting %.2f s for its Retry-After window", self.key, wait)
            await self._sleep(wait)

    def record_success(self) -> None:
        """A call succeeded: after `limit` of them in a row the limit grows by one."""
        self._successes += 1
        if self._successes >= self.limit and self.limit < self.maximum:
            self.limit += 1
            self._successes = 0
            self._notify()

    def record_rate_limit(self, retry_after: float | None) -> None:
        """A call was answered 429: block for Retry-After and cut the limit (once per burst)."""
        now = self._clock()
        wait = self.policy.default_retry_after if retry_after is None else retry_after
        self._blocked_until = max(self._blocked_until, now + min(max(wait, 0.0), self.policy.max_retry_after))
        self.rate_limited += 1
        self._successes = 0
        if now >= self._no_cut_before:
            self.limit = max(self.policy.minimum, int(self.limit * self.policy.decrease))
            _log.info("provider %s answered 429: concurrency cut to %d", self.key, self.limit)
            self.lowest = min(self.lowest, self.limit)
            self.cuts += 1
            self._no_cut_before = self._blocked_until

    def state(self) -> LimiterState:
        """A snapshot for progress views and tests."""
        return LimiterState(key=self.key, limit=self.limit, in_flight=self.in_flight, rate_limited=self.rate_limited,
                            cuts=self.cuts, lowest=self.lowest, blocked_for=max(0.0, self._blocked_until - self._clock()))


@dataclass(kw_only=True)
class ProviderLimits:
    """The adaptive limiters of one sweep, one per provider key, created on first use."""

    default: LimitPolicy = field(default_factory=LimitPolicy)
    """Policy of providers without their own."""
    per_provider: Mapping[str, LimitPolicy] = field(default_factory=dict)
    """Policies by provider key (`ModelEntry.limiter_key`)."""
    concurrency: int = DEFAULT_CONCURRENCY
    """Cells in flight the sweep asked for: where a policy without `initial` starts (`run_sweep` sets it)."""
    clock: Clock = time.monotonic
    sleep: Sleep = asyncio.sleep
    _limiters: dict[str, AdaptiveLimiter] = field(default_factory=dict, init=False, repr=False)
    _transports: dict[str, RateLimitTransport] = field(default_factory=dict, init=False, repr=False)

    def limiter(self, key: str) -> AdaptiveLimiter:
        """The limiter of a provider key."""
        if key not in self._limiters:
            policy = self.per_provider.get(key, self.default)
            self._limiters[key] = AdaptiveLimiter(key, policy, concurrency=self.concurrency, clock=self.clock,
                                                  sleep=self.sleep)
        return self._limiters[key]

    def states(self) -> dict[str, LimiterState]:
        """Snapshots of every limiter used so far."""
        return {key: limiter.state() for key, limiter in self._limiters.items()}

    def transport(self, key: str, inner: httpx.AsyncBaseTransport | None = None) -> RateLimitTransport:
        """The wire observer of a provider: around `inner` (a transport of the caller's, not shared), or one
        shared HTTP transport per provider (opening one costs more than a short call; `aclose` closes it)."""
        if inner is not None:
            return RateLimitTransport(inner, self.limiter(key))
        if key not in self._transports:
            self._transports[key] = RateLimitTransport(httpx.AsyncHTTPTransport(), self.limiter(key))
        return self._transports[key]

    async def aclose(self) -> None:
        """Close the shared transports (at the end of a sweep run, on the loop that used them)."""
        transports, self._transports = list(self._transports.values()), {}
        for transport in transports:
            await transport.close_inner()


class RateLimitTransport(httpx.AsyncBaseTransport):
    """An httpx transport that tells a limiter about every 429 (with its Retry-After) and every success."""

    def __init__(self, inner: httpx.AsyncBaseTransport, limiter: AdaptiveLimiter) -> None:
        self.inner = inner
        self.limiter = limiter

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send through the inner transport, then report the status."""
        await self.limiter.ready()  # the provider's own retry waits too, but never past our window
        response = await self.inner.handle_async_request(request)
        if response.status_code == 429:
            self.limiter.record_rate_limit(parse_retry_after(response.headers, time.time()))
        elif response.status_code < 400:
            self.limiter.record_success()
        return response

    async def aclose(self) -> None:
        # A provider opens and closes a client per call; the transport outlives them and is closed by its owner.
        return None

    async def close_inner(self) -> None:
        """Close the wrapped transport (its owner calls this once)."""
        await self.inner.aclose()


class LimitedLLM:
    """An `LLMCall` that waits for its provider's Retry-After window and meters every call."""

    def __init__(self, inner: LLMCall, limiter: AdaptiveLimiter | None, *, observe: bool) -> None:
        self.inner = inner
        self.limiter = limiter
        self.observe = observe
        """Report successes per call (models not observed on the wire)."""
        self.calls = 0
        self.tokens = 0
        self.cost = 0.0
        self.failures: list[str] = []
        """Every call that raised, as `Type: message` (the runner turns them into a failed run)."""

    async def __call__(self, messages: list[dict[str, Any]], model: str, tools: list[dict[str, Any]] | None = None,
                       temperature: float | None = None, *, on_delta: DeltaCallback | None = None) -> LLMResponse:
        """Call the model once its provider may be called; count the call, its tokens and cost."""
        if self.limiter is not None:
            await self.limiter.ready()
        try:
            response = LLMResponse.coerce(await self.inner(messages, model, tools, temperature, on_delta=on_delta))
        except Exception as exc:  # counted, then raised on: the runner decides what the run does with it
            self.failures.append(f"{type(exc).__name__}: {exc}")
            raise
        self.calls += 1
        self.tokens += response.usage.total_tokens
        self.cost += response.cost
        if self.limiter is not None and self.observe:
            self.limiter.record_success()
        return response
