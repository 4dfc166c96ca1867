"""`load_runs(path, store=...)`: open another tool's runs in a notebook (formats detected).

    runs = load_runs("logs/")                     # Inspect logs, OTLP/JSON files, ReDel run folders
    draw_trace_tree(runs.store, runs.roots[0])    # every helper works on the imported trees
    to_frames(runs.store).traces[["source", "provenance", "source_id"]]

It is `cyber_agent/importers/_run.py:import_runs` with a progress bar (live HTML in a
notebook, none elsewhere) and a default store in memory. See docs/importers.md.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path

from cyber_agent.importers import ImportProgress, ImportSummary, import_runs
from cyber_agent.notebook.bridge import in_notebook, run_sync
from cyber_agent.notebook.display import LiveDisplay, html_bar
from cyber_agent.trace.memory_store import InMemoryTraceStore
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.store_url import open_store

__all__ = ["aload_runs", "load_runs"]

PathArg = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


class _Bar:
    """A progress bar (display-id HTML) shown on the first update; nothing outside a notebook.

    Every update replaces the bar's output (at most every 0.1 s), and when the import ends (or
    fails) the output becomes one static line: a saved notebook keeps HTML, never a widget.
    """

    def __init__(self) -> None:
        self._live: LiveDisplay | None = None
        self._last: ImportProgress | None = None

    def __call__(self, update: ImportProgress) -> None:
        if not in_notebook():
            return
        self._last = update
        bundle = {"text/plain": f"import {update.done}/{update.total}",
                  "text/html": html_bar(update.done, update.total, label="import")}
        if self._live is None:
            self._live = LiveDisplay(every=0.1)
            self._live.show(bundle)
        else:
            self._live.update(bundle)

    def finish(self, outcome: str) -> None:
        """Replace the bar by a line saying how the import ended."""
        if self._live is None or self._last is None:
            return
        line = f"import {outcome}: {self._last.done}/{self._last.total} files read"
        self._live.update({"text/plain": line, "text/html": f"<code>{html.escape(line)}</code>"}, force=True)


def _paths(path: PathArg) -> list[Path]:
    if isinstance(path, (str, os.PathLike)):
        return [Path(path)]
    return [Path(p) for p in path]


async def aload_runs(path: PathArg, store: TraceStore | str | None = None, *, source: str | None = None,
                     progress: bool = True) -> ImportSummary:
    """Import files or folders into `store` (a store, a store URL, or None: a new memory store)."""
    target = InMemoryTraceStore() if store is None else open_store(store) if isinstance(store, str) else store
    bar = _Bar() if progress else None
    outcome = "failed"
    try:
        summary = await import_runs(_paths(path), target, source=source, progress=bar)
        outcome = "done"
        return summary
    finally:
        if bar is not None:
            bar.finish(outcome)


def load_runs(path: PathArg, store: TraceStore | str | None = None, *, source: str | None = None,
              progress: bool = True) -> ImportSummary:
    """Import files or folders and return the summary (`.store`, `.roots`); sync twin of `aload_runs`."""
    return run_sync(aload_runs(path, store, source=source, progress=progress))
