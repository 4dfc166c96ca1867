"""Where progress snapshots go: a live widget in a kernel, text lines in a script, or nowhere.

A `RunHandle` feeds every view it has: the one `launch` displayed in the launching cell, and
each one `RunHandle.progress()` made since (a view shows where it is displayed, so calling it
again in a later cell brings the progress back into sight). A `WidgetView` is an ipywidgets
`HTML` updated in place from the toolkit's background loop (comm messages reach a widget
whatever cell is running, unlike display updates); its mime bundle also carries the snapshot as
text/plain and text/html, so frontends without widgets show the table.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol, TextIO

from cyber_agent.notebook.display import RichDisplay
from cyber_agent.notebook.progress import ProgressSnapshot

__all__ = ["ProgressView", "TextView", "ViewGroup", "WidgetView", "make_view"]


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


class WidgetView(RichDisplay):
    """An ipywidgets HTML showing the latest snapshot, updated in place at most 10 times a second."""

    def __init__(self, snapshot: ProgressSnapshot) -> None:
        import ipywidgets

        self._snapshot = snapshot
        self.widget = ipywidgets.HTML(value=snapshot.to_html())
        """The widget (its value is the snapshot's HTML)."""
        self._last = 0.0
        self._closed = False
        self._displays: list[Any] = []  # IPython DisplayHandles of the outputs showing this view

    def update(self, snapshot: ProgressSnapshot) -> None:
        """Show `snapshot` unless the widget changed less than 0.1 s ago (the next refresh shows it)."""
        self._snapshot = snapshot
        now = time.monotonic()
        if now - self._last >= 0.1:
            self._last = now
            self.widget.value = snapshot.to_html()

    def close(self, snapshot: ProgressSnapshot) -> None:
        """Show the final snapshot, and replace each output showing the widget by that snapshot as static HTML.

        The replacement (`update_display_data` by display id, which JupyterLab and nbclient route
        to the output whatever cell runs now) is what a saved notebook keeps: it reopens readable
        without a kernel and without widget state, never as "model not found".
        """
        self._snapshot = snapshot
        self.widget.value = snapshot.to_html()
        self._closed = True
        self.settle()

    def settle(self) -> None:
        """Replace every output showing this view by the static snapshot (again: from a cell, nbclient records it)."""
        for shown in self._displays:
            shown.update(self.static_bundle(), raw=True)

    def static_bundle(self) -> dict[str, str]:
        """The latest snapshot as text/plain and text/html only (no widget)."""
        return {"text/plain": self.to_text(), "text/html": self.to_html()}

    def _ipython_display_(self) -> None:
        from IPython.display import display

        # A display id, so `close` can replace this output by the final snapshot; a closed view shows it at once.
        bundle = self.static_bundle() if self._closed else self._repr_mimebundle_()
        self._displays.append(display(bundle, raw=True, display_id=True))

    def resend(self) -> None:
        """Send the widget's state again from the calling thread (see `ViewGroup.resend`)."""
        self.widget.send_state("value")

    def __repr__(self) -> str:
        return f"WidgetView({self._snapshot!r})"

    def to_text(self) -> str:
        """The latest snapshot as one line."""
        return self._snapshot.to_text()

    def to_html(self) -> str:
        """The latest snapshot's tables."""
        return self._snapshot.to_html()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle: dict[str, Any] = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle.update({"text/plain": self.to_text(), "text/html": self.to_html()})
        return bundle


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
        """Send each widget's state again, from the caller's thread.

        The background loop updates widgets between cells, with no cell as the messages' parent:
        the frontend shows them, but a notebook runner (nbclient) records the widget state only
        from messages of the cell it is executing. `RunHandle.result` and `RunHandle.wait` call
        this, so an executed notebook saves the final progress, not the first one.
        """
        for view in list(self.views):
            resend = getattr(view, "resend", None)
            if isinstance(view, WidgetView) and view._closed:
                resend = view.settle
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


def widget_view(snapshot: ProgressSnapshot) -> WidgetView | None:
    """A widget view in a kernel with ipywidgets, else None."""
    from cyber_agent.notebook.bridge import in_notebook

    if not in_notebook():
        return None
    try:
        return WidgetView(snapshot)
    except ImportError:
        return None


def make_view(progress: bool | None, snapshot: ProgressSnapshot, *, stream: TextIO | None = None) -> ProgressView:
    """A widget displayed in the caller's cell in a kernel, text lines elsewhere, nothing when `progress` is False."""
    if progress is False:
        return _NullView()
    view = widget_view(snapshot)
    if view is None:
        return TextView(stream or sys.stdout)
    from IPython.display import display

    display(view)
    return view
