"""`cyber-agent import --from inspect|otel|redel PATH... [--store URL]`: the importers on the command line.

Prints a progress bar on a terminal (stderr), then the summary: what was imported, what was
skipped and why. Exits 0 when something was imported or everything was already there; 2 when a
file named on the command line is not its format (the error names it), or nothing was found.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from cyber_agent.errors import CyberAgentError
from cyber_agent.importers._run import ImportProgress, import_runs
from cyber_agent.trace.protocols import TraceStore

__all__ = ["import_command", "text_progress"]

_WIDTH = 30


def text_progress(update: ImportProgress) -> None:
    """A one-line bar on stderr when it is a terminal (nothing otherwise)."""
    if not sys.stderr.isatty():
        return
    filled = _WIDTH * update.done // max(update.total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (_WIDTH - filled)}] {update.done}/{update.total} {update.path.name[:40]:<40}")
    if update.done == update.total:
        sys.stderr.write("\n")
    sys.stderr.flush()


async def import_command(store: TraceStore, paths: Sequence[str], source: str) -> int:
    """Import `paths` as `source` into `store`, print the summary; return the exit code."""
    try:
        summary = await import_runs(list(paths), store, source=source, progress=text_progress)
    except (CyberAgentError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary.to_text())
    print(f"store: {store!r}")
    for root in summary.roots[:5]:
        print(f"  cyber-agent show {root}")
    already = any(s.reason.startswith("already imported") for s in summary.skipped)
    return 0 if summary.imported or already else 2
