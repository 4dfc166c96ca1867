"""Run a sweep's cells in warm worker processes — a local process pool or Ray actors; the store coordinates.

`workers` processes (default: the cores) each start once for the sweep run: open the sweep's
store by URL (`cyber_agent/trace/store_url.py:open_store`), build a tool registry and their own
per-provider limiters, then run many cells at once on their own event loop. Worker `i` runs up
to its share of `concurrency` (`shares`: `concurrency // workers`, one more for the first
`concurrency % workers`) through the asyncio engine's own unit of work
(`cyber_agent/experiments/engine.py:run_attempts`) under the engine's slots (`cell_slots`).

Once every worker is ready, the driver hands cells out one at a time as a worker's slot frees
(a slow worker gets fewer; those handed out in one turn of its loop travel together, as one pipe
message or one streaming Ray call, and come back per cell), counts what comes back for progress, and reads the final ledger
from the store: every record is written by the worker that ran the cell; only a cell's counts
travel back. A worker's limiters see only its own cells: a policy that caps a provider
explicitly is split between the workers (`LimitPolicy.divided`).

- `process`: `multiprocessing` processes, one duplex pipe each, watched by each side's event loop.
  Never forked from the driver (it may hold threads and a running loop, as a notebook does):
  on Linux they fork from a fork server (`worker_context`), a clean interpreter started once per
  driver process that has imported the toolkit (`PRELOAD`), so a worker starts in milliseconds
  instead of re-importing everything, and the second sweep of a session pays no start at all;
  elsewhere they are spawned. A worker takes the driver's environment as it is at the sweep's
  start (`WorkerSetup.environ`: a fork server started earlier would otherwise hand out its own),
  and its working folder and `sys.path` (multiprocessing sends those).
- `ray`: one async Ray actor per worker (`max_concurrency` = its share, a fraction of a CPU when
  there are more workers than CPUs); Ray places them.

The report's limiter states (`SweepReport.limits`) are the workers' limiters added up
(`cyber_agent/experiments/limiter.py:merge_states`), sent back as each worker closes.

A worker that dies fails the run with a `RunError` (finished cells are in the store; a re-run
resumes); a driver that is stopped ends its workers, and the cells they had in flight are
marked interrupted by the next run's ledger read.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import pickle
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Literal, Protocol

from cyber_agent.errors import ConfigurationError, RunError
from cyber_agent.experiments.grid import Sweep
from cyber_agent.experiments.ledger import CellStatus
from cyber_agent.experiments.limiter import LimiterState, LimitPolicy, ProviderLimits, merge_states

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerContext, SpawnContext
    from multiprocessing.process import BaseProcess

    WorkerContext = ForkServerContext | SpawnContext

    from cyber_agent.experiments.engine import _Tracker

__all__ = ["CellJob", "CellOutcome", "PRELOAD", "WorkerSetup", "run_elsewhere", "shares", "worker_context"]

PRELOAD = ("cyber_agent.experiments.pool", "cyber_agent.experiments.engine", "cyber_agent.core.runner",
           "cyber_agent.trace.store_url", "cyber_agent.trace.sqlite_store", "cyber_agent.trace.store",
           "cyber_agent.llm.resolve", "httpx")
"""What the fork server imports once, before it forks workers (each would otherwise import it anew)."""

_DIED = ("a sweep worker process died{detail}; finished cells are in the store and a re-run resumes. In a script, "
         "start the sweep under `if __name__ == '__main__':` (workers are spawned and import the main module)")


@dataclass(frozen=True, kw_only=True)
class WorkerSetup:
    """What a worker needs once, before its first cell."""

    store_url: str
    sweep: Sweep
    cells_in_flight: int
    """This worker's share of the sweep's concurrency."""
    default: LimitPolicy
    per_provider: dict[str, LimitPolicy]
    environ: dict[str, str] | None = None
    """The driver's environment at the sweep's start, for a worker forked from an older fork server."""


@dataclass(frozen=True, kw_only=True)
class CellJob:
    """One cell handed to a worker: its index in the grid and where it stands."""

    index: int
    next_attempt: int
    errors: int


@dataclass(frozen=True, kw_only=True)
class CellOutcome:
    """What travels back for progress (the record itself is in the store)."""

    state: str
    cost: float
    tokens: int
    errors: int
    """Attempts of this job that errored."""


def shares(concurrency: int, workers: int) -> list[int]:
    """Cells in flight per worker: `concurrency` split as evenly as it goes (no worker gets none)."""
    workers = max(1, min(workers, concurrency))
    base, extra = divmod(concurrency, workers)
    return [base + (i < extra) for i in range(workers)]


class _CellWorker:
    """What one worker keeps between cells: store, grid, registry, limiters and its slots."""

    def __init__(self, setup: WorkerSetup) -> None:
        from cyber_agent.core.runner import default_registry
        from cyber_agent.experiments.engine import cell_slots
        from cyber_agent.trace.store_url import open_store

        self.sweep = setup.sweep
        self.cells = setup.sweep.cells()
        self.store = open_store(setup.store_url)
        self.registry = default_registry()
        self.limits = ProviderLimits(default=setup.default, per_provider=setup.per_provider,
                                     concurrency=setup.cells_in_flight)
        self.slot_for = cell_slots(self.limits, setup.cells_in_flight)

    async def run(self, job: CellJob) -> CellOutcome:
        from cyber_agent.experiments.engine import run_attempts

        cell = self.cells[job.index]
        status = CellStatus(cell=cell, record=None, next_attempt=job.next_attempt, errors=job.errors)
        record = await run_attempts(self.sweep, status, self.store, self.limits, registry=self.registry,
                                    slot=self.slot_for(cell))
        return CellOutcome(state=record.state, cost=record.cost, tokens=record.tokens,
                           errors=record.attempt - job.next_attempt + (record.state != "scored"))

    async def close(self) -> None:
        await self.limits.aclose()
        flush = getattr(self.store, "flush", None)
        if flush is not None:
            await flush()
        close = getattr(self.store, "close", None)
        if close is not None:
            close()


def _portable(exc: BaseException) -> BaseException:
    """The exception itself when it survives pickling, else a RunError quoting it."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any exception type may refuse pickling
        return RunError(f"a sweep worker raised {type(exc).__name__}: {exc}")
    return exc


# ---- the process pool ---------------------------------------------------------------------------------------------


def _watch(conn: Connection, on_message: Callable[[Any], None], on_end: Callable[[], None]) -> Callable[[], None]:
    """Hand every message arriving on `conn` to `on_message` on this loop, then `on_end` once the pipe closes.

    The loop watches the pipe itself (`add_reader`): a reader thread would wait for the GIL behind
    the busy loop at every message (up to the 5 ms switch interval, each way, per cell). Where the
    loop cannot watch a pipe (Windows' proactor loop) a thread reads it. Returns a stop function.
    """
    loop = asyncio.get_running_loop()

    def readable() -> None:
        try:
            while conn.poll():
                on_message(conn.recv())
        except (EOFError, OSError):
            loop.remove_reader(conn.fileno())
            on_end()

    try:
        loop.add_reader(conn.fileno(), readable)
    except NotImplementedError:
        def read() -> None:
            while True:
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    _call_soon(loop, on_end)
                    return
                _call_soon(loop, on_message, message)

        threading.Thread(target=read, name="sweep-pipe", daemon=True).start()
        return lambda: None
    return lambda: _remove_reader(loop, conn)


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # the loop has closed: nobody waits for this any more
        pass


def _remove_reader(loop: asyncio.AbstractEventLoop, conn: Connection) -> None:
    try:
        loop.remove_reader(conn.fileno())
    except (OSError, ValueError):  # already closed
        pass


def _process_main(conn: Connection, setup: WorkerSetup) -> None:
    """A worker process: serve cells from the pipe until the driver says stop or goes away."""
    asyncio.run(_serve(conn, setup))


class _Outbox:
    """Messages for one pipe, sent as one list per turn of the loop: the cells that free a slot or finish
    together (a wave of model replies) cost one pickle, one write and one wake-up of the other side."""

    def __init__(self, conn: Connection, kind: str) -> None:
        self._conn, self._kind = conn, kind
        self._items: list[Any] = []

    def put(self, item: Any) -> None:
        if not self._items:
            asyncio.get_running_loop().call_soon(self.flush)
        self._items.append(item)

    def flush(self) -> None:
        """Send what is waiting now (also before a message that must come after it)."""
        if self._items:
            items, self._items = self._items, []
            try:
                self._conn.send((self._kind, items))
            except OSError:  # the other side is gone; its end of the pipe reports that
                pass


async def _serve(conn: Connection, setup: WorkerSetup) -> None:
    if setup.environ is not None:
        os.environ.clear()
        os.environ.update(setup.environ)
    try:
        worker = _CellWorker(setup)
    except Exception as exc:  # noqa: BLE001 - sent to the driver, which raises it
        conn.send(("broken", _portable(exc)))
        return
    conn.send(("ready", None))
    inbox: asyncio.Queue[list[tuple[int, CellJob]] | None] = asyncio.Queue()
    stop_watching = _watch(conn, lambda message: inbox.put_nowait(None if message is None else message[1]),
                           lambda: inbox.put_nowait(None))  # None: stop, or the driver is gone
    results = _Outbox(conn, "results")

    async def one(ticket: int, job: CellJob) -> None:
        try:
            outcome = await worker.run(job)
        except Exception as exc:  # noqa: BLE001 - the driver raises it
            results.put((ticket, False, _portable(exc)))
        else:
            results.put((ticket, True, outcome))

    try:
        async with asyncio.TaskGroup() as group:
            while (jobs := await inbox.get()) is not None:
                for ticket, job in jobs:
                    group.create_task(one(ticket, job))
    finally:
        stop_watching()
        results.flush()
        await worker.close()
        conn.send(("closed", worker.limits.states()))  # the store is flushed: the driver need not wait for the interpreter's exit
        conn.close()


class _Remote(Protocol):
    async def ready(self) -> None: ...

    async def run(self, job: CellJob) -> CellOutcome: ...

    async def close(self, *, abandon: bool) -> dict[str, LimiterState]:
        """End the worker; its limiters' states (none when abandoned or dead)."""


class _ProcessWorker:
    """The driver's end of one worker process."""

    def __init__(self, context: WorkerContext, setup: WorkerSetup, number: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._conn, child = context.Pipe()
        self._process: BaseProcess = context.Process(target=_process_main, args=(child, setup), daemon=True,
                                                      name=f"cyber-agent-sweep-{number}")
        self._process.start()
        child.close()
        self._tickets = itertools.count()
        self._pending: dict[int, asyncio.Future[CellOutcome]] = {}
        self._ready: asyncio.Future[None] = self._loop.create_future()
        self._closed: asyncio.Future[dict[str, LimiterState]] = self._loop.create_future()
        self._dead: BaseException | None = None
        self._jobs = _Outbox(self._conn, "jobs")
        self._stop_watching = _watch(self._conn, lambda message: self._deliver(*message), self._died)

    def _deliver(self, kind: str, body: Any) -> None:
        if kind == "ready":
            self._ready.set_result(None)
        elif kind == "closed":
            self._closed.set_result(body)
        elif kind == "broken":
            self._fail(body)
        else:
            for ticket, ok, value in body:
                future = self._pending.pop(ticket)
                if not future.done():
                    future.set_result(value) if ok else future.set_exception(value)

    def _died(self) -> None:
        if self._closed.done():  # it said goodbye first: a normal end
            return
        self._closed.set_result({})
        self._process.join(1.0)  # the pipe closes as the process exits: its exit code follows at once
        code = self._process.exitcode
        self._fail(RunError(_DIED.format(detail=f" (exit code {code})" if code is not None else "")))

    def _fail(self, exc: BaseException) -> None:
        if self._dead is None:
            self._dead = exc
        futures: list[asyncio.Future[Any]] = [self._ready, *self._pending.values()]
        for future in futures:
            if not future.done():
                future.set_exception(self._dead)
        self._pending.clear()

    async def ready(self) -> None:
        await self._ready

    async def run(self, job: CellJob) -> CellOutcome:
        if self._dead is not None:
            raise self._dead
        ticket = next(self._tickets)
        future = self._pending[ticket] = self._loop.create_future()
        self._jobs.put((ticket, job))
        outcome: CellOutcome = await future
        return outcome

    async def close(self, *, abandon: bool) -> dict[str, LimiterState]:
        states: dict[str, LimiterState] = {}
        if not abandon and self._dead is None:
            try:
                self._jobs.flush()
                self._conn.send(None)
                states = await asyncio.wait_for(asyncio.shield(self._closed), 60.0)
            except (OSError, TimeoutError):
                pass
        if self._process.is_alive():
            self._process.terminate()
            await asyncio.to_thread(self._process.join, 10.0)
        self._stop_watching()
        self._conn.close()
        return states


# ---- Ray --------------------------------------------------------------------------------------------------------------


class _RayCellWorker:
    """A worker as an async Ray actor (`ray.remote` is applied when the Ray backend runs)."""

    def __init__(self, setup: WorkerSetup) -> None:
        self.worker = _CellWorker(setup)

    async def ready(self) -> bool:
        return True

    async def run_many(self, jobs: list[CellJob]) -> AsyncIterator[list[tuple[int, bool, Any]]]:
        """Run `jobs` at once (the worker's slots bound them); yield (position, ok, outcome or error) as cells end,
        all those that ended together in one item: one Ray call per batch, results still back per cell."""
        async with asyncio.TaskGroup() as group:
            tasks = {group.create_task(self._one(job)): position for position, job in enumerate(jobs)}
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                yield [(tasks[task], *task.result()) for task in done]

    async def _one(self, job: CellJob) -> tuple[bool, Any]:
        try:
            return True, await self.worker.run(job)
        except Exception as exc:  # noqa: BLE001 - the driver raises it for this cell
            return False, _portable(exc)

    async def close(self) -> dict[str, LimiterState]:
        await self.worker.close()
        return self.worker.limits.states()


class _RayWorker:
    """The driver's handle on one Ray actor.

    The cells handed to it in one turn of the driver's loop go as one streaming call
    (`_RayCellWorker.run_many`): an actor call costs more than a short cell's own CPU."""

    def __init__(self, ray: Any, actor: Any) -> None:
        self._ray = ray
        self._actor = actor
        self._loop = asyncio.get_running_loop()
        self._batch: list[tuple[asyncio.Future[CellOutcome], CellJob]] = []
        self._streams: set[asyncio.Task[None]] = set()  # owned: cancelled by `close`
        self._closing = False

    def _translated(self, exc: BaseException) -> BaseException:
        if isinstance(exc, self._ray.exceptions.RayActorError):
            return RunError(_DIED.format(detail=f" (Ray: {exc})"))
        if isinstance(exc, self._ray.exceptions.RayTaskError):
            cause: BaseException = exc.as_instanceof_cause()
            return cause
        return exc

    async def _call(self, ref: Awaitable[Any]) -> Any:
        try:
            return await ref
        except (self._ray.exceptions.RayActorError, self._ray.exceptions.RayTaskError) as exc:
            raise self._translated(exc) from None

    async def ready(self) -> None:
        await self._call(self._actor.ready.remote())

    async def run(self, job: CellJob) -> CellOutcome:
        future: asyncio.Future[CellOutcome] = self._loop.create_future()
        if not self._batch:
            self._loop.call_soon(self._send)
        self._batch.append((future, job))
        return await future

    def _send(self) -> None:
        batch, self._batch = self._batch, []
        if self._closing:  # handed out as the run was stopped: the actor is going away
            for future, _ in batch:
                future.cancel()
            return
        task = self._loop.create_task(self._stream(batch))
        self._streams.add(task)
        task.add_done_callback(self._streams.discard)

    async def _stream(self, batch: list[tuple[asyncio.Future[CellOutcome], CellJob]]) -> None:
        futures = [future for future, _ in batch]
        try:
            async for ref in self._actor.run_many.remote([job for _, job in batch]):
                for position, ok, value in await ref:
                    future = futures[position]
                    if not future.done():
                        future.set_result(value) if ok else future.set_exception(value)
        except Exception as exc:  # noqa: BLE001 - the actor died or the call failed: every cell of it fails so
            failure = self._translated(exc)
            for future in futures:
                if not future.done():
                    future.set_exception(failure)

    async def close(self, *, abandon: bool) -> dict[str, LimiterState]:
        self._closing = True
        for task in list(self._streams):
            task.cancel()
        await asyncio.gather(*self._streams, return_exceptions=True)
        try:
            states: dict[str, LimiterState] = await self._call(self._actor.close.remote()) if not abandon else {}
        finally:
            self._ray.kill(self._actor)
        return states


# ---- the driver -------------------------------------------------------------------------------------------------------


async def _drive(remotes: list[_Remote], lanes: list[int], todo: list[CellStatus], sweep: Sweep, tracker: _Tracker) -> None:
    queue = deque(todo)

    async def lane(remote: _Remote) -> None:
        while queue:
            status = queue.popleft()
            tracker.start()
            outcome = await remote.run(CellJob(index=status.cell.index, next_attempt=status.next_attempt,
                                               errors=status.errors))
            tracker.finish_counts(outcome.state, outcome.cost, outcome.tokens, outcome.errors, sweep.max_retries,
                                  status.errors)

    # Every worker warm before the first cell: a worker still importing would compete for the cores
    # with the cells of one already running (and a worker that cannot start fails the run at once).
    await asyncio.gather(*(remote.ready() for remote in remotes))
    async with asyncio.TaskGroup() as group:
        for remote, count in zip(remotes, lanes):
            for _ in range(count):
                group.create_task(lane(remote))


async def _run_on(start: Callable[[WorkerSetup, int], _Remote], setups: list[WorkerSetup], todo: list[CellStatus],
                  sweep: Sweep, tracker: _Tracker) -> dict[str, LimiterState]:
    remotes: list[_Remote] = []
    finished = False
    closed: list[dict[str, LimiterState] | BaseException] = []
    try:
        for number, setup in enumerate(setups):
            remotes.append(start(setup, number))
        await _drive(remotes, [s.cells_in_flight for s in setups], todo, sweep, tracker)
        finished = True
    except* Exception as group:  # noqa: BLE001 - a worker's death or error fails the run: raise the first, as
        raise _first(group) from None  # the asyncio engine would
    finally:
        closed = await asyncio.gather(*(r.close(abandon=not finished) for r in remotes), return_exceptions=True)
    return merge_states([states for states in closed if isinstance(states, dict)])


def _first(group: BaseExceptionGroup[Exception]) -> Exception:
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    assert isinstance(first, Exception)
    return first


def _check_picklable(sweep: Sweep) -> None:
    try:
        pickle.dumps(sweep)
    except Exception as exc:  # noqa: BLE001 - PicklingError, AttributeError on a local function, TypeError...
        raise ConfigurationError("sweep", f"cannot be sent to worker processes ({type(exc).__name__}: {exc}); define "
                                 "scorer functions and model factories at module level, not as lambdas or closures") from None


def _ray_module() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigurationError("backend", "the ray backend needs Ray: pip install 'cyber-agent[ray]'") from None
    if not ray.is_initialized():
        ray.init()
    return ray


def worker_context() -> WorkerContext:
    """Where worker processes come from: a fork server that imported `PRELOAD` (Linux, macOS), else spawn.

    The fork server is multiprocessing's own: one clean interpreter per driver process, started at
    the first sweep and reused by every later one; workers fork from it, never from the driver.
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(PRELOAD))  # read when the server starts; later calls change nothing
        return context
    return multiprocessing.get_context("spawn")


async def run_elsewhere(backend: Literal["process", "ray"], sweep: Sweep, todo: list[CellStatus], store_url: str, *,
                        concurrency: int, workers: int | None, limits: ProviderLimits,
                        tracker: _Tracker) -> dict[str, LimiterState]:
    """Run `todo` on `workers` warm processes (a local pool or Ray actors), `concurrency` cells in flight in all.

    Returns the workers' limiter states, added up per provider."""
    from cyber_agent.experiments.engine import default_workers

    if workers is not None and workers < 1:
        raise ConfigurationError("workers", f"must be >= 1, got {workers}")
    _check_picklable(sweep)
    if not todo:
        return {}
    ray = _ray_module() if backend == "ray" else None
    cpus = float(ray.cluster_resources().get("CPU", 1)) if ray is not None else float(default_workers())
    if workers is None:
        workers = max(1, int(cpus))
    split = shares(min(concurrency, len(todo)), workers)
    environ = dict(os.environ) if ray is None else None  # Ray's workers may be on other machines: their own
    setups = [WorkerSetup(store_url=store_url, sweep=sweep, cells_in_flight=share, default=limits.default.divided(len(split)),
                          per_provider={k: p.divided(len(split)) for k, p in limits.per_provider.items()}, environ=environ)
              for share in split]
    if ray is None:
        context = worker_context()
        return await _run_on(lambda setup, number: _ProcessWorker(context, setup, number), setups, todo, sweep, tracker)
    actor_class = ray.remote(_RayCellWorker)
    # More workers than CPUs still all start (an actor asking for a whole CPU would wait for one forever).
    cpu_share = min(1.0, cpus / len(split)) if cpus > 0 else 0.0
    return await _run_on(lambda setup, number: _RayWorker(ray, actor_class.options(
        max_concurrency=setup.cells_in_flight + 1, num_cpus=cpu_share).remote(setup)), setups, todo, sweep, tracker)
