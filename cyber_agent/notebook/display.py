"""Display conventions shared by every result object of the toolkit.

Each object renders itself as data: `to_text()` and `to_html()` are pure functions of its
state, `_repr_mimebundle_` returns both (no side effects, no `display()` inside), `__repr__`
is one short line, and `show()` prints text outside a notebook. HTML never contains random
element ids, so executed notebooks stay stable under nbval.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

from cyber_agent.notebook.bridge import in_notebook

__all__ = ["RichDisplay", "html_table"]


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


def html_table(rows: Iterable[Sequence[object]], header: Sequence[str] | None = None, *, caption: str | None = None) -> str:
    """Return a small escaped HTML table."""
    parts = ['<table class="cyber-agent">']
    if caption:
        parts.append(f'<caption style="text-align:left">{html.escape(caption)}</caption>')
    if header:
        parts.append("<tr>" + "".join(f"<th style=\"text-align:left\">{html.escape(str(h))}</th>" for h in header) + "</tr>")
    for row in rows:
        parts.append("<tr>" + "".join(f"<td style=\"text-align:left\">{html.escape(str(c))}</td>" for c in row) + "</tr>")
    parts.append("</table>")
    return "".join(parts)
