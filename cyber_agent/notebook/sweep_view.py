"""A notebook progress view of a sweep: cells done / running / failed and the spend so far, live.

    view = SweepProgressView()
    view                                     # shows the bar under the cell
    report = await run_sweep(grid, store, on_progress=view)

The view is an observer for `cyber_agent/experiments/engine.py:run_sweep`: every snapshot
updates an ipywidgets progress bar and a line of counts. A saved notebook reopened without the
widget state shows the last snapshot as HTML: once the sweep has nothing running or pending,
every output showing the view is replaced (by display id) with the static snapshot.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets

from cyber_agent.experiments.progress import SweepProgress

__all__ = ["SweepProgressView"]


class SweepProgressView:
    """An ipywidgets bar and count line that follow a sweep's progress snapshots."""

    def __init__(self, title: str | None = None) -> None:
        self.title = title
        self.latest: SweepProgress | None = None
        """The last snapshot seen."""
        self.bar = widgets.IntProgress(value=0, min=0, max=1, description=title or "sweep", bar_style="info")
        self.line = widgets.HTML(value="waiting for the sweep to start")
        self.widget = widgets.VBox([self.bar, self.line])
        self._displays: list[Any] = []  # IPython DisplayHandles of the outputs showing this view

    def __call__(self, snapshot: SweepProgress) -> None:
        """Show a snapshot (the engine calls this on every change)."""
        self.latest = snapshot
        self.bar.max = max(snapshot.total, 1)
        self.bar.value = snapshot.finished
        self.bar.description = self.title or snapshot.sweep
        finished = snapshot.running == 0 and snapshot.pending == 0
        self.bar.bar_style = "danger" if snapshot.failed else ("success" if finished else "info")
        self.line.value = self.to_html()
        if finished:  # a saved notebook keeps the static snapshot, never a widget it cannot restore
            for shown in self._displays:
                shown.update(self.static_bundle(), raw=True)

    @property
    def finished(self) -> bool:
        """True once the last snapshot had nothing running or pending."""
        s = self.latest
        return s is not None and s.running == 0 and s.pending == 0

    def static_bundle(self) -> dict[str, str]:
        """The last snapshot as text/plain and text/html only (no widget)."""
        return {"text/plain": self.to_text(), "text/html": self.to_html()}

    def _ipython_display_(self) -> None:
        from IPython.display import display

        bundle = self.static_bundle() if self.finished else self._repr_mimebundle_()
        self._displays.append(display(bundle, raw=True, display_id=True))

    def to_text(self) -> str:
        """The last snapshot as one line."""
        return self.latest.to_text() if self.latest is not None else "sweep not started"

    def to_html(self) -> str:
        """The last snapshot as a small table."""
        s = self.latest
        if s is None:
            return "<span>sweep not started</span>"
        cells = [("done", s.done), ("skipped", s.skipped), ("running", s.running), ("pending", s.pending),
                 ("failed", s.failed), ("errors", s.errors), ("spend", f"${s.cost:.4f}"), ("tokens", f"{s.tokens:,}"),
                 ("cells/s", f"{s.rate:.1f}"), ("elapsed", f"{s.elapsed:.1f}s")]
        row = "".join(f"<td><b>{html.escape(k)}</b> {html.escape(str(v))}</td>" for k, v in cells)
        caption = html.escape(f"{s.sweep}: {s.finished}/{s.total} cells")
        return f'<table class="cyber-agent"><caption style="text-align:left">{caption}</caption><tr>{row}</tr></table>'

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle: dict[str, Any] = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["text/plain"] = self.to_text()
        bundle["text/html"] = self.to_html()
        return bundle
