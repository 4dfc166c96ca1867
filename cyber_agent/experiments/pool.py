"""Run a sweep's cells in other processes: a local process pool, or Ray tasks; the store is the coordinator.

Both backends run the asyncio engine's own unit of work (`run_attempts`) in a worker process
that opens the sweep's store by URL (`cyber_agent/trace/store_url.py:open_store`): SQLite or a
file store on one machine. The driver only hands out cells (at most `workers` in flight),
counts what comes back for progress, and reads the final ledger from the store — every result
is in the store, none travels back except the counts. Nothing here schedules beyond that:
`concurrent.futures.ProcessPoolExecutor` and Ray place the work.

Each worker process keeps one `_Worker` (store, grid, tool registry, limiters and an event
loop that lives as long as the process), made on its first cell: opening a store and building
a registry cost more than a short offline cell. Limiters are per worker process; the 429s one
worker sees do not slow another.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import pickle
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from cyber_agent.errors import ConfigurationError, RunError
from cyber_agent.experiments.grid import Sweep, SweepCell
from cyber_agent.experiments.ledger import CellStatus
from cyber_agent.experiments.limiter import ProviderLimits
from cyber_agent.trace.sweep_records import SweepCellRecord

if TYPE_CHECKING:
    from cyber_agent.experiments.engine import _Tracker
    from cyber_agent.tools.registry import ToolRegistry
    from cyber_agent.trace.protocols import TraceStore

__all__ = ["CellJob", "run_elsewhere"]


@dataclass(frozen=True, kw_only=True)
class CellJob:
    """One cell handed to a worker: where it stands and where the store is."""

    store_url: str
    sweep: Sweep
    index: int
    next_attempt: int
    errors: int


@dataclass(kw_only=True)
class _Worker:
    """What one worker process keeps between cells."""

    store: TraceStore
    sweep: Sweep
    cells: list[SweepCell]
    registry: ToolRegistry
    limits: ProviderLimits = field(default_factory=ProviderLimits)
    runner: asyncio.Runner = field(default_factory=asyncio.Runner)


# One per worker process, made by its first cell (a worker serves one sweep and one store at a time).
_workers: dict[tuple[str, str], _Worker] = {}


def _worker_for(job: CellJob) -> _Worker:
    from cyber_agent.core.runner import default_registry
    from cyber_agent.trace.store_url import open_store

    key = (job.store_url, job.sweep.name)
    worker = _workers.get(key)
    if worker is None or worker.sweep != job.sweep:
        worker = _Worker(store=open_store(job.store_url), sweep=job.sweep, cells=job.sweep.cells(), registry=default_registry())
        _workers.clear()
        _workers[key] = worker
    return worker


def run_job(job: CellJob) -> tuple[dict[str, Any], int]:
    """Run one cell's attempts in this process; return its last record (JSON) and the attempts that errored."""
    from cyber_agent.experiments.engine import run_attempts

    worker = _worker_for(job)
    cell = worker.cells[job.index]
    status = CellStatus(cell=cell, record=None, next_attempt=job.next_attempt, errors=job.errors)
    record = worker.runner.run(run_attempts(worker.sweep, status, worker.store, worker.limits, registry=worker.registry))
    made_errors = record.attempt - job.next_attempt + (record.state != "scored")
    return record.model_dump(mode="json"), made_errors


def _check_picklable(sweep: Sweep) -> None:
    try:
        pickle.dumps(sweep)
    except Exception as exc:  # noqa: BLE001 - PicklingError, AttributeError on a local function, TypeError...
        raise ConfigurationError("sweep", f"cannot be sent to worker processes ({type(exc).__name__}: {exc}); define "
                                 "scorer functions and model factories at module level, not as lambdas or closures") from None


async def _drive(todo: list[CellStatus], sweep: Sweep, store_url: str, workers: int, tracker: _Tracker,
                 submit: Callable[[CellJob], Awaitable[tuple[dict[str, Any], int]]]) -> None:
    gate = asyncio.Semaphore(workers)

    async def one(status: CellStatus) -> None:
        async with gate:
            tracker.start()
            data, errors = await submit(CellJob(store_url=store_url, sweep=sweep, index=status.cell.index,
                                                next_attempt=status.next_attempt, errors=status.errors))
            tracker.finish(SweepCellRecord.model_validate(data), errors, sweep.max_retries, status.errors)

    async with asyncio.TaskGroup() as group:
        for status in todo:
            group.create_task(one(status))


async def _on_pool(todo: list[CellStatus], sweep: Sweep, store_url: str, workers: int, tracker: _Tracker) -> None:
    loop = asyncio.get_running_loop()
    # spawn, not fork: the driver may hold threads and a running loop (a notebook) that a fork would copy.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            await _drive(todo, sweep, store_url, workers, tracker, lambda job: loop.run_in_executor(pool, run_job, job))
        except* BrokenProcessPool:
            raise RunError("a sweep worker process died; finished cells are in the store and a re-run resumes. In a "
                           "script, start the sweep under `if __name__ == '__main__':` (workers are spawned and "
                           "import the main module)") from None


async def _on_ray(todo: list[CellStatus], sweep: Sweep, store_url: str, workers: int, tracker: _Tracker) -> None:
    try:
        import ray
    except ImportError:
        raise ConfigurationError("backend", "the ray backend needs Ray: pip install 'cyber-agent[ray]'") from None
    if not ray.is_initialized():
        ray.init()
    remote = ray.remote(run_job)

    async def submit(job: CellJob) -> tuple[dict[str, Any], int]:
        result: tuple[dict[str, Any], int] = await remote.remote(job)
        return result

    await _drive(todo, sweep, store_url, workers, tracker, submit)


async def run_elsewhere(backend: Literal["process", "ray"], sweep: Sweep, todo: list[CellStatus], store_url: str, *,
                        workers: int, tracker: _Tracker) -> None:
    """Run `todo` on a process pool or on Ray, `workers` cells at a time, each worker opening `store_url`."""
    if workers < 1:
        raise ConfigurationError("workers", f"must be >= 1, got {workers}")
    _check_picklable(sweep)
    if not todo:
        return
    if backend == "process":
        await _on_pool(todo, sweep, store_url, workers, tracker)
    else:
        await _on_ray(todo, sweep, store_url, workers, tracker)
