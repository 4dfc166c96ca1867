"""`concurrency` is cells in flight on every backend: the limiter starts open, and each warm worker runs many cells."""

from __future__ import annotations

import asyncio

import pytest
from sweep_helpers import env_sweep, most_at_once, pid_sweep

from cyber_agent.errors import RunError
from cyber_agent.experiments import LimitPolicy, ModelEntry, ProviderLimits, Sweep, SweepTask, run_sweep
from cyber_agent.experiments.engine import default_workers
from cyber_agent.experiments.limiter import LimiterState, merge_states
from cyber_agent.experiments.pool import shares
from cyber_agent.trace import InMemoryTraceStore, open_store


class Barrier:
    """A model whose calls all wait until `parties` of them are in flight at once (or fail after `timeout`)."""

    def __init__(self, parties: int, timeout: float = 20.0) -> None:
        self.parties, self.timeout = parties, timeout
        self.in_flight = self.most = 0
        self.full = asyncio.Event()

    def __call__(self, **_: object) -> Barrier:
        return self  # the factory: every cell shares this model

    async def call(self, messages, model, tools=None, temperature=None, *, on_delta=None) -> dict[str, object]:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self.in_flight >= self.parties:
            self.full.set()
        try:
            await asyncio.wait_for(self.full.wait(), self.timeout)
        finally:
            self.in_flight -= 1
        return {"content": "done", "prompt_tokens": 1, "completion_tokens": 1}


def barrier_sweep(barrier: Barrier, cells: int) -> Sweep:
    entry = ModelEntry(spec="barrier", label="barrier", factory=lambda **_: barrier.call)
    return Sweep(name="barrier", tasks=[SweepTask(id=f"b{i}", prompt=f"Wait ({i}).") for i in range(cells)],
                 models=[entry], max_retries=0)


async def test_a_fresh_sweep_has_concurrency_cells_in_flight_before_any_signal():
    """The limiter starts at the sweep's concurrency (it used to start at 8 and grow by one per window)."""
    barrier = Barrier(parties=32)
    report = await run_sweep(barrier_sweep(barrier, 48), InMemoryTraceStore(), concurrency=32)
    assert report.progress.done == 48 and report.progress.errors == 0, report.progress
    assert barrier.most == 32
    (state,) = report.limits.values()
    assert state.limit == 32 and state.cuts == 0


async def test_an_explicit_policy_still_caps_its_provider():
    barrier = Barrier(parties=5, timeout=0.5)
    limits = ProviderLimits(default=LimitPolicy(initial=4, maximum=4))
    report = await run_sweep(barrier_sweep(barrier, 8), InMemoryTraceStore(), concurrency=32, limits=limits)
    assert barrier.most == 4  # never five at once: each call timed out waiting for a fifth
    assert report.progress.errors == 8


def test_policy_bounds_default_to_the_sweep_and_split_between_workers():
    assert LimitPolicy().bounds(64) == (64, 64)
    assert LimitPolicy(initial=4).bounds(64) == (4, 64)
    assert LimitPolicy(maximum=16).bounds(64) == (16, 16)
    assert LimitPolicy(initial=2, maximum=6).divided(4).bounds(16) == (1, 2)
    assert LimitPolicy().divided(2) == LimitPolicy()
    assert shares(64, 2) == [32, 32] and shares(7, 3) == [3, 2, 2] and shares(2, 8) == [1, 1]


async def test_warm_workers_each_run_many_cells_at_once_and_default_to_the_cores(tmp_path):
    """At most `default_workers()` processes run the cells, and cells overlap more than one per worker."""
    store = open_store(f"sqlite:///{tmp_path / 'sweep.db'}")
    report = await run_sweep(pid_sweep(24, 0.5), store, backend="process", concurrency=8)
    assert report.progress.done == 24 and report.progress.errors == 0
    records = [s.record for s in report.statuses if s.record is not None]
    pids = {record.answer for record in records}
    assert 1 <= len(pids) <= default_workers()
    assert most_at_once(records) >= 4  # a worker holds its share (8 / workers) of cells in flight, not one


async def test_a_worker_that_dies_fails_the_run_and_a_rerun_resumes(tmp_path):
    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    with pytest.raises(RunError, match=r"a sweep worker process died \(exit code 3\); finished cells are in the store"):
        await run_sweep(pid_sweep(4, 0.0, exit_code=3), open_store(url), backend="process", workers=1)
    report = await run_sweep(pid_sweep(4, 0.0), open_store(url), backend="process", workers=1)
    assert report.progress.done == 4 and report.progress.failed == 0
    assert all(s.done and s.errors == 0 for s in report.statuses)  # the death is no error of the cells


async def test_workers_take_the_drivers_environment_and_folder_as_they_are_at_each_sweep(tmp_path, monkeypatch):
    """Workers fork from a fork server started by an earlier sweep: they still see what the driver set since."""
    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    await run_sweep(pid_sweep(2, 0.0, name="first"), open_store(url), backend="process", workers=1)
    monkeypatch.setenv("CYBER_AGENT_TEST_MARK", "set after the first sweep")
    monkeypatch.chdir(tmp_path)
    report = await run_sweep(env_sweep(3, "CYBER_AGENT_TEST_MARK"), open_store(url), backend="process", workers=2)
    answers = {s.record.answer for s in report.statuses if s.record is not None}
    assert answers == {f"set after the first sweep @ {tmp_path}"}


async def test_the_report_adds_up_the_workers_limiters(tmp_path):
    """Each worker has its own limiter; the report holds them added up per provider, not the driver's unused one."""
    report = await run_sweep(pid_sweep(8, 0.0), open_store(f"sqlite:///{tmp_path / 'sweep.db'}"), backend="process",
                             workers=2, concurrency=6)
    assert report.progress.done == 8
    (state,) = report.limits.values()
    assert (state.limit, state.in_flight, state.cuts, state.rate_limited) == (6, 0, 0, 0)


def test_merged_limiter_states_add_up_and_keep_the_longest_wait():
    def state(key: str, limit: int, limited: int, cuts: int, lowest: int, blocked: float) -> LimiterState:
        return LimiterState(key=key, limit=limit, in_flight=0, rate_limited=limited, cuts=cuts, lowest=lowest,
                            blocked_for=blocked)

    merged = merge_states([{"a": state("a", 4, 2, 1, 2, 0.5), "b": state("b", 3, 0, 0, 3, 0.0)},
                           {"a": state("a", 3, 1, 1, 1, 2.0)}])
    assert merged == {"a": state("a", 7, 3, 2, 3, 2.0), "b": state("b", 3, 0, 0, 3, 0.0)}
    assert merge_states([]) == {}
