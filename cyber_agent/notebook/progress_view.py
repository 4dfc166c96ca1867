"""Where progress snapshots go: live HTML in a kernel, text lines in a script, or nowhere.

A `RunHandle` feeds every view it has: the one `launch` displayed in the launching cell, and
each one `RunHandle.progress()` made since (a view shows where it is displayed, so calling it
again in a later cell brings the progress back into sight). An `HtmlView` is display-id HTML
updated in place from the toolkit's background loop (`update_display_data`: JupyterLab moves the
output whatever cell runs, or none); there is no widget, so what a notebook saves, at any
moment, is the latest snapshot as HTML.
"""

from __future__ import annotations

import sys
import time
from typing import Protocol, TextIO

from cyber_agent.notebook.display import LiveDisplay, RichDisplay
from cyber_agent.notebook.progress import ProgressSnapshot

__all__ = ["HtmlView", "ProgressView", "TextView", "ViewGroup", "make_view"]


class ProgressView(Protocol):
    """Where snapshots go."""

    def update(self, snapshot: ProgressSnapshot) -> None:
        """Show the latest snapshot (may be throttled)."""

    def close(self, snapshot: ProgressSnapshot) -> None:
        """Show the final snapshot."""


class _NullView:
    def update(self, snapshot: ProgressSnapshot) -> None:
        pass

    def close(self, snapshot: ProgressSnapshot) -> None:
        pass


class TextView:
    """Print a line when the shape of the run changes, at most once a second, and a final line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._last_key: tuple[object, ...] | None = None
        self._last_time = 0.0

    def update(self, snapshot: ProgressSnapshot) -> None:
        """Print the snapshot if the run changed shape and a second passed."""
        key = (snapshot.status, snapshot.agents, snapshot.validators, snapshot.running, snapshot.current)
        now = time.monotonic()
        if key != self._last_key and now - self._last_time >= 1.0:
            self._last_key, self._last_time = key, now
            print(snapshot.to_text(), file=self._stream, flush=True)

    def close(self, snapshot: ProgressSnapshot) -> None:
        """Print the final line."""
        print(snapshot.to_text(), file=self._stream, flush=True)


class HtmlView(RichDisplay):
    """The latest snapshot as display-id HTML, updated in place at most 10 times a second (no widget).

    Every output showing the view holds the latest snapshot's text/plain and text/html, so a
    notebook saved at any moment, mid-run included, reopens readable without a kernel or
    widget state (`cyber_agent/notebook/display.py:LiveDisplay`).
    """

    def __init__(self, snapshot: ProgressSnapshot) -> None:
        self._snapshot = snapshot
        self._live = LiveDisplay(every=0.1)

    def update(self, snapshot: ProgressSnapshot) -> None:
        """Show `snapshot` (at most every 0.1 s; one held back is sent when the 0.1 s are over)."""
        self._snapshot = snapshot
        self._live.update(self.bundle())

    def close(self, snapshot: ProgressSnapshot) -> None:
        """Show the final snapshot (what a saved notebook keeps)."""
        self._snapshot = snapshot
        self._live.update(self.bundle(), force=True)

    def resend(self) -> None:
        """Send the latest snapshot again from the calling thread (see `ViewGroup.resend`)."""
        self._live.update(self.bundle(), force=True)

    def bundle(self) -> dict[str, str]:
        """The latest snapshot as text/plain and text/html."""
        return {"text/plain": self.to_text(), "text/html": self.to_html()}

    def _ipython_display_(self) -> None:
        self._live.show(self.bundle())

    def __repr__(self) -> str:
        return f"HtmlView({self._snapshot!r})"

    def to_text(self) -> str:
        """The latest snapshot as one line."""
        return self._snapshot.to_text()

    def to_html(self) -> str:
        """The latest snapshot's tables."""
        return self._snapshot.to_html()


class ViewGroup:
    """Feed several views; one that raises is dropped and its error kept (a view never breaks a run)."""

    def __init__(self, *views: ProgressView) -> None:
        self.views: list[ProgressView] = list(views)
        """The views fed, in the order they were added."""
        self.errors: list[str] = []
        """Errors of views that were dropped."""

    def add(self, view: ProgressView) -> None:
        """Feed `view` too from now on."""
        self.views.append(view)

    def update(self, snapshot: ProgressSnapshot) -> None:
        """Update every view."""
        self._each("update", snapshot)

    def close(self, snapshot: ProgressSnapshot) -> None:
        """Close every view."""
        self._each("close", snapshot)

    def resend(self) -> None:
        """Send each view's latest snapshot again, from the caller's thread.

        The background loop updates the views between cells too: JupyterLab shows those updates,
        but a notebook runner (nbclient) records only messages of the cell it is executing.
        `RunHandle.result` and `RunHandle.wait` call this, so an executed notebook saves the
        final progress, not the first one.
        """
        for view in list(self.views):
            resend = getattr(view, "resend", None)
            if resend is not None:
                try:
                    resend()
                except Exception as exc:  # noqa: BLE001 - a broken display must never break the caller
                    self.views.remove(view)
                    self.errors.append(f"progress view: {type(exc).__name__}: {exc}")

    def _each(self, method: str, snapshot: ProgressSnapshot) -> None:
        for view in list(self.views):
            try:
                getattr(view, method)(snapshot)
            except Exception as exc:  # noqa: BLE001 - a broken display must never break the run
                self.views.remove(view)
                self.errors.append(f"progress view: {type(exc).__name__}: {exc}")


def html_view(snapshot: ProgressSnapshot) -> HtmlView | None:
    """A live HTML view in a kernel, else None."""
    from cyber_agent.notebook.bridge import in_notebook

    return HtmlView(snapshot) if in_notebook() else None


def make_view(progress: bool | None, snapshot: ProgressSnapshot, *, stream: TextIO | None = None) -> ProgressView:
    """Live HTML displayed in the caller's cell in a kernel, text lines elsewhere, nothing when `progress` is False."""
    if progress is False:
        return _NullView()
    view = html_view(snapshot)
    if view is None:
        return TextView(stream or sys.stdout)
    from IPython.display import display

    display(view)
    return view
