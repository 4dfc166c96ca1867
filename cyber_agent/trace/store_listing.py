"""What a listing of the store skipped: damaged or foreign entries, reported beside the healthy traces.

`BaseTraceStore.list_traces_report` returns a `TraceListing`; `list_traces` and `read_records`
return the healthy traces only and issue one `DamagedEntryWarning` per call naming what they
skipped. One damaged entry never hides the others: see docs/trace.md, "Damaged entries".
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from cyber_agent.errors import CorruptRecordError
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceReader
from cyber_agent.trace.trace_filter import TraceFilter

__all__ = ["DamageKind", "DamagedEntry", "DamagedEntryWarning", "TraceListing", "damaged_record", "list_traces_report",
           "warn_damaged"]

DamageKind = Literal["corrupt", "symlink", "not_a_directory", "unreadable", "foreign"]
"""corrupt: meta.json cannot be parsed or names another trace; symlink: the entry is a link (never
followed); not_a_directory: a file where a trace directory should be; unreadable: the OS refused to
read it; foreign: a visible entry whose name is not a trace id."""


class DamagedEntry(BaseModel):
    """One entry of the store's directory that a listing skipped."""

    name: str
    """The entry's name under the store's base path (a trace id unless `kind` is foreign)."""
    path: str
    """The file or directory that could not be used."""
    kind: DamageKind
    """Why it was skipped."""
    detail: str
    """What went wrong and what to do."""


class DamagedEntryWarning(UserWarning):
    """A listing skipped damaged entries; `entries` names each one."""

    def __init__(self, entries: list[DamagedEntry]) -> None:
        self.entries = entries
        shown = "; ".join(f"{e.path} ({e.kind})" for e in entries[:5])
        more = f" and {len(entries) - 5} more" if len(entries) > 5 else ""
        super().__init__(f"skipped {len(entries)} damaged store entr{'y' if len(entries) == 1 else 'ies'}: "
                         f"{shown}{more}; see list_traces_report() for details")


def damaged_record(trace_id: str, where: str, exc: Exception) -> DamagedEntry:
    """The report of a trace a reader skipped because one of its records is damaged (issue 29)."""
    if isinstance(exc, CorruptRecordError):
        return DamagedEntry(name=trace_id, path=exc.location, kind="corrupt", detail=str(exc))
    return DamagedEntry(name=trace_id, path=where, kind="corrupt",
                        detail=f"corrupt record {where}: {type(exc).__name__}: {str(exc)[:300]}")


def warn_damaged(entries: Sequence[DamagedEntry], *, stacklevel: int = 3) -> None:
    """The one way every reader reports what it skipped: one `DamagedEntryWarning` naming each damaged
    entry (the healthy traces still load). Foreign files beside the traces (a recording, notes) are
    only reported (`list_traces_report`), never warned about."""
    damaged = [e for e in entries if e.kind != "foreign"]
    if damaged:
        warnings.warn(DamagedEntryWarning(damaged), stacklevel=stacklevel)


@dataclass(frozen=True, kw_only=True)
class TraceListing:
    """Healthy traces matching a listing's filters, and every entry the listing skipped."""

    traces: list[Trace]
    """Newest first, filters and limit applied."""
    errors: list[DamagedEntry] = field(default_factory=list)
    """Damaged or foreign entries, by name; independent of the filters."""


async def list_traces_report(store: TraceReader, where: TraceFilter | None = None, /, **filters: Any) -> TraceListing:
    """`store.list_traces_report(...)` where the store has one, else its `list_traces` with no errors.

    Stores built on `BaseTraceStore` report damaged entries; any other `TraceReader` (a read-only
    view of loaded records) has no directory to be damaged.
    """
    where = TraceFilter.of(where, filters)
    report = getattr(store, "list_traces_report", None)
    if report is not None:
        listing: TraceListing = await report(where)
        return listing
    return TraceListing(traces=await store.list_traces(where))
