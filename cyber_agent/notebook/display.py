"""Display conventions shared by every result object of the toolkit.

Each object renders itself as data: `to_text()` and `to_html()` are pure functions of its
state, `_repr_mimebundle_` returns both (no side effects, no `display()` inside), `__repr__`
is one short line, and `show()` prints text outside a notebook. HTML never contains random
element ids, so executed notebooks stay stable under nbval.

Charts are plain `matplotlib.figure.Figure`s built without pyplot, so no backend shows them a
second time at the end of a cell. IPython only renders a Figure as an image once a matplotlib
backend registered a formatter (`%matplotlib inline`, or importing pyplot, one cell later);
`enable_figure_display` registers a PNG one when none is there, so a figure returned by a cell
shows in a fresh kernel with no magic. A backend's own formatter always wins.

Live outputs (progress, the live tree, a sweep's or an import's bar, the stepper, the explorer)
are display-id HTML (`LiveDisplay`): each update replaces the output's mime bundle, so what a
notebook saves, at any moment, is the latest snapshot as HTML — never a widget that reopens as
"model not found". JupyterLab routes an update to every output showing that display id for as
long as the cell that displayed it is not run again, busy kernel or idle (docs/notebook.md,
"Live views and saving").
"""

from __future__ import annotations

import asyncio
import html
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from cyber_agent.notebook.bridge import in_notebook

__all__ = ["LiveDisplay", "RichDisplay", "UpdatingDisplay", "enable_figure_display", "html_bar", "html_table"]

_CELL = "text-align:left;padding:2px 10px"

# The mime types a matplotlib backend registers a Figure formatter for (IPython's select_figure_formats).
_FIGURE_MIME_TYPES = ("image/png", "image/svg+xml", "image/jpeg", "application/pdf")


class RichDisplay:
    """Mixin: text/plain and text/html renderings from `to_text` / `to_html`."""

    def to_text(self) -> str:
        """Return a plain-text rendering."""
        return repr(self)

    def to_html(self) -> str:
        """Return an HTML rendering (escaped, no random ids)."""
        return f"<pre>{html.escape(self.to_text())}</pre>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.to_text(), "text/html": self.to_html()}

    def show(self) -> None:
        """Display rich output in a notebook, print text elsewhere."""
        if in_notebook():
            from IPython.display import display

            display(self)
        else:
            print(self.to_text())


class LiveDisplay:
    """Outputs sharing one display id: `show` adds one, `update` replaces every one of them (HTML, no widget).

    `update` may be called from any thread (the toolkit's background loop feeds live views):
    one `update_display_data` message moves every output showing the id, whatever cell runs
    now, and the output keeps that bundle, so a notebook saved at any moment holds the latest
    snapshot. With `every` seconds, updates closer than that are held back and the latest one is
    sent when the interval is over (on the caller's event loop, when it has one) or with the
    next update; `force=True` (a final snapshot) sends at once.
    """

    def __init__(self, *, every: float = 0.0) -> None:
        from uuid import uuid4

        self.display_id = f"cyber-agent-{uuid4().hex}"
        """The display id of every output this object shows."""
        self.every = every
        """Least seconds between two updates sent."""
        self.shown = 0
        """Outputs shown so far."""
        self.sent = 0
        """Updates sent so far."""
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._held: dict[str, Any] | None = None
        self._flush_due = False

    def show(self, bundle: dict[str, Any]) -> None:
        """Display `bundle` (a raw mime bundle) as one more output with this display id."""
        from IPython.display import display

        with self._lock:
            display(bundle, raw=True, display_id=self.display_id)
            self.shown += 1

    def update(self, bundle: dict[str, Any], *, force: bool = False) -> None:
        """Replace the bundle of every output showing this display id (nothing before the first `show`)."""
        if not self.shown:
            return
        now = time.monotonic()
        with self._lock:
            wait = self._last + self.every - now
            if wait > 0 and not force:
                self._held = bundle
                self._schedule_flush(wait)
                return
            self._send(bundle, now)

    def _send(self, bundle: dict[str, Any], now: float) -> None:
        from IPython.display import update_display

        self._held, self._last = None, now
        update_display(bundle, raw=True, display_id=self.display_id)
        self.sent += 1

    def _schedule_flush(self, wait: float) -> None:
        if self._flush_due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop here: the next update sends the held one
            return
        self._flush_due = True
        loop.call_later(wait, self._flush)

    def _flush(self) -> None:
        with self._lock:
            self._flush_due = False
            if self._held is not None:
                self._send(self._held, time.monotonic())


class UpdatingDisplay(RichDisplay):
    """Mixin: every output showing the object moves with it (by display id), so a saved notebook keeps its last state.

    A subclass calls `_changed()` after its state moves (`next()`, `find()`, ...).
    """

    _live: LiveDisplay | None = None

    def _changed(self) -> None:
        """Show the new state in every output displaying this object."""
        if self._live is not None:
            self._live.update(self._repr_mimebundle_())

    def _ipython_display_(self) -> None:
        # A display id, so code that moves the object later moves the output above too.
        if self._live is None:
            self._live = LiveDisplay()
        self._live.show(self._repr_mimebundle_())


def html_table(rows: Iterable[Sequence[object]], header: Sequence[str] | None = None, *, caption: str | None = None) -> str:
    """Return a small escaped HTML table (cells padded, so columns never run together)."""
    parts = ['<table class="cyber-agent">']
    if caption:
        parts.append(f'<caption style="text-align:left">{html.escape(caption)}</caption>')
    if header:
        parts.append("<tr>" + "".join(f"<th style=\"{_CELL}\">{html.escape(str(h))}</th>" for h in header) + "</tr>")
    for row in rows:
        parts.append("<tr>" + "".join(f"<td style=\"{_CELL}\">{html.escape(str(c))}</td>" for c in row) + "</tr>")
    parts.append("</table>")
    return "".join(parts)


_BAR_COLOURS = {"info": "#1565c0", "success": "#2e7d32", "danger": "#c62828"}


def html_bar(done: int, total: int, *, label: str, style: str = "info") -> str:
    """A progress bar as plain HTML (a filled box and its label): readable wherever HTML shows."""
    share = min(1.0, done / total) if total > 0 else 0.0
    colour = _BAR_COLOURS.get(style, _BAR_COLOURS["info"])
    return (f'<div class="ca-bar" style="display:flex;align-items:center;gap:8px;font-size:12px">'
            f'<span>{html.escape(label)}</span>'
            f'<span style="display:inline-block;width:240px;height:10px;border:1px solid #bbb;border-radius:3px;overflow:hidden">'
            f'<span style="display:block;height:100%;width:{share * 100:.1f}%;background:{colour}"></span></span>'
            f'<span>{done}/{total}</span></div>')


def enable_figure_display(shell: Any = None) -> bool:
    """Let IPython render a matplotlib Figure as PNG when no backend did; return True if a formatter was added.

    A no-op outside IPython, and when a backend already registered a Figure formatter for any
    image type (the inline backend's figure formats and the `widget` backend are left as they are).
    """
    if shell is None:
        if "IPython" not in sys.modules:  # a plain script: never import IPython just to ask
            return False
        from IPython import get_ipython

        shell = get_ipython()
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters or "image/png" not in formatters:
        return False
    from matplotlib.figure import Figure

    for mime in _FIGURE_MIME_TYPES:
        formatter = formatters.get(mime)
        if formatter is None:
            continue
        try:
            formatter.lookup_by_type(Figure)
        except KeyError:
            continue
        return False
    formatters["image/png"].for_type(Figure, _figure_png)
    return True


def _figure_png(figure: Any) -> str | None:
    # What the inline backend does for "png": a tight bounding box, base64 text (None for an empty figure).
    from IPython.core.pylabtools import print_figure

    result: str | None = print_figure(figure, fmt="png", bbox_inches="tight", base64=True)
    return result
