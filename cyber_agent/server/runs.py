"""RunManager: the server's background runs, owned by one TaskGroup (SPEC T9).

A control endpoint starts a run with `RunManager.launch`: it claims the trace (one run per
trace at a time, so a second /run answers 409), pulls the runner's first event in the request
— everything that can refuse a run (a bad config, a pending approval, an unknown message)
happens before that event, so the client gets the refusal as an HTTP error — and hands the
rest of the run to a task in the manager's TaskGroup. The events the run produces are persisted
by the store itself; each step the run yields also wakes the WebSocket watchers (`changed`).

When the server shuts down, the manager cancels every run: the runner records each cancelled
trace as `stopped` ("run cancelled") and the TaskGroup waits for them. A run that crashes
with an unexpected exception is recorded as failed on its trace and never takes the server
down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from types import TracebackType
from typing import Any

from cyber_agent.errors import ConflictError, RunError
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceStore

__all__ = ["RunManager"]

log = logging.getLogger("cyber_agent.server")

RunEvents = AsyncGenerator[Any, None]
OnDone = Callable[[], Awaitable[None]]


class RunManager:
    """Start, track, stop and (on shutdown) cancel the runs of one server."""

    def __init__(self, runner: Any, store: TraceStore) -> None:
        self.runner = runner
        self.store = store
        self._group: asyncio.TaskGroup | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._claims: set[str] = set()
        self._early_stops: dict[str, str] = {}
        self._tick = asyncio.Event()

    async def __aenter__(self) -> RunManager:
        self._group = asyncio.TaskGroup()
        await self._group.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        group, self._group = self._group, None
        for task in list(self._tasks.values()):
            task.cancel()
        if group is not None:
            await group.__aexit__(exc_type, exc, tb)

    # ---- queries ------------------------------------------------------------------------
    def is_running(self, trace_id: str) -> bool:
        """True while a run of this trace (or a reflection on it) is active in this server."""
        return trace_id in self._claims or trace_id in self.runner.running()

    def running(self) -> list[str]:
        """Ids of the traces running in this server, sub-traces included."""
        return sorted(self._claims | set(self.runner.running()))

    # ---- control ------------------------------------------------------------------------
    async def launch(self, trace_id: str, start: Callable[[], RunEvents], *, on_done: OnDone | None = None,
                     owns_status: bool = True) -> Trace:
        """Start a run of `trace_id` in the background; return the trace as the run began.

        `start` builds the runner's event generator; `on_done` runs after the run ended
        normally; `owns_status=False` (side branches) keeps a crash off the trace's status.
        """
        if self._group is None:
            raise RunError("the server is shutting down; no new run can start")
        if trace_id in self._claims:
            raise ConflictError(f"trace {trace_id!r} is already running in this server; stop it or wait for it to end")
        self._claims.add(trace_id)
        events = start()
        try:
            first = await anext(events)
        except BaseException:
            self._claims.discard(trace_id)
            await events.aclose()
            raise
        reason = self._early_stops.pop(trace_id, None)
        if reason is not None:  # a stop arrived while the run was being prepared
            self.runner.stop(trace_id, reason)
        self._tasks[trace_id] = self._group.create_task(
            self._drive(trace_id, events, on_done, owns_status), name=f"run {trace_id}"
        )
        self.kick()
        return first if isinstance(first, Trace) else await self._current(trace_id)

    def request_stop(self, trace_id: str, reason: str) -> list[str]:
        """Flag a running trace (recursive: its registered subtree) to stop; return the flagged ids."""
        flagged: list[str] = self.runner.stop(trace_id, reason)
        if not flagged and trace_id in self._claims:
            self._early_stops[trace_id] = reason
            flagged = [trace_id]
        return flagged

    async def wait_idle(self, trace_id: str) -> None:
        """Wait until the current run of `trace_id`, if any, has ended."""
        task = self._tasks.get(trace_id)
        if task is not None and task is not asyncio.current_task():
            await asyncio.wait({task})

    # ---- change notification ------------------------------------------------------------
    def kick(self) -> None:
        """Wake every watcher: a run made progress."""
        self._tick.set()
        self._tick = asyncio.Event()

    async def changed(self, timeout: float) -> None:
        """Return when a run makes progress or after `timeout` seconds, whichever is first."""
        tick = self._tick
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tick.wait(), timeout)

    # ---- internals ----------------------------------------------------------------------
    async def _drive(self, trace_id: str, events: RunEvents, on_done: OnDone | None, owns_status: bool) -> None:
        try:
            async with contextlib.aclosing(events):
                async for _event in events:
                    self.kick()
            if on_done is not None:
                await on_done()
        except Exception as exc:  # a crashed run is recorded on its trace; the server keeps serving
            log.exception("run of trace %s crashed", trace_id)
            if owns_status:
                await self._record_crash(trace_id, exc)
        finally:
            self._claims.discard(trace_id)
            self._early_stops.pop(trace_id, None)
            self._tasks.pop(trace_id, None)
            self.kick()

    async def _record_crash(self, trace_id: str, exc: Exception) -> None:
        try:
            trace = await self.store.get_trace(trace_id)
            if trace is not None and trace.status == "running":
                await self.store.update_trace(trace_id, status="failed",
                                              error_message=f"the run crashed: {type(exc).__name__}: {exc}")
        except Exception:  # the store itself is failing; the log above already has the cause
            log.exception("could not record the crash of trace %s", trace_id)

    async def _current(self, trace_id: str) -> Trace:
        trace = await self.store.get_trace(trace_id)
        if trace is None:  # pragma: no cover - the runner always creates the trace first
            raise RunError(f"trace {trace_id!r} vanished while its run started")
        return trace
