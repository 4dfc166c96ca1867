"""Per-provider adaptive limits: a 429 with Retry-After slows that provider only; the others keep their concurrency."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import pytest

from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments import AdaptiveLimiter, LimitPolicy, ModelEntry, ProviderLimits, Sweep, SweepTask, run_sweep
from cyber_agent.llm import RetryPolicy


class FakeClock:
    """A clock that only moves when the limiter sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def limiter(**policy) -> tuple[AdaptiveLimiter, FakeClock]:
    clock = FakeClock()
    return AdaptiveLimiter("p", LimitPolicy(**policy), clock=clock, sleep=clock.sleep), clock


async def test_a_429_cuts_once_per_burst_and_blocks_for_its_retry_after():
    lim, clock = limiter(initial=8)
    lim.record_rate_limit(2.0)
    for _ in range(3):  # the rest of the burst: same window, no further cut
        lim.record_rate_limit(2.0)
    assert (lim.limit, lim.cuts, lim.rate_limited) == (4, 1, 4)
    await lim.ready()
    assert clock.sleeps == [2.0]
    lim.record_rate_limit(None)  # a new window: cut again, default wait
    assert (lim.limit, lim.cuts) == (2, 2)
    await lim.ready()
    assert clock.sleeps == [2.0, 1.0]
    for _ in range(5):
        clock.now += 10
        lim.record_rate_limit(600.0)  # a hostile header is capped
    assert lim.limit == 1 and lim.state().lowest == 1 and lim.state().blocked_for == 60.0


async def test_the_limit_grows_back_by_one_per_window_of_successes():
    lim, _ = limiter(initial=4, maximum=6)
    lim.record_rate_limit(0.0)
    assert lim.limit == 2
    history = []
    for _ in range(12):
        lim.record_success()
        history.append(lim.limit)
    assert history == [2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5]


async def test_slots_wait_at_the_limit_and_free_on_release():
    lim, _ = limiter(initial=2, minimum=1, maximum=2)
    order: list[str] = []

    async def cell(name: str, hold: asyncio.Event) -> None:
        async with lim.slot():
            order.append(f"in {name}")
            await hold.wait()
        order.append(f"out {name}")

    holds = [asyncio.Event() for _ in range(3)]
    async with asyncio.TaskGroup() as group:
        for i, hold in enumerate(holds):
            group.create_task(cell(str(i), hold))
        await asyncio.sleep(0.01)
        assert order == ["in 0", "in 1"] and lim.in_flight == 2
        holds[0].set()
        await asyncio.sleep(0.01)
        assert order[-1] == "in 2"
        for hold in holds:
            hold.set()


def test_bad_policies_are_refused():
    with pytest.raises(ConfigurationError):
        LimitPolicy(initial=0)
    with pytest.raises(ConfigurationError):
        LimitPolicy(decrease=1.5)


@dataclass
class Server:
    """A local OpenAI-compatible server: answers 429 (Retry-After) to its first `refuse` requests."""

    latency: float
    refuse: int = 0
    retry_after: float = 0.0
    in_flight: int = 0
    most: int = 0
    arrivals: list[float] = field(default_factory=list)
    refusals: list[float] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line)}
        await reader.readexactly(int(headers["content-length"]))
        self.arrivals.append(time.monotonic())
        if len(self.arrivals) <= self.refuse:
            body = b'{"error": {"message": "rate limited"}}'
            writer.write(b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
                         + f"retry-after: {self.retry_after}\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
            self.refusals.append(time.monotonic())
        else:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            await asyncio.sleep(self.latency)
            self.in_flight -= 1
            body = json.dumps({"id": "c", "object": "chat.completion", "model": "m",
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 10, "completion_tokens": 2}}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
        await writer.drain()
        writer.close()


async def test_a_provider_answering_429_slows_alone_while_another_keeps_its_concurrency(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    slow = Server(latency=0.03, refuse=4, retry_after=0.5)
    fast = Server(latency=0.05)
    servers = [await asyncio.start_server(s.handle, "127.0.0.1", 0) for s in (slow, fast)]
    slow.port, fast.port = (s.sockets[0].getsockname()[1] for s in servers)

    def entry(label: str, port: int) -> ModelEntry:
        # No provider retries: every 429 reaches the sweep, which retries the cell once the window has passed.
        return ModelEntry(spec="openai:m", label=label, options={
            "base_url": f"http://127.0.0.1:{port}/v1", "env": {}, "stream": False, "retry": RetryPolicy(max_retries=0)})

    tasks = [SweepTask(id=f"t{i}", prompt=f"Say hello ({i}).", expected="hello") for i in range(16)]
    grid = Sweep(name="limits", tasks=tasks, models=[entry("limited", slow.port), entry("steady", fast.port)], max_retries=3)
    limits = ProviderLimits(default=LimitPolicy(initial=4, maximum=4))
    async with servers[0], servers[1]:
        report = await run_sweep(grid, __import__("cyber_agent.trace", fromlist=["InMemoryTraceStore"]).InMemoryTraceStore(),
                                 concurrency=8, limits=limits)
    frame = report.frame()
    assert (frame["status"] == "completed").all() and frame["passed"].all()

    limited, steady = report.limits[f"openai@http://127.0.0.1:{slow.port}/v1"], report.limits[f"openai@http://127.0.0.1:{fast.port}/v1"]
    assert limited.cuts >= 1 and limited.lowest <= 2 and limited.rate_limited == 4
    assert steady.cuts == 0 and steady.rate_limited == 0 and steady.lowest == 4
    assert fast.most == 4  # the steady provider ran at its full concurrency
    assert set(frame[frame["model"] == "steady"]["errors"]) == {0}
    assert frame[frame["model"] == "limited"]["errors"].sum() == 4  # each 429 failed one attempt, retried later

    window_start, window_end = slow.refusals[0], slow.refusals[0] + slow.retry_after
    assert all(not window_start < t < window_end - 0.02 for t in slow.arrivals[slow.refuse:]), "a request went during Retry-After"
    assert any(window_start < t < window_end for t in fast.arrivals), "the steady provider paused with the limited one"
