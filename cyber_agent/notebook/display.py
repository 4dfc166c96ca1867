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
"""

from __future__ import annotations

import html
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from cyber_agent.notebook.bridge import in_notebook

__all__ = ["RichDisplay", "enable_figure_display", "html_table"]

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


class UpdatingDisplay(RichDisplay):
    """Mixin: every output showing the object moves with it (by display id), so a saved notebook keeps its last state.

    A subclass calls `_changed()` after its state moves (`next()`, `find()`, ...).
    """

    _displays: list[Any]
    """IPython DisplayHandles of the outputs showing this object (set by the subclass's `__init__`)."""

    def _changed(self) -> None:
        """Show the new state in every output displaying this object."""
        if self._displays:
            bundle = self._repr_mimebundle_()
            for shown in self._displays:
                shown.update(bundle, raw=True)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        # A display id, so code that moves the object later moves the output above too.
        self._displays.append(display(self._repr_mimebundle_(), raw=True, display_id=True))


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
