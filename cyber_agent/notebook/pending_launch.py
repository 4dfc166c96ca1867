"""What `launch(...)` returns before it is awaited: a coroutine that explains a forgotten `await`.

`h = launch(TASK)` without `await` used to give `AttributeError: 'coroutine' object has no
attribute 'result'` two cells later. `PendingLaunch` is a `collections.abc.Coroutine` delegating
to the real one (so `await`, `asyncio.run`, `run_sync` and `create_task` take it unchanged) whose
attribute errors and display say "did you forget `await`?" and show the line to write.
"""

from __future__ import annotations

import functools
import html
import textwrap
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, ParamSpec

from cyber_agent.notebook.display import RichDisplay

if TYPE_CHECKING:
    from cyber_agent.notebook.launch import RunHandle

__all__ = ["PendingLaunch", "awaitable_launch"]

P = ParamSpec("P")

_HANDLE_NAMES = frozenset(name for name in dir(RichDisplay) if not name.startswith("_")) | {
    "result", "wait", "progress", "stop", "interrupt", "trace_id", "done", "status", "snapshot", "store", "runner",
    "config", "poll_errors"}


class PendingLaunch(Coroutine[Any, Any, "RunHandle"]):
    """What `launch(...)` returns: an awaitable that starts the run; `await` it to get the RunHandle.

    A coroutine in every respect (`await`, `asyncio.run`, `run_sync`, `create_task` take it), and
    one that explains itself when the `await` was forgotten: asking it for a handle's attribute
    (`h.result()`, `h.trace_id`) raises an AttributeError that says to write `h = await launch(...)`,
    and its display says the same, instead of `'coroutine' object has no attribute ...`.
    """

    def __init__(self, coro: Coroutine[Any, Any, RunHandle], what: str) -> None:
        self._coro = coro
        self._what = what

    def send(self, value: Any) -> Any:
        """Advance the launch (the coroutine protocol)."""
        return self._coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """Raise inside the launch (the coroutine protocol)."""
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)

    def close(self) -> None:
        """Close the launch without starting it (the coroutine protocol)."""
        self._coro.close()

    def __await__(self) -> Generator[Any, None, RunHandle]:
        return self._coro.__await__()

    def __getattr__(self, name: str) -> Any:
        if name in _HANDLE_NAMES:
            raise AttributeError(f"launch(...) returns an awaitable, not the run's handle: did you forget `await`? "
                                 f"Write `handle = await launch({self._what}, ...)` (in a script: "
                                 f"`handle = run_sync(launch(...))`), then `handle.{name}`")
        raise AttributeError(name)

    def __repr__(self) -> str:
        return (f"<launch({self._what}, ...) not started: did you forget `await`? "
                f"Write `handle = await launch(...)`>")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": repr(self), "text/html": f"<pre>{html.escape(repr(self))}</pre>"}


def awaitable_launch(func: Callable[P, Coroutine[Any, Any, RunHandle]]) -> Callable[P, PendingLaunch]:
    """Make `func(...)` return a PendingLaunch (same signature and docstring)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> PendingLaunch:
        task = args[0] if args else kwargs.get("task")
        what = repr(textwrap.shorten(task, 40, placeholder="…")) if isinstance(task, str) else "messages"
        return PendingLaunch(func(*args, **kwargs), what)

    return wrapper
