"""Store logic shared by every TraceStore: sequencing, totals, goal stats, events.

A concrete store implements the small set of `_primitive` methods (read and write one record)
and inherits the protocol. The logic runs under one asyncio lock per trace, so coroutines in
one process never lose an update. Each store instance assumes it is the only writer of the
traces it writes (one process per run); readers may be anywhere.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any

from cyber_agent.errors import (
    GoalError,
    InvalidUpdateError,
    MessageNotFoundError,
    StoreError,
    TraceNotFoundError,
)
from cyber_agent.trace.events import EVENT_TYPES, EventType, TraceEvent
from cyber_agent.trace.goal_models import Goal, GoalTree
from cyber_agent.trace.models import Message, Trace, TraceMode, TraceStatus, utc_now
from cyber_agent.trace.trace_id import parse_message_id, validate_trace_id

__all__ = ["BaseTraceStore"]

_FINAL = frozenset({"completed", "failed", "stopped"})
_TRACE_FIELDS = frozenset(Trace.model_fields) - {"trace_id"}
_MESSAGE_READONLY = frozenset({"message_id", "trace_id", "sequence"})
_GOAL_FIELDS = frozenset(Goal.model_fields) - {"id", "self_stats", "cumulative_stats"}


class BaseTraceStore(ABC):
    """TraceStore logic over abstract record primitives."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        # Write-side state of traces this instance writes: (trace, goal tree, last event id).
        self._hot: dict[str, tuple[Trace, GoalTree]] = {}
        self._event_ids: dict[str, int] = {}

    # ---- primitives -------------------------------------------------------------------
    @abstractmethod
    def _trace_exists(self, trace_id: str) -> bool: ...
    @abstractmethod
    def _create_record(self, trace: Trace, tree: GoalTree) -> None: ...
    @abstractmethod
    def _read_trace(self, trace_id: str) -> Trace | None: ...
    @abstractmethod
    def _write_trace(self, trace: Trace) -> None: ...
    @abstractmethod
    def _read_goals(self, trace_id: str) -> GoalTree | None: ...
    @abstractmethod
    def _write_goals(self, trace_id: str, tree: GoalTree) -> None: ...
    @abstractmethod
    def _read_message(self, trace_id: str, sequence: int) -> Message | None: ...
    @abstractmethod
    def _write_message(self, message: Message) -> None: ...
    @abstractmethod
    def _read_all_messages(self, trace_id: str) -> list[Message]: ...
    @abstractmethod
    def _append_event_record(self, event: TraceEvent) -> None: ...
    @abstractmethod
    def _read_events(self, trace_id: str) -> list[TraceEvent]: ...
    @abstractmethod
    def _read_side_record(self, trace_id: str, name: str) -> dict[str, Any] | None: ...
    @abstractmethod
    def _write_side_record(self, trace_id: str, name: str, data: dict[str, Any]) -> None: ...
    @abstractmethod
    def _all_traces(self) -> list[Trace]: ...

    def _recover(self, trace: Trace, tree: GoalTree) -> list[Message]:
        """Adopt messages persisted after the last totals write (crash recovery); default none."""
        return []

    # ---- helpers ------------------------------------------------------------------------
    def _lock(self, trace_id: str) -> asyncio.Lock:
        lock = self._locks.get(trace_id)
        if lock is None:
            lock = self._locks[trace_id] = asyncio.Lock()
        return lock

    def _load_for_write(self, trace_id: str) -> tuple[Trace, GoalTree]:
        hot = self._hot.get(trace_id)
        if hot is not None:
            return hot
        validate_trace_id(trace_id)
        trace = self._read_trace(trace_id)
        if trace is None:
            raise TraceNotFoundError(trace_id)
        tree = self._read_goals(trace_id) or GoalTree(mission=trace.task)
        self._hot[trace_id] = (trace, tree)
        for orphan in self._recover(trace, tree):
            affected = self._account(trace, tree, orphan)
            self._write_goals(trace_id, tree)
            self._write_trace(trace)
            self._emit(trace_id, "message_added", self._message_payload(orphan, affected, recovered=True))
        return trace, tree

    def _next_event_id(self, trace_id: str) -> int:
        last = self._event_ids.get(trace_id)
        if last is None:
            events = self._read_events(trace_id)
            last = events[-1].event_id if events else 0
        self._event_ids[trace_id] = last + 1
        return last + 1

    def _emit(self, trace_id: str, event_type: EventType, payload: dict[str, Any]) -> int:
        event = TraceEvent(event_id=self._next_event_id(trace_id), trace_id=trace_id, type=event_type, payload=payload)
        self._append_event_record(event)
        return event.event_id

    @staticmethod
    def _account(trace: Trace, tree: GoalTree, message: Message) -> list[Goal]:
        trace.total_messages = max(trace.total_messages, message.sequence)
        trace.total_prompt_tokens += message.prompt_tokens
        trace.total_completion_tokens += message.completion_tokens
        trace.total_cached_tokens += message.cached_tokens
        trace.total_tokens += message.total_tokens
        trace.total_cost += message.cost
        trace.updated_at = utc_now()
        if message.branch is None:
            # The newest main-branch message is the head, also when it starts a branch after a rewind.
            trace.head_sequence = message.sequence
        affected: list[Goal] = []
        if message.goal_id and tree.stats_sequence < message.sequence and tree.find(message.goal_id):
            affected = tree.record_message(message.goal_id, message.total_tokens, message.cost)
            tree.stats_sequence = message.sequence
        return affected

    @staticmethod
    def _message_payload(message: Message, affected: list[Goal], **extra: Any) -> dict[str, Any]:
        return {
            "message": message.model_dump(mode="json"),
            "affected_goals": [
                {"goal_id": g.id, "self_stats": g.self_stats.model_dump(), "cumulative_stats": g.cumulative_stats.model_dump()}
                for g in affected
            ],
            **extra,
        }

    # ---- traces -------------------------------------------------------------------------
    async def create_trace(self, trace: Trace) -> str:
        """Persist a new trace and an empty goal tree; return its id."""
        trace_id = validate_trace_id(trace.trace_id)
        async with self._lock(trace_id):
            if self._trace_exists(trace_id):
                raise StoreError(f"trace {trace_id!r} already exists; continue it instead of creating it")
            tree = GoalTree(mission=trace.task)
            stored = trace.model_copy(deep=True)
            self._create_record(stored, tree)
            self._hot[trace_id] = (stored, tree)
            self._event_ids[trace_id] = 0
        return trace_id

    async def get_trace(self, trace_id: str) -> Trace | None:
        """Return the trace, or None when it does not exist."""
        validate_trace_id(trace_id)
        hot = self._hot.get(trace_id)
        if hot is not None:
            return hot[0].model_copy(deep=True)
        return self._read_trace(trace_id)

    async def require_trace(self, trace_id: str) -> Trace:
        """Return the trace or raise TraceNotFoundError."""
        trace = await self.get_trace(trace_id)
        if trace is None:
            raise TraceNotFoundError(trace_id)
        return trace

    async def update_trace(self, trace_id: str, **updates: Any) -> Trace:
        """Update trace fields; a status change appends `trace_status_changed`."""
        unknown = set(updates) - _TRACE_FIELDS
        if unknown:
            raise InvalidUpdateError(f"cannot update trace field(s) {sorted(unknown)}; updatable: {sorted(_TRACE_FIELDS)}")
        async with self._lock(trace_id):
            trace, tree = self._load_for_write(trace_id)
            try:
                merged = Trace.model_validate({**trace.model_dump(), **updates})
            except ValueError as exc:
                raise InvalidUpdateError(f"invalid update of trace {trace_id!r}: {exc}") from None
            old_status = trace.status
            for field in updates:
                setattr(trace, field, getattr(merged, field))
            trace.updated_at = utc_now()
            if trace.status != old_status and trace.status in _FINAL and trace.completed_at is None:
                trace.completed_at = trace.updated_at
            self._write_trace(trace)
            if trace.status != old_status:
                self._emit(trace_id, "trace_status_changed", {"trace_id": trace_id, "status": trace.status, "previous": old_status})
            return trace.model_copy(deep=True)

    async def list_traces(
        self,
        *,
        mode: TraceMode | None = None,
        status: TraceStatus | None = None,
        agent_type: str | None = None,
        parent_trace_id: str | None = None,
        created_by_tool: str | None = None,
        uid: str | None = None,
        limit: int | None = 50,
    ) -> list[Trace]:
        """Newest first; every filter is applied before `limit`."""
        if limit is not None and limit < 0:
            raise InvalidUpdateError(f"limit must be >= 0, got {limit}")
        out = []
        for trace in self._all_traces():
            hot = self._hot.get(trace.trace_id)
            if hot is not None:
                trace = hot[0].model_copy(deep=True)
            if mode is not None and trace.mode != mode:
                continue
            if status is not None and trace.status != status:
                continue
            if agent_type is not None and trace.agent_type != agent_type:
                continue
            if parent_trace_id is not None and trace.parent_trace_id != parent_trace_id:
                continue
            if created_by_tool is not None and trace.context.get("created_by_tool") != created_by_tool:
                continue
            if uid is not None and trace.uid != uid:
                continue
            out.append(trace)
        out.sort(key=lambda t: (t.created_at, t.trace_id), reverse=True)
        return out if limit is None else out[:limit]

    # ---- side records -------------------------------------------------------------------
    async def get_resource_usage(self, root_trace_id: str) -> dict[str, Any] | None:
        """Return the root's usage record, None if never written; raise CorruptRecordError if unreadable."""
        self._require_exists(root_trace_id)
        return self._read_side_record(root_trace_id, "resource_usage")

    async def replace_resource_usage(self, root_trace_id: str, usage: dict[str, Any]) -> None:
        """Atomically replace the root's usage record."""
        self._require_exists(root_trace_id)
        self._write_side_record(root_trace_id, "resource_usage", dict(usage))

    async def get_tool_approvals(self, trace_id: str) -> dict[str, Any] | None:
        """Return the persisted approval state of the trace, or None."""
        self._require_exists(trace_id)
        return self._read_side_record(trace_id, "tool_approvals")

    async def replace_tool_approvals(self, trace_id: str, state: dict[str, Any]) -> None:
        """Atomically replace the trace's approval state."""
        self._require_exists(trace_id)
        self._write_side_record(trace_id, "tool_approvals", dict(state))

    def _require_exists(self, trace_id: str) -> None:
        validate_trace_id(trace_id)
        if trace_id not in self._hot and not self._trace_exists(trace_id):
            raise TraceNotFoundError(trace_id)

    # ---- goals --------------------------------------------------------------------------
    async def get_goal_tree(self, trace_id: str) -> GoalTree | None:
        """Return the trace's goal tree (None when the trace does not exist)."""
        validate_trace_id(trace_id)
        hot = self._hot.get(trace_id)
        if hot is not None:
            return hot[1].model_copy(deep=True)
        if not self._trace_exists(trace_id):
            return None
        trace = self._read_trace(trace_id)
        return self._read_goals(trace_id) or GoalTree(mission=trace.task if trace else None)

    async def update_goal_tree(self, trace_id: str, tree: GoalTree) -> None:
        """Replace the whole goal tree."""
        async with self._lock(trace_id):
            trace, old = self._load_for_write(trace_id)
            new = tree.model_copy(deep=True)
            new.stats_sequence = max(new.stats_sequence, old.stats_sequence)
            self._hot[trace_id] = (trace, new)
            self._write_goals(trace_id, new)

    async def add_goal(self, trace_id: str, goal: Goal) -> None:
        """Insert a goal and append `goal_added`."""
        async with self._lock(trace_id):
            _, tree = self._load_for_write(trace_id)
            tree.insert(goal.model_copy(deep=True))
            self._write_goals(trace_id, tree)
            self._emit(trace_id, "goal_added", {"goal": goal.model_dump(mode="json")})

    async def update_goal(self, trace_id: str, goal_id: str, **updates: Any) -> list[Goal]:
        """Update a goal (status changes follow the tree's cascade rule); append `goal_updated`."""
        unknown = set(updates) - _GOAL_FIELDS
        if unknown:
            raise InvalidUpdateError(f"cannot update goal field(s) {sorted(unknown)}; updatable: {sorted(_GOAL_FIELDS)}")
        async with self._lock(trace_id):
            trace, tree = self._load_for_write(trace_id)
            goal = tree.get(goal_id, trace_id)
            try:
                merged = Goal.model_validate({**goal.model_dump(), **updates})
            except ValueError as exc:
                raise InvalidUpdateError(f"invalid update of goal {goal_id!r}: {exc}") from None
            if merged.parent_id is not None and tree.find(merged.parent_id) is None:
                raise GoalError(f"parent goal {merged.parent_id!r} does not exist")
            changed = [goal]
            for field in updates:
                if field != "status":
                    setattr(goal, field, getattr(merged, field))
            if "status" in updates:
                changed = tree.set_status(goal_id, merged.status, summary=merged.summary)
            self._write_goals(trace_id, tree)
            self._emit(trace_id, "goal_updated", {
                "goal_id": goal_id,
                "patch": {k: merged.model_dump(mode="json")[k] for k in updates},
                "affected_goals": [g.model_dump(mode="json") for g in changed],
            })
            return [g.model_copy(deep=True) for g in changed]

    # ---- messages -----------------------------------------------------------------------
    async def add_message(self, message: Message) -> str:
        """Assign the next sequence, persist, update totals and goal stats, append `message_added`."""
        trace_id = validate_trace_id(message.trace_id)
        async with self._lock(trace_id):
            trace, tree = self._load_for_write(trace_id)
            if message.parent_sequence is not None and not 0 < message.parent_sequence <= trace.total_messages:
                raise InvalidUpdateError(
                    f"parent_sequence {message.parent_sequence} does not exist in trace {trace_id!r} "
                    f"(it has {trace.total_messages} messages)"
                )
            message.assign(trace.total_messages + 1)
            self._write_message(message)
            affected = self._account(trace, tree, message)
            if affected:
                self._write_goals(trace_id, tree)
            self._write_trace(trace)
            self._emit(trace_id, "message_added", self._message_payload(message, affected))
        return message.message_id

    async def get_message(self, message_id: str) -> Message | None:
        """Return the message, or None."""
        trace_id, sequence = parse_message_id(message_id)
        return self._read_message(trace_id, sequence)

    async def get_trace_messages(self, trace_id: str) -> list[Message]:
        """All messages of the trace in sequence order, every branch included."""
        self._require_exists(trace_id)
        return sorted(self._read_all_messages(trace_id), key=lambda m: m.sequence)

    async def get_main_path_messages(self, trace_id: str, head_sequence: int) -> list[Message]:
        """Messages from the first one to `head_sequence` along `parent_sequence`, in order."""
        self._require_exists(trace_id)
        path: list[Message] = []
        sequence: int | None = head_sequence or None
        seen: set[int] = set()
        while sequence is not None:
            if sequence in seen:
                raise StoreError(f"trace {trace_id!r}: message parent chain loops at sequence {sequence}")
            seen.add(sequence)
            message = self._read_message(trace_id, sequence)
            if message is None:
                raise MessageNotFoundError(f"{trace_id}-{sequence:04d}")
            path.append(message)
            sequence = message.parent_sequence
        path.reverse()
        return path

    async def get_messages_by_goal(self, trace_id: str, goal_id: str) -> list[Message]:
        """Messages recorded under a goal, in sequence order."""
        return [m for m in await self.get_trace_messages(trace_id) if m.goal_id == goal_id]

    async def update_message(self, message_id: str, **updates: Any) -> Message:
        """Update fields of a message other than its identity."""
        bad = set(updates) & _MESSAGE_READONLY | (set(updates) - set(Message.model_fields))
        if bad:
            raise InvalidUpdateError(f"cannot update message field(s) {sorted(bad)}")
        trace_id, sequence = parse_message_id(message_id)
        async with self._lock(trace_id):
            message = self._read_message(trace_id, sequence)
            if message is None:
                raise MessageNotFoundError(message_id)
            try:
                updated = Message.model_validate({**message.model_dump(), **updates})
            except ValueError as exc:
                raise InvalidUpdateError(f"invalid update of message {message_id!r}: {exc}") from None
            self._write_message(updated)
            return updated

    # ---- events -------------------------------------------------------------------------
    async def append_event(self, trace_id: str, event_type: EventType, payload: dict[str, Any]) -> int:
        """Append an event and return its id."""
        if event_type not in EVENT_TYPES:
            raise InvalidUpdateError(f"unknown event type {event_type!r}; known: {sorted(EVENT_TYPES)}")
        async with self._lock(trace_id):
            self._require_exists(trace_id)
            return self._emit(trace_id, event_type, payload)

    async def get_events(self, trace_id: str, since_event_id: int = 0) -> list[TraceEvent]:
        """Events with id greater than `since_event_id`, in order."""
        self._require_exists(trace_id)
        return [e for e in self._read_events(trace_id) if e.event_id > since_event_id]
