"""The kernel's interrupt (■) while a cell waits for a run, and a launch cell run twice.

ipykernel turns SIGINT into a `CancelledError` of an async cell's task, by a handler that runs
on the kernel's loop (so a cell blocked in sync code never sees it), and into a
`KeyboardInterrupt` in a sync cell. Neither reaches the run, which lives on the toolkit's
background loop. `RunHandle.result` and `RunHandle.wait` therefore take SIGINT themselves while
they wait (only on the main thread, where signals are delivered) and stop the run's subtree
(`cyber_agent/notebook/launch.py:RunHandle.interrupt`); the cell then ends with one line,
`RunInterruptedError: stopped by interrupt: …`. A second ■ while the stop is under way cancels
the run outright.

`previous_run_of_cell` remembers, per notebook cell (JupyterLab's `cellId` in the request's
metadata), the handle a cell launched last, so running the same launch cell again can stop
the earlier run and say so instead of leaving it running unseen.
"""

from __future__ import annotations

import signal
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["STOP_GRACE_SECONDS", "current_cell_id", "previous_run_of_cell", "remember_cell_run", "sigint_calls",
           "sigint_raises"]

STOP_GRACE_SECONDS = 20.0
"""How long a wait gives a stopped run to end (its next provider call, tool or spawn) before cancelling it."""


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def sigint_calls(callback: Callable[[], None]) -> Iterator[bool]:
    """While inside, SIGINT calls `callback()` (from the signal handler: keep it thread-safe and short).

    Yields False, and changes nothing, off the main thread (signals are only delivered there).
    """
    if not _main_thread():
        yield False
        return

    def handler(signum: int, frame: Any) -> None:
        callback()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield True
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def sigint_raises() -> Iterator[None]:
    """While inside, SIGINT raises KeyboardInterrupt (as in a plain sync cell), also inside an async cell.

    An async cell's own handler only schedules a cancel on the kernel's loop, which a blocking
    wait never lets run.
    """
    if not _main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def current_cell_id() -> str | None:
    """The id of the notebook cell being executed (JupyterLab sends it), or None outside a kernel."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    try:
        parent = kernel.get_parent("shell") or {}
    except Exception:  # noqa: BLE001 - an older kernel without per-channel parents
        return None
    metadata = parent.get("metadata") or {}
    cell = metadata.get("cellId") if isinstance(metadata, dict) else None
    return cell if isinstance(cell, str) and cell else None


_BY_CELL: dict[str, weakref.ref[Any]] = {}


def previous_run_of_cell(cell: str | None) -> Any | None:
    """The handle the cell `cell` launched last, if it is still alive."""
    if cell is None:
        return None
    ref = _BY_CELL.get(cell)
    return ref() if ref is not None else None


def remember_cell_run(cell: str | None, handle: Any) -> None:
    """Remember `handle` as the cell's latest launch."""
    if cell is not None:
        _BY_CELL[cell] = weakref.ref(handle)
