"""The one sync bridge of the toolkit: `run_sync(coro)` (SPEC J1).

With no event loop running in the calling thread (a script, pytest), `run_sync` is
`asyncio.run`. With a loop running (a Jupyter kernel: its cells run inside the kernel's loop,
so `asyncio.run` refuses), the coroutine is handed to one long-lived daemon thread that owns
its own loop, and the caller blocks on the result — the pattern of `jupyter_core.utils.run_sync`.
No nest-asyncio: patching asyncio for the whole process is what we avoid.

The same background loop is where `launch` runs agents, so a run outlives the cell (or the
`asyncio.run`) that started it and the kernel's own loop stays free for widgets.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from cyber_agent.errors import ConfigurationError, InvalidIdError, NotFoundError

__all__ = ["background_loop", "in_background_thread", "in_notebook", "run_sync"]

T = TypeVar("T")


class _LoopThread:
    """A daemon thread running one event loop forever, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=main, name="cyber-agent-notebook-loop", daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def owns_current_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread


# The toolkit's single background loop. Process-wide on purpose: there must be exactly one, as
# in jupyter_core; everything else (stores, runners, budgets) is passed explicitly.
_BACKGROUND = _LoopThread()


def background_loop() -> asyncio.AbstractEventLoop:
    """Return the toolkit's background event loop (started on first use, lives until exit)."""
    return _BACKGROUND.loop()


def in_background_thread() -> bool:
    """True when called from the background loop's own thread."""
    return _BACKGROUND.owns_current_thread()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, inside or outside a running event loop."""
    try:
        asyncio.get_running_loop()
        running = True
    except RuntimeError:
        running = False
    if not running:  # outside the except block: an error of `coro` is not chained to "no running event loop"
        return _plain(lambda: asyncio.run(coro))
    if in_background_thread():
        coro.close()
        raise RuntimeError(
            "run_sync() was called from the toolkit's own background loop and would wait for itself; "
            "await the coroutine instead (e.g. `await ato_frames(...)`)"
        )
    future = asyncio.run_coroutine_threadsafe(coro, background_loop())
    try:
        return _plain(future.result)
    except KeyboardInterrupt:
        # An interrupted cell must not leave the work running unseen on the background loop.
        future.cancel()
        raise


def _plain(call: Callable[[], T]) -> T:
    """Return `call()`; an error about the caller's input (a bad id, a missing trace, a bad setting) is re-raised here.

    Such an error names the value and the fix; the frames of the event loop and of the store below
    this call (and the exceptions met on the way) only hide that line in a notebook's traceback.
    Any other exception keeps its whole traceback.
    """
    try:
        return call()
    except (NotFoundError, InvalidIdError, ConfigurationError) as exc:
        raise exc.with_traceback(None) from None


def in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython with a kernel attached), False in scripts and tests."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None
