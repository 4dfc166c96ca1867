"""The tree view of a running launch: re-read from the store on a timer, one display-id HTML output.

    h = await launch(TASK, mode="recursive", model="demo:latency=0.3")
    live_tree(h)                        # the tree so far; running children marked with their tool
    r = await h.result()                # the view becomes the final static TreeView

One output: the `TreeView` HTML of `cyber_agent/notebook/tree_view.py` (its script does the
drawing), keyed so a redraw keeps what is expanded, selected and searched, with a status line
under it. Every `interval` seconds while the run goes on, the view re-reads the tree on the
toolkit's background loop (`atree_view`) and replaces the output's bundle by display id
(`cyber_agent/notebook/display.py:LiveDisplay`): JupyterLab redraws it whatever cell runs, or
none, and the script restores the user's state from its key. Running traces come from the
handle's progress snapshot (`RunHandle.snapshot.active`): each is marked with its current tool
and the time since the view first saw it there.

There is no widget: a notebook saved at any moment, mid-run included, keeps the latest
snapshot as HTML. When the run ends the output becomes the final `TreeView`, sent again from
the cell that awaits the run (`await h.result()`, `h.wait()`), so nbclient saves it too.
"""

from __future__ import annotations

import asyncio
import html
import threading
import time
from datetime import datetime
from typing import Any

from cyber_agent.notebook.bridge import in_background_thread, in_notebook
from cyber_agent.notebook.display import LiveDisplay, RichDisplay
from cyber_agent.notebook.launch import RunHandle
from cyber_agent.notebook.progress import ProgressSnapshot
from cyber_agent.notebook.tree_view import TreeView, atree_view

__all__ = ["LiveTreeView", "live_tree"]


class LiveTreeView(RichDisplay):
    """A `TreeView` of `handle`'s tree, refreshed every `interval` seconds until the run ends (see the module docstring)."""

    def __init__(self, handle: RunHandle, *, interval: float = 1.0, **options: Any) -> None:
        if not isinstance(handle, RunHandle):
            raise TypeError(f"live_tree() takes the RunHandle of `await launch(...)`, got {type(handle).__name__}"
                            + (" (a coroutine: add `await` before launch(...))" if asyncio.iscoroutine(handle) else ""))
        if not interval > 0:
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        if handle.trace_id is None:
            raise ValueError("the run has not created its root trace yet; `await launch(...)` returns once it has")
        self.handle = handle
        self.interval = float(interval)
        self.options = options
        self.root_id: str = handle.trace_id
        self.key = f"live-{self.root_id}"
        """Names the view in the page across redraws."""
        self.errors: list[str] = []
        """Store errors met while refreshing (a refresh never breaks the run)."""
        self._seen: dict[tuple[str, str | None], float] = {}
        self._last = 0.0
        self._busy = False
        self._lock = threading.Lock()
        self._closed = False
        self._final: TreeView | None = None
        self._live = LiveDisplay()
        self._updated = datetime.now()
        self.view: TreeView = TreeView(handle.store, self.root_id, running=self._running(handle.snapshot), **options)
        """The latest view."""
        self.live = in_notebook() and not handle.done
        """True while the view refreshes itself (in a kernel, until the run ends)."""
        handle._views.add(self)  # RunHandle feeds its views: update / close / resend (launch.py)
        if handle.done:
            self._settle_now()

    # ---- what the run tells ---------------------------------------------------------------
    def _running(self, snapshot: ProgressSnapshot) -> dict[str, tuple[str | None, float]]:
        now = time.time()
        out: dict[str, tuple[str | None, float]] = {}
        for agent in snapshot.active:
            started = self._seen.setdefault((agent.trace_id, agent.tool), now)
            out[agent.trace_id] = (agent.tool, started)
        return out

    def update(self, snapshot: ProgressSnapshot) -> None:
        """Called by the handle on the background loop at each progress change: refresh at most every `interval`."""
        now = time.monotonic()
        if self._closed or self._busy or now - self._last < self.interval or not self.live:
            return
        self._busy, self._last = True, now
        try:
            asyncio.get_running_loop().create_task(self._refresh(snapshot))
        except RuntimeError:  # not on a loop (a direct call): refresh at the next update
            self._busy = False

    async def _refresh(self, snapshot: ProgressSnapshot) -> None:
        try:
            view = await atree_view(self.handle.store, self.root_id, running=self._running(snapshot), **self.options)
            if not self._closed:
                self.view, self._updated = view, datetime.now()
                self._live.update(self._live_bundle(view))
        except Exception as exc:  # noqa: BLE001 - a view never breaks the run
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self._last = time.monotonic()
            self._busy = False

    def close(self, snapshot: ProgressSnapshot) -> None:
        """Called by the handle when the run ended (on the background loop): show the final static view."""
        self._closed = True
        try:
            asyncio.get_running_loop().create_task(self._finish())
        except RuntimeError:
            self._settle_now()

    async def _finish(self) -> None:
        try:
            view = await atree_view(self.handle.store, self.root_id, **self.options)
        except Exception as exc:  # noqa: BLE001 - keep the last view; say why
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return
        with self._lock:
            if self._final is None:
                self._final = view
        self.settle()

    def _settle_now(self) -> None:
        """Build the final view here (a cell's thread) unless it is built, and show it."""
        if self._final is None and not in_background_thread():
            view = TreeView(self.handle.store, self.root_id, **self.options)
            with self._lock:
                if self._final is None:
                    self._final = view
        self._closed = True
        self.settle()

    def resend(self) -> None:
        """From the cell awaiting the run (`RunHandle.result` / `wait`): the final snapshot again, or the latest one."""
        if self.handle.done:
            self._settle_now()
        elif self.live:
            self._live.update(self._live_bundle(self.view))

    def settle(self) -> None:
        """Replace each output of this view by the final snapshot (the static `TreeView`, no status line)."""
        final = self._final
        if final is None:
            return
        self.view = final
        self._live.update(self._bundle(final))

    # ---- display --------------------------------------------------------------------------
    def _bundle(self, view: TreeView) -> dict[str, str]:
        return {"text/plain": view.to_text(), "text/html": view.to_html(key=self.key)}

    def _live_bundle(self, view: TreeView) -> dict[str, str]:
        """The tree so far with a status line saying it is live and when it was read."""
        line = (f"live · {len(view)} traces · {len(view.running)} running · updated {self._updated.strftime('%H:%M:%S')}"
                f" · refreshed every {self.interval:g} s until the run ends")
        status = f'<div class="ca-live-status" style="color:#555;font-size:12px">{html.escape(line)}</div>'
        return {"text/plain": f"{view.to_text()}\n{line}", "text/html": view.to_html(key=self.key) + status}

    def _ipython_display_(self) -> None:
        if self._closed or not self.live:
            if self._final is None:
                self._settle_now()
            self._live.show(self._bundle(self._final or self.view))
            return
        self._live.show(self._live_bundle(self.view))

    def __repr__(self) -> str:
        state = "final" if self._final is not None else "live"
        return f"LiveTreeView({self.root_id!r}, {state}, traces={len(self.view)}, running={len(self.view.running)})"

    def to_text(self) -> str:
        """The latest view's text."""
        return self.view.to_text()

    def to_html(self) -> str:
        """The latest view's HTML."""
        return self.view.to_html(key=self.key)


def live_tree(handle: RunHandle, *, interval: float = 1.0, **options: Any) -> LiveTreeView:
    """The tree view of a launch, live until the run ends, then its final static snapshot (`TreeView` options apply)."""
    return LiveTreeView(handle, interval=interval, **options)
