"""The sweep engine: read the ledger, run what is missing under a global limit and per-provider limits, report.

`run_sweep` is the one entry point for every backend. It reads the ledger from the store
(marking attempts cut off by a dead process as interrupted), re-scores finished cells whose
scorer changed, then runs every other cell — retrying a cell whose run raised up to
`Sweep.max_retries` — and returns a `SweepReport` read back from the store.

`concurrency` is the cells in flight on every backend. On the asyncio backend each cell first
takes one of its provider's adaptive slots, then one of the `concurrency` global slots
(`cell_slots`): a provider that is cut back holds no global slot while it waits, so the others
keep their throughput. The process pool and Ray backends (`cyber_agent/experiments/pool.py`)
run the same `run_attempts` under the same slots in warm worker processes, each with its share
of `concurrency`; they open the store by URL, and the driver hands out cells and reads the
results back from the store.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments.cell_run import run_cell, score_record
from cyber_agent.experiments.grid import Mode, ModelEntry, Sweep, SweepCell
from cyber_agent.experiments.ledger import CellStatus, read_ledger
from cyber_agent.experiments.limiter import DEFAULT_CONCURRENCY, LimiterState, ProviderLimits
from cyber_agent.experiments.progress import ProgressObserver, SweepProgress, safe_observer
from cyber_agent.experiments.scorers import Scorer
from cyber_agent.experiments.tasks import SweepTask
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.sweep_records import SweepCellRecord

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Backend", "SweepReport", "cell_slots", "default_workers", "run_attempts", "run_sweep", "sweep"]

Backend = Literal["asyncio", "process", "ray"]
"""Where cells run: this event loop, a local process pool, or Ray tasks."""


@dataclass(frozen=True, kw_only=True)
class SweepReport:
    """What a sweep run left in the store, cell by cell, and how the run went."""

    sweep: Sweep
    statuses: list[CellStatus]
    """Every cell in grid order, as the store holds it after the run."""
    progress: SweepProgress
    """The last progress snapshot of the run."""
    limits: dict[str, LimiterState] = field(default_factory=dict)
    """The adaptive limiters' final state, by provider key (process and Ray backends: the workers' limiters added
    up, `cyber_agent/experiments/limiter.py:merge_states`)."""

    def frame(self) -> pd.DataFrame:
        """One row per cell (`cyber_agent/experiments/frame.py:sweep_frame` without reading the store again)."""
        from cyber_agent.experiments.frame import frame_of

        return frame_of(self.sweep, self.statuses)


class _Tracker:
    """Counts for progress snapshots; every change is pushed to the observer."""

    def __init__(self, sweep: Sweep, statuses: Sequence[CellStatus], observer: ProgressObserver) -> None:
        self.sweep = sweep
        self.total = len(statuses)
        self.skipped = sum(s.done for s in statuses)
        self.failed = sum(s.exhausted(sweep.max_retries) for s in statuses)
        self.done = self.running = self.errors = self.tokens = 0
        self.cost = 0.0
        self.started = time.perf_counter()
        self.observer = observer

    def snapshot(self) -> SweepProgress:
        return SweepProgress(sweep=self.sweep.name, total=self.total, skipped=self.skipped, done=self.done,
                             running=self.running, failed=self.failed, errors=self.errors, cost=self.cost,
                             tokens=self.tokens, elapsed=time.perf_counter() - self.started)

    def push(self) -> None:
        self.observer(self.snapshot())

    def start(self) -> None:
        self.running += 1
        self.push()

    def attempt(self, record: SweepCellRecord) -> None:
        self.running -= 1
        if record.state == "scored":
            self.done += 1
            self.cost += record.cost
            self.tokens += record.tokens
        else:
            self.errors += 1
        self.push()

    def give_up(self) -> None:
        self.failed += 1
        self.push()

    def finish_counts(self, state: str, cost: float, tokens: int, new_errors: int, max_retries: int,
                      prior_errors: int) -> None:
        """A cell run elsewhere came back: count its errored attempts and how it ended."""
        self.running -= 1
        self.errors += new_errors
        if state == "scored":
            self.done += 1
            self.cost += cost
            self.tokens += tokens
        elif prior_errors + new_errors > max_retries:
            self.failed += 1
        self.push()


_log = logging.getLogger("cyber_agent.sweeps")


def _no_slot() -> AbstractAsyncContextManager[None]:
    return nullcontext()


async def run_attempts(sweep: Sweep, status: CellStatus, store: TraceStore, limits: ProviderLimits | None, *,
                       registry: ToolRegistry | None = None, tracker: _Tracker | None = None,
                       slot: Callable[[], AbstractAsyncContextManager[None]] = _no_slot) -> SweepCellRecord:
    """Run a cell's attempts (each inside `slot()`) until one is scored or the retries are used up; return the last."""
    attempt, errors = status.next_attempt, status.errors
    while True:
        async with slot():
            if tracker is not None:
                tracker.start()
            record = await run_cell(sweep, status.cell, attempt, store, limits, registry)
            if tracker is not None:
                tracker.attempt(record)
        if record.state == "scored":
            return record
        errors, attempt = errors + 1, attempt + 1
        if errors > sweep.max_retries:
            _log.info("sweep %s: cell %s gave up after %d errored attempt(s)", sweep.name, status.cell.key, errors)
            if tracker is not None:
                tracker.give_up()
            return record
        _log.info("sweep %s: cell %s attempt %d ended %s; retrying (%d of %d retries used)", sweep.name,
                  status.cell.key, attempt - 1, record.state, errors, sweep.max_retries)


async def _rescore(sweep: Sweep, status: CellStatus, store: TraceStore, limits: ProviderLimits) -> None:
    assert status.record is not None
    record = await score_record(sweep, status.cell, status.record, store, limits)
    await store.update_trace(status.cell.trace_id(record.attempt), sweep_cell=record)


def _needs_rescore(sweep: Sweep, status: CellStatus) -> bool:
    scorer = sweep.scorer_for(status.cell.task)
    return status.done and status.record is not None and status.record.scorer != (scorer.name if scorer else None)


SlotFactory = Callable[[], AbstractAsyncContextManager[None]]


def cell_slots(limits: ProviderLimits, concurrency: int) -> Callable[[SweepCell], SlotFactory]:
    """The slot of each cell: one of its provider's adaptive slots, then one of `concurrency` global ones.

    The provider comes first, so a throttled provider holds no global slot while its cells wait.
    The in-process engine and every worker process (with its share of the concurrency) use this.
    """
    gate = asyncio.Semaphore(concurrency)

    def slot_for(cell: SweepCell) -> SlotFactory:
        limiter = limits.limiter(cell.model.limiter_key)

        @asynccontextmanager
        async def slot() -> AsyncIterator[None]:
            async with limiter.slot(), gate:
                yield

        return slot

    return slot_for


async def _run_asyncio(sweep: Sweep, todo: list[CellStatus], store: TraceStore, limits: ProviderLimits,
                       concurrency: int, tracker: _Tracker) -> None:
    from cyber_agent.core.runner import default_registry

    registry = default_registry()
    slot_for = cell_slots(limits, concurrency)
    async with asyncio.TaskGroup() as group:
        for status in todo:
            group.create_task(run_attempts(sweep, status, store, limits, registry=registry, tracker=tracker,
                                           slot=slot_for(status.cell)))


def default_workers() -> int:
    """Worker processes when `workers` is not given: the cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


async def run_sweep(
    sweep: Sweep,
    store: TraceStore,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    limits: ProviderLimits | None = None,
    on_progress: ProgressObserver | None = None,
    backend: Backend = "asyncio",
    store_url: str | None = None,
    workers: int | None = None,
) -> SweepReport:
    """Run every cell of `sweep` that the store does not hold finished yet; return the report.

    `concurrency` is the cells in flight, on every backend; `limits` sets the per-provider
    adaptive policies, which start at `concurrency` and only cut it on 429s (unless a policy
    caps a provider). `backend="process"` or `"ray"` runs cells in `workers` warm worker
    processes (default: the cores, `default_workers`), each an event loop running its share of
    `concurrency` cells at a time; they open the store by URL (`store_url`, default: the URL
    of `store` — SQLite, PostgreSQL or a file store; a memory store cannot be shared).
    """
    if concurrency < 1:
        raise ConfigurationError("concurrency", f"must be >= 1, got {concurrency}")
    if workers is not None and workers < 1:
        raise ConfigurationError("workers", f"must be >= 1, got {workers}")
    limits = limits if limits is not None else ProviderLimits()
    limits.concurrency = concurrency
    statuses = await read_ledger(store, sweep, mark=True)
    tracker = _Tracker(sweep, statuses, safe_observer(on_progress))
    tracker.push()
    for status in statuses:
        if _needs_rescore(sweep, status):
            await _rescore(sweep, status, store, limits)
    todo = [s for s in statuses if not s.done and not s.exhausted(sweep.max_retries)]
    states: dict[str, LimiterState] = {}
    if backend == "asyncio":
        try:
            await _run_asyncio(sweep, todo, store, limits, concurrency, tracker)
        finally:
            await limits.aclose()
    elif backend in ("process", "ray"):
        from cyber_agent.experiments.pool import run_elsewhere
        from cyber_agent.trace.store_url import store_url_of

        url = store_url or store_url_of(store)
        if url is None:
            raise ConfigurationError("store_url", f"the {backend} backend opens the store in other processes; use a store "
                                     "they can open (sqlite:///sweep.db or file:DIR) or pass store_url=")
        states = await run_elsewhere(backend, sweep, todo, url, concurrency=concurrency, workers=workers,
                                     limits=limits, tracker=tracker)
    else:
        raise ConfigurationError("backend", f"unknown backend {backend!r}; use asyncio, process or ray")
    final = await read_ledger(store, sweep)
    return SweepReport(sweep=sweep, statuses=final, progress=tracker.snapshot(),
                       limits=states or limits.states())


async def sweep(
    tasks: Sequence[SweepTask],
    models: Sequence[ModelEntry | str],
    modes: Sequence[Mode] = ("legacy",),
    overrides: Mapping[str, Mapping[str, Any]] | Sequence[Mapping[str, Any]] | None = None,
    repeats: int = 1,
    *,
    store: TraceStore,
    name: str = "sweep",
    scorer: Scorer | None = None,
    max_retries: int = 2,
    workspace: str | None = None,
    seed: int = 0,
    **run_options: Any,
) -> SweepReport:
    """Build a `Sweep` from its axes and run it (`run_options` go to `run_sweep`)."""
    grid = Sweep(name=name, tasks=tasks, models=models, modes=modes, overrides=overrides or {"default": {}},
                 repeats=repeats, scorer=scorer, max_retries=max_retries, workspace=workspace, seed=seed)
    return await run_sweep(grid, store, **run_options)
