"""Cells handed to a worker in one turn of the driver's loop travel together, and come back per cell.

These go below the public API (`run_sweep` gives the same report batched or not): they check the
batching itself, the pipe's `_Outbox` and the Ray handle `_RayWorker` with its actor's `run_many`,
the Ray part with a stand-in for Ray so it runs where Ray is not installed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from cyber_agent.errors import RunError
from cyber_agent.experiments.pool import CellJob, CellOutcome, _Outbox, _RayCellWorker, _RayWorker


class Pipe:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, message: Any) -> None:
        self.sent.append(message)


async def test_what_is_put_in_one_turn_of_the_loop_is_one_message() -> None:
    pipe = Pipe()
    outbox = _Outbox(pipe, "jobs")  # type: ignore[arg-type]
    for item in ("a", "b", "c"):
        outbox.put(item)
    assert pipe.sent == []
    await asyncio.sleep(0)
    assert pipe.sent == [("jobs", ["a", "b", "c"])]
    outbox.put("d")
    outbox.flush()  # before a message that must follow it
    await asyncio.sleep(0)
    assert pipe.sent == [("jobs", ["a", "b", "c"]), ("jobs", ["d"])]


class Cells:
    """A worker's cells: job `i` ends after `i` ms; job 3 raises."""

    async def run(self, job: CellJob) -> CellOutcome:
        await asyncio.sleep(job.index / 1000)
        if job.index == 3:
            raise ValueError("cell 3 broke")
        return CellOutcome(state="scored", cost=0.0, tokens=job.index, errors=0)


class ActorDied(Exception):
    pass


def fake_ray() -> Any:
    return SimpleNamespace(exceptions=SimpleNamespace(RayActorError=ActorDied, RayTaskError=type("TaskError", (Exception,), {})),
                           kill=lambda actor: None)


class Actor:
    """A stand-in for the Ray actor: `run_many.remote(jobs)` streams `_RayCellWorker.run_many` as Ray would."""

    def __init__(self, die_after: int | None = None) -> None:
        self.worker = _RayCellWorker.__new__(_RayCellWorker)
        self.worker.worker = Cells()  # type: ignore[assignment]
        self.calls: list[list[int]] = []
        self.die_after = die_after
        self.run_many = SimpleNamespace(remote=self._remote)

    def _remote(self, jobs: list[CellJob]) -> AsyncIterator[Any]:
        self.calls.append([job.index for job in jobs])
        return self._stream(jobs)

    async def _stream(self, jobs: list[CellJob]) -> AsyncIterator[Any]:
        sent = 0
        async for item in self.worker.run_many(jobs):
            if self.die_after is not None and sent >= self.die_after:
                raise ActorDied("the actor's process exited")
            sent += len(item)
            yield _ref(item)


async def _ref(value: Any) -> Any:
    return value


def job(index: int) -> CellJob:
    return CellJob(index=index, next_attempt=0, errors=0)


async def test_cells_handed_to_a_ray_worker_together_are_one_call_and_come_back_per_cell() -> None:
    actor = Actor()
    remote = _RayWorker(fake_ray(), actor)
    results = await asyncio.gather(*(remote.run(job(i)) for i in range(5)), return_exceptions=True)
    assert actor.calls == [[0, 1, 2, 3, 4]]
    assert [r.tokens if isinstance(r, CellOutcome) else str(r) for r in results] == [0, 1, 2, "cell 3 broke", 4]
    assert isinstance(results[3], ValueError)
    await asyncio.gather(remote.run(job(5)), remote.run(job(6)))  # a later turn: a call of its own
    assert actor.calls[1:] == [[5, 6]]


async def test_a_ray_worker_that_dies_fails_the_cells_it_had_not_finished() -> None:
    actor = Actor(die_after=1)
    remote = _RayWorker(fake_ray(), actor)
    results = await asyncio.gather(*(remote.run(job(i)) for i in (0, 20, 40)), return_exceptions=True)
    assert isinstance(results[0], CellOutcome)
    assert all(isinstance(r, RunError) and "died" in str(r) for r in results[1:])


async def test_cells_handed_to_a_ray_worker_as_it_closes_are_not_sent() -> None:
    actor = Actor()
    remote = _RayWorker(fake_ray(), actor)
    pending = asyncio.ensure_future(remote.run(job(0)))
    await asyncio.sleep(0)  # run() put the cell in this turn's batch; the batch goes at the next turn
    await remote.close(abandon=True)  # the run was stopped
    await asyncio.wait([pending])
    assert pending.cancelled() and actor.calls == []
