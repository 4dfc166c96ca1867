"""A notebook progress view of a sweep: cells done / running / failed and the spend so far, live.

    view = SweepProgressView()
    view                                     # shows the bar under the cell
    report = await run_sweep(grid, store, on_progress=view)

The view is an observer for `cyber_agent/experiments/engine.py:run_sweep`: every snapshot
replaces, by display id, the output showing it (a bar drawn in HTML and a line of counts;
`cyber_agent/notebook/display.py:LiveDisplay`), at most 10 times a second and always for the
last one. There is no widget: a notebook saved at any moment, mid-sweep included, keeps the
latest snapshot as HTML.
"""

from __future__ import annotations

import html
from typing import Any

from cyber_agent.experiments.progress import SweepProgress
from cyber_agent.notebook.display import LiveDisplay, html_bar

__all__ = ["SweepProgressView"]

class SweepProgressView:
    """An HTML bar and count line that follow a sweep's progress snapshots."""

    def __init__(self, title: str | None = None) -> None:
        self.title = title
        self.latest: SweepProgress | None = None
        """The last snapshot seen."""
        self._live = LiveDisplay(every=0.1)

    def __call__(self, snapshot: SweepProgress) -> None:
        """Show a snapshot (the engine calls this on every change; sent at most every 0.1 s, the final one at once)."""
        self.latest = snapshot
        self._live.update(self.bundle(), force=self.finished)

    @property
    def finished(self) -> bool:
        """True once the last snapshot had nothing running or pending."""
        s = self.latest
        return s is not None and s.running == 0 and s.pending == 0

    def bundle(self) -> dict[str, str]:
        """The last snapshot as text/plain and text/html."""
        return {"text/plain": self.to_text(), "text/html": self.to_html()}

    def _ipython_display_(self) -> None:
        self._live.show(self.bundle())

    def to_text(self) -> str:
        """The last snapshot as one line."""
        return self.latest.to_text() if self.latest is not None else "sweep not started"

    def to_html(self) -> str:
        """The last snapshot: a bar and a small table."""
        s = self.latest
        if s is None:
            return "<span>sweep not started</span>"
        style = "danger" if s.failed else ("success" if self.finished else "info")
        bar = html_bar(s.finished, s.total, label=self.title or s.sweep, style=style)
        cells = [("done", s.done), ("skipped", s.skipped), ("running", s.running), ("pending", s.pending),
                 ("failed", s.failed), ("errors", s.errors), ("spend", f"${s.cost:.4f}"), ("tokens", f"{s.tokens:,}"),
                 ("cells/s", f"{s.rate:.1f}"), ("elapsed", f"{s.elapsed:.1f}s")]
        row = "".join(f"<td><b>{html.escape(k)}</b> {html.escape(str(v))}</td>" for k, v in cells)
        caption = html.escape(f"{s.sweep}: {s.finished}/{s.total} cells")
        return (f'<table class="cyber-agent"><caption style="text-align:left">{caption}</caption><tr>{row}</tr></table>'
                + bar)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return self.bundle()
