"""Cooperative stop: a per-process registry of active (and queued) traces and their children.

A stop is a flag checked before every model call, tool execution and child spawn; an
in-flight model request is not killed, but its tool calls are not executed and no further
turn starts. Every agent child (legacy sub-agent or recursive child) is registered under its
parent before it runs, so a stop reaches the whole subtree in both modes. The registry lives
in one process; `request_stop` below also persists the stop in the store, where every process
running a part of the tree sees it at its next checkpoint (`persisted_stop_reason`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cyber_agent.errors import TraceNotFoundError
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceReader, TraceStore

__all__ = ["StopRegistry", "ancestry", "persisted_stop_reason", "request_stop"]

_MAX_DEPTH = 64  # far beyond any tree the modes allow: a parent cycle in damaged records ends here


async def ancestry(store: TraceReader, trace: Trace) -> tuple[str, ...]:
    """The trace's id and its ancestors' ids, nearest first (stops of any of them reach it)."""
    ids = [trace.trace_id]
    parent = trace.parent_trace_id
    while parent is not None and len(ids) < _MAX_DEPTH and parent not in ids:
        ids.append(parent)
        record = await store.get_trace(parent)
        parent = record.parent_trace_id if record is not None else None
    return tuple(ids)


async def persisted_stop_reason(store: TraceReader, lineage: Sequence[str]) -> str | None:
    """Why a persisted stop covers the first id of `lineage` (itself, or an ancestor's subtree), or None."""
    if not lineage:
        return None
    requests = await store.get_stop_requests(lineage)
    if not requests:
        return None
    own = requests.get(lineage[0])
    if own is not None:
        return own.reason or "stop requested"
    for ancestor in lineage[1:]:
        request = requests.get(ancestor)
        if request is not None and request.subtree:
            return f"ancestor {ancestor} stopped: {request.reason or 'stop requested'}"
    return None


async def request_stop(store: TraceStore, trace_id: str, reason: str = "stop requested") -> None:
    """Persist a stop of `trace_id` and its subtree, for every process that runs a part of it."""
    if await store.get_trace(trace_id) is None:
        raise TraceNotFoundError(trace_id)
    await store.request_stop(trace_id, reason, subtree=True)


@dataclass
class _Entry:
    parent_id: str | None
    propagate: bool
    children: set[str] = field(default_factory=set)
    stop_reason: str | None = None
    queued: bool = False


class StopRegistry:
    """Stop flags of the traces running in this process."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def register(self, trace_id: str, *, parent_id: str | None = None, propagate: bool = False, queued: bool = False) -> None:
        """Record a running (or queued) trace; a child of a stopped parent starts stopped."""
        entry = self._entries.get(trace_id)
        if entry is None:
            entry = self._entries[trace_id] = _Entry(parent_id=parent_id, propagate=propagate, queued=queued)
        else:
            entry.queued = queued
        parent = self._entries.get(parent_id) if parent_id else None
        if parent is not None:
            parent.children.add(trace_id)
            if parent.stop_reason is not None and parent.propagate and entry.stop_reason is None:
                entry.stop_reason = f"parent {parent_id} stopped: {parent.stop_reason}"

    def mark_started(self, trace_id: str) -> None:
        """A queued trace begins running."""
        entry = self._entries.get(trace_id)
        if entry is not None:
            entry.queued = False

    def unregister(self, trace_id: str) -> None:
        """Forget a finished trace."""
        entry = self._entries.pop(trace_id, None)
        if entry is not None and entry.parent_id in self._entries:
            self._entries[entry.parent_id].children.discard(trace_id)

    def request_stop(self, trace_id: str, reason: str = "stop requested") -> list[str]:
        """Flag the trace (and, when it propagates, its registered descendants); return flagged ids."""
        flagged: list[str] = []
        stack = [trace_id]
        while stack:
            current = stack.pop()
            entry = self._entries.get(current)
            if entry is None:
                continue
            if entry.stop_reason is None:
                entry.stop_reason = reason if current == trace_id else f"ancestor {trace_id} stopped: {reason}"
            flagged.append(current)
            if entry.propagate:
                stack.extend(sorted(entry.children))
        return flagged

    def is_stopped(self, trace_id: str) -> bool:
        """True when a stop was requested for this trace."""
        entry = self._entries.get(trace_id)
        return entry is not None and entry.stop_reason is not None

    def stop_reason(self, trace_id: str) -> str | None:
        """Why the trace was asked to stop, or None."""
        entry = self._entries.get(trace_id)
        return entry.stop_reason if entry is not None else None

    def active(self) -> list[str]:
        """Ids of registered traces that are running (not queued)."""
        return sorted(t for t, e in self._entries.items() if not e.queued)

    def queued(self) -> list[str]:
        """Ids of registered traces waiting to start."""
        return sorted(t for t, e in self._entries.items() if e.queued)

    def __contains__(self, trace_id: object) -> bool:
        return trace_id in self._entries
