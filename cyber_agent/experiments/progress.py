"""Sweep progress: a snapshot after every change, and a tqdm-style text bar for scripts and the CLI.

The engine calls its `on_progress` observer with a `SweepProgress` whenever a cell starts or
ends. Observers never fail or delay a sweep: an observer that raises is dropped for the rest
of the sweep with one warning. The notebook view is
`cyber_agent/notebook/sweep_view.py:SweepProgressView`.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

__all__ = ["ProgressObserver", "SweepProgress", "TextProgressBar", "safe_observer"]


@dataclass(frozen=True, kw_only=True)
class SweepProgress:
    """Counts of a sweep's cells at one moment, and what they spent."""

    sweep: str
    total: int
    """Cells in the grid."""
    skipped: int
    """Cells already finished by an earlier run (not run again)."""
    done: int
    """Cells scored in this run."""
    running: int
    """Cells running now."""
    failed: int
    """Cells that errored more often than the retries allow."""
    errors: int
    """Attempts that raised in this run (each one retried while retries are left)."""
    cost: float
    """USD spent by the cells scored in this run."""
    tokens: int
    """Tokens used by them."""
    elapsed: float
    """Seconds since the run started."""

    @property
    def finished(self) -> int:
        """Cells that need nothing more: skipped, done or failed."""
        return self.skipped + self.done + self.failed

    @property
    def pending(self) -> int:
        """Cells not started yet."""
        return self.total - self.finished - self.running

    @property
    def rate(self) -> float:
        """Cells finished by this run per second."""
        return (self.done + self.failed) / self.elapsed if self.elapsed > 0 else 0.0

    def to_text(self, width: int = 24) -> str:
        """One line: a bar, the counts, the spend and the rate."""
        filled = int(width * self.finished / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        parts = [f"{self.sweep} [{bar}] {self.finished}/{self.total}", f"{self.running} running"]
        if self.skipped:
            parts.append(f"{self.skipped} skipped")
        if self.failed or self.errors:
            parts.append(f"{self.failed} failed ({self.errors} errors)")
        parts += [f"${self.cost:.4f}", f"{self.tokens:,} tokens", f"{self.rate:.1f} cells/s", f"{self.elapsed:.1f}s"]
        return " · ".join(parts)


ProgressObserver = Callable[[SweepProgress], None]
"""Called with each new snapshot; must return quickly."""


def safe_observer(observer: ProgressObserver | None) -> ProgressObserver:
    """Wrap an observer so an exception drops it (with one warning) instead of failing the sweep."""
    broken = False

    def call(snapshot: SweepProgress) -> None:
        nonlocal broken
        if observer is None or broken:
            return
        try:
            observer(snapshot)
        except Exception as exc:  # noqa: BLE001 - observers never fail a sweep
            broken = True
            warnings.warn(f"sweep progress observer {observer!r} raised {type(exc).__name__}: {exc}; it is no longer called",
                          RuntimeWarning, stacklevel=2)

    return call


class TextProgressBar:
    """A tqdm-style bar: rewrites one line on a terminal, prints a line per `every` seconds elsewhere."""

    def __init__(self, stream: TextIO | None = None, *, every: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self._clock = clock
        self._last = -float("inf")
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def __call__(self, snapshot: SweepProgress) -> None:
        """Show a snapshot (at most one line per `every` seconds off a terminal; always the last one)."""
        final = snapshot.running == 0 and snapshot.pending == 0
        now = self._clock()
        if self._tty:
            self.stream.write("\r" + snapshot.to_text() + ("\n" if final else ""))
        elif final or now - self._last >= self.every:
            self.stream.write(snapshot.to_text() + "\n")
            self._last = now
        self.stream.flush()
