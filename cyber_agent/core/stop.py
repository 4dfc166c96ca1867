"""Cooperative stop: a per-process registry of active (and queued) traces and their children.

A stop is a flag checked before every model call, tool execution and child spawn; an
in-flight model request is not killed, but its tool calls are not executed and no further
turn starts. Every agent child (legacy sub-agent or recursive child) is registered under its
parent before it runs, so a stop reaches the whole subtree in both modes. The registry lives
in one process (see docs/decisions.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["StopRegistry"]


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
