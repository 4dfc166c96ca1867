"""Every public write of the PostgreSQL store, re-run from the start after a dropped connection.

The base logic (`store_base.py`) runs a write as one transaction whose body cannot be resumed, so
the retry wraps the whole public call: a statement that failed on a dead connection (or a
rollback-class error) raises `_ConnectionLost` once the transaction is gone, and `_retrying`
waits (0.1 s doubling to 2 s) and runs the call again, until `retry_seconds` have passed
(`_backoff` then raises `StoreUnavailableError`). The deadline is one for the whole call
(`write_deadline`): waiting for a pooled connection and asking whether a commit landed count
against it too. Nothing is applied twice: a commit whose
answer was lost is resolved before `_ConnectionLost` is raised (`postgres_store.py:_end`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

from cyber_agent.errors import StoreError
from cyber_agent.trace.budget_limits import ResourceUsage
from cyber_agent.trace.side_records import ToolApprovals
from cyber_agent.trace.events import EventType
from cyber_agent.trace.goal_models import Goal, GoalTree
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocols import UsageChange
from cyber_agent.trace.records import TraceRecord
from cyber_agent.trace.sql_store import SQLTraceStore

__all__ = ["RetriedWrites", "write_deadline"]

T = TypeVar("T")

write_deadline: ContextVar[float | None] = ContextVar("cyber_agent_pg_write_deadline", default=None)
"""`time.monotonic()` by which the write (or read) running in this context must succeed or give up."""


class _ConnectionLost(StoreError):
    """A statement or commit failed because the connection dropped; the write did not happen."""


class RetriedWrites(SQLTraceStore):
    """SQLTraceStore whose public writes are re-run after `_ConnectionLost` (the subclass supplies `_backoff`)."""

    retry_seconds: float

    def _backoff(self, delay: float, exc: Exception) -> float:
        """The next wait before a retry, or raise once `write_deadline` has passed."""
        raise NotImplementedError  # pragma: no cover - PostgresTraceStore supplies it

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run one write; re-run it from the start while the connection drops, up to `retry_seconds` in all."""
        token = write_deadline.set(time.monotonic() + self.retry_seconds)
        try:
            delay = 0.05
            while True:
                try:
                    return await call()
                except _ConnectionLost as exc:
                    delay = self._backoff(delay, exc)
                    await asyncio.sleep(delay)
        finally:
            write_deadline.reset(token)

    async def create_trace(self, trace: Trace, *, goal_tree: GoalTree | None = None) -> str:
        """Persist a new trace and its goal tree (empty when None) in one write; return its id."""
        return await self._retrying(lambda: SQLTraceStore.create_trace(self, trace, goal_tree=goal_tree))

    async def end_trace(self, trace_id: str, updates: Mapping[str, Any], *,
                        goal: tuple[str, Mapping[str, Any]] | None = None) -> Trace:
        """End a run's trace in one write (goal change, trace fields, `trace_completed`); see `BaseTraceStore.end_trace`."""
        return await self._retrying(lambda: SQLTraceStore.end_trace(self, trace_id, updates, goal=goal))

    async def update_trace(self, trace_id: str, **updates: Any) -> Trace:
        """Update trace fields; a status change appends `trace_status_changed`."""
        return await self._retrying(lambda: SQLTraceStore.update_trace(self, trace_id, **updates))

    async def add_message(self, message: Message) -> str:
        """Assign the next sequence, persist, update totals and goal stats, append `message_added`."""
        given = (message.sequence, message.message_id)

        def attempt() -> Awaitable[str]:
            message.sequence, message.message_id = given
            return SQLTraceStore.add_message(self, message)
        return await self._retrying(attempt)

    async def add_messages(self, messages: Sequence[Message]) -> list[str]:
        """`add_message` for each of `messages` (one trace), in order, in one transaction."""
        given = [(message.sequence, message.message_id) for message in messages]

        def attempt() -> Awaitable[list[str]]:
            for message, (sequence, message_id) in zip(messages, given):
                message.sequence, message.message_id = sequence, message_id
            return SQLTraceStore.add_messages(self, messages)
        return await self._retrying(attempt)

    async def update_message(self, message_id: str, **updates: Any) -> Message:
        """Update fields of a message other than its identity, tree position and counted numbers."""
        return await self._retrying(lambda: SQLTraceStore.update_message(self, message_id, **updates))

    async def append_event(self, trace_id: str, event_type: EventType, payload: dict[str, Any]) -> int:
        """Append an event whose payload fits its model; return its id."""
        return await self._retrying(lambda: SQLTraceStore.append_event(self, trace_id, event_type, payload))

    async def add_goal(self, trace_id: str, goal: Goal) -> None:
        """Insert a goal (its stats start at zero) and append `goal_added`."""
        await self._retrying(lambda: SQLTraceStore.add_goal(self, trace_id, goal))

    async def update_goal(self, trace_id: str, goal_id: str, **updates: Any) -> list[Goal]:
        """Update a goal (status changes follow the tree's cascade rule); append `goal_updated`."""
        return await self._retrying(lambda: SQLTraceStore.update_goal(self, trace_id, goal_id, **updates))

    async def update_goal_tree(self, trace_id: str, tree: GoalTree) -> None:
        """Replace the goal tree; stats stay the store's."""
        await self._retrying(lambda: SQLTraceStore.update_goal_tree(self, trace_id, tree))

    async def replace_resource_usage(self, root_trace_id: str, usage: ResourceUsage | Mapping[str, Any]) -> None:
        """Atomically replace the root's usage record."""
        await self._retrying(lambda: SQLTraceStore.replace_resource_usage(self, root_trace_id, usage))

    async def update_resource_usage(self, root_trace_id: str, change: UsageChange) -> ResourceUsage | None:
        """Read, change and write the root's usage record under its row lock (`change` may run again after a retry)."""
        return await self._retrying(lambda: SQLTraceStore.update_resource_usage(self, root_trace_id, change))

    async def replace_tool_approvals(self, trace_id: str, state: ToolApprovals | Mapping[str, Any]) -> None:
        """Atomically replace the trace's approval state."""
        await self._retrying(lambda: SQLTraceStore.replace_tool_approvals(self, trace_id, state))

    async def request_stop(self, trace_id: str, reason: str, *, subtree: bool = True) -> None:
        """Persist a stop request (seen by every worker of the tree) and NOTIFY `cyber_agent_stops`."""
        await self._retrying(lambda: SQLTraceStore.request_stop(self, trace_id, reason, subtree=subtree))

    async def clear_stop(self, trace_id: str) -> None:
        """Withdraw the trace's own stop request."""
        await self._retrying(lambda: SQLTraceStore.clear_stop(self, trace_id))

    async def append_exchange(self, trace_id: str, record: Mapping[str, Any]) -> int:
        """Append one recorded model exchange of the trace."""
        return await self._retrying(lambda: SQLTraceStore.append_exchange(self, trace_id, record))

    async def flush(self) -> None:
        """Nothing waits for a checkpoint here (every write commits its totals); kept for the protocol."""
        await self._retrying(lambda: SQLTraceStore.flush(self))

    async def import_records(self, records: Sequence[TraceRecord], *, skip_existing: bool = False) -> list[str]:
        """Write whole traces from another store or an export, one transaction (and retry) per trace."""
        written: list[str] = []
        for record in records:
            written += await self._retrying(
                lambda: SQLTraceStore.import_records(self, [record], skip_existing=skip_existing))
        return written

