"""The TraceStore protocol (SPEC T4): everything the runner, API and notebooks persist.

A new store (SQLite, PostgreSQL, ...) implements this protocol and passes
`tests/trace/test_store_conformance.py` by adding itself to `STORE_FACTORIES` in
`tests/trace/conftest.py`; subclassing `store_base.BaseTraceStore` gives all the logic for free.

Error contract: an id that could escape the store raises `InvalidIdError` everywhere; an
unknown id makes `get_trace`, `get_goal_tree`, `get_message`, `get_resource_usage` and
`get_tool_approvals` return None, and every other method raise `TraceNotFoundError`,
`MessageNotFoundError` or `GoalNotFoundError`; an unreadable record raises `CorruptRecordError`.

`TraceReader` is the read half (what the API, notebooks and exports need, `read_records`
included); `TraceStore` adds the writes. A read-only view (an export) is a reader that refuses
every name in `WRITE_METHODS`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from cyber_agent.trace.budget_limits import ResourceUsage
from cyber_agent.trace.events import EventType, TraceEvent
from cyber_agent.trace.goal_models import Goal, GoalTree
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.records import TraceRecord
from cyber_agent.trace.side_records import StopRequest, ToolApprovals
from cyber_agent.trace.trace_filter import TraceFilter

UsageChange = Callable[[ResourceUsage | None], ResourceUsage | Mapping[str, Any] | None]
"""A step of `TraceStore.update_resource_usage`: the persisted usage in (None: never written), the usage to
write (or None: write nothing) out."""

__all__ = ["WRITE_METHODS", "TraceReader", "TraceStore", "UsageChange"]


@runtime_checkable
class TraceReader(Protocol):
    """Reads of traces, goal trees, messages, events, side records, and whole trees in bulk."""

    async def get_trace(self, trace_id: str) -> Trace | None:
        """Return the trace, or None when it does not exist."""
        ...

    async def list_traces(self, where: TraceFilter | None = None, /, **filters: Any) -> list[Trace]:
        """Newest first; every filter (`TraceFilter`, or its fields as keywords) is applied before `limit`."""
        ...

    async def get_resource_usage(self, root_trace_id: str) -> ResourceUsage | None:
        """Return the root's usage record; None if never written or no such trace; CorruptRecordError if unreadable."""
        ...

    async def get_goal_tree(self, trace_id: str) -> GoalTree | None:
        """Return the trace's goal tree."""
        ...

    async def get_message(self, message_id: str) -> Message | None:
        """Return the message, or None."""
        ...

    async def get_trace_messages(self, trace_id: str) -> list[Message]:
        """All messages of the trace in sequence order, every branch included."""
        ...

    async def get_main_path_messages(self, trace_id: str, head_sequence: int | None = None) -> list[Message]:
        """Messages from the first one to `head_sequence` (default: the trace's head) along `parent_sequence`."""
        ...

    async def get_messages_by_goal(self, trace_id: str, goal_id: str) -> list[Message]:
        """Messages recorded under a goal, in sequence order."""
        ...

    async def get_events(self, trace_id: str, since_event_id: int = 0) -> list[TraceEvent]:
        """Events with id greater than `since_event_id`, in order."""
        ...

    async def get_stop_requests(self, trace_ids: Sequence[str]) -> dict[str, StopRequest]:
        """The persisted stop requests among `trace_ids` (others are left out)."""
        ...

    async def get_tool_approvals(self, trace_id: str) -> ToolApprovals | None:
        """Return the persisted approval state of the trace, or None."""
        ...

    async def read_records(
        self, root_ids: Sequence[str] | None = None, *, messages: bool = True, events: bool = True,
        goals: bool = True, fields: Collection[str] | None = None, subtrees: bool = True,
    ) -> list[TraceRecord]:
        """Every trace of the trees under `root_ids` (all traces when None) as JSON-mode records.

        Parents first, siblings by (created_at, trace_id) (`cyber_agent/trace/records.py:select_trees`);
        an unknown root raises TraceNotFoundError. Each record is what a fresh reader of the store
        sees (messages above a checkpoint counted); each message is parsed once. `goals=False`
        leaves `goal_tree` None; `fields` keeps only those `Trace` fields (dotted paths into them)
        in `trace`, exactly `cyber_agent/trace/record_fields.py:project_meta` of the whole meta;
        `subtrees=False` reads the traces named in `root_ids` only, in that order.
        """
        ...


@runtime_checkable
class TraceStore(TraceReader, Protocol):
    """Persistence of traces, goal trees, messages, events, resource usage and approvals."""

    async def create_trace(self, trace: Trace, *, goal_tree: GoalTree | None = None) -> str:
        """Persist a new trace and its goal tree (empty when None) in one write; return its id."""
        ...

    async def update_trace(self, trace_id: str, **updates: Any) -> Trace:
        """Update trace fields (not trace_id or the totals); a status change appends `trace_status_changed`."""
        ...

    async def replace_resource_usage(self, root_trace_id: str, usage: ResourceUsage | Mapping[str, Any]) -> None:
        """Atomically replace the root's usage record."""
        ...

    async def update_resource_usage(self, root_trace_id: str, change: UsageChange) -> ResourceUsage | None:
        """Read, change and write the root's usage record as one atomic step, across processes too."""
        ...

    async def request_stop(self, trace_id: str, reason: str, *, subtree: bool = True) -> None:
        """Persist a stop request for the trace (and its subtree), seen by every process at its next checkpoint."""
        ...

    async def clear_stop(self, trace_id: str) -> None:
        """Withdraw the trace's own stop request."""
        ...

    async def update_goal_tree(self, trace_id: str, tree: GoalTree) -> None:
        """Replace the goal tree; stats stay the store's (self_stats kept by goal id, cumulative recomputed)."""
        ...

    async def add_goal(self, trace_id: str, goal: Goal) -> None:
        """Insert a goal (its stats start at zero) and append `goal_added`."""
        ...

    async def update_goal(self, trace_id: str, goal_id: str, **updates: Any) -> list[Goal]:
        """Update a goal (status changes follow the tree's cascade rule); append `goal_updated`."""
        ...

    async def add_message(self, message: Message) -> str:
        """Assign the next sequence, persist, update totals and goal stats, append `message_added`."""
        ...

    async def update_message(self, message_id: str, **updates: Any) -> Message:
        """Update fields of a message other than its identity, tree position and counted numbers."""
        ...

    async def append_event(self, trace_id: str, event_type: EventType, payload: dict[str, Any]) -> int:
        """Append an event whose payload fits its type's model (InvalidUpdateError otherwise); return its id."""
        ...

    async def replace_tool_approvals(self, trace_id: str, state: ToolApprovals | Mapping[str, Any]) -> None:
        """Atomically replace the trace's approval state."""
        ...


WRITE_METHODS: tuple[str, ...] = tuple(sorted(
    name for name, value in vars(TraceStore).items() if not name.startswith("_") and callable(value)
))
"""The methods `TraceStore` adds to `TraceReader`: every write."""
