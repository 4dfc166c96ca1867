"""One payload model per event type (`PAYLOAD_MODELS`), checked when an event is appended.

The event's `type` is the discriminator: `PAYLOAD_MODELS[event.type]` is the model of its
`payload`, and `cyber_agent/trace/events.py:TraceEvent.typed_payload` returns the instance.
`TraceEvent.payload` itself stays the plain dict that was persisted, for JSON consumers
(notebook frames, the WebSocket).

Closed (`extra="forbid"`) where one builder fixes the payload: a misspelt or stray key is a bug.
Open (`extra="allow"`) where callers legitimately add fields, each model saying who:
`sub_trace_started` / `sub_trace_completed` (a child run's caller adds fields) and
`progress` (every stage carries its own). Nested records (goals, messages, goal trees,
approval batches) are the records' own models, which ignore unknown keys so events written by
an older version still read.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from cyber_agent.errors import InvalidUpdateError

from cyber_agent.trace.approval_records import ApprovalBatch
from cyber_agent.trace.events import EventType
from cyber_agent.trace.goal_models import Goal, GoalStats, GoalTree
from cyber_agent.trace.models import Message, TraceStatus
from cyber_agent.trace.protocol_records import Outcome, Verdict

__all__ = [
    "PAYLOAD_MODELS",
    "AffectedGoalStats",
    "CompactionPayload",
    "EventPayload",
    "GoalAddedPayload",
    "GoalUpdatedPayload",
    "LLMRetryPayload",
    "MessageAddedPayload",
    "ProgressPayload",
    "RewindPayload",
    "SubTraceCompletedPayload",
    "SubTraceStartedPayload",
    "SubTraceStats",
    "ToolApprovalDecidedPayload",
    "ToolApprovalRequestedPayload",
    "TraceCompletedPayload",
    "TraceStatusChangedPayload",
    "check_payload",
]


class EventPayload(BaseModel):
    """Base of every payload model: closed unless a subclass opens it."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class _OpenPayload(EventPayload):
    # Extra keys are kept as attributes (`model_extra`) and in the persisted dict.
    model_config = ConfigDict(extra="allow")


class GoalAddedPayload(EventPayload):
    """`goal_added`: a goal was inserted (by `add_goal`, or the runner's root goal)."""

    goal: Goal
    """The full goal as inserted."""


class GoalUpdatedPayload(EventPayload):
    """`goal_updated`: fields of a goal changed (`update_goal`)."""

    goal_id: str
    """The goal the update named."""
    patch: dict[str, Any]
    """The updated fields with their new values."""
    affected_goals: list[Goal]
    """Every goal the update changed (cascaded parents included), in full."""


class AffectedGoalStats(EventPayload):
    """Stats of one goal after a message was counted."""

    goal_id: str
    """The goal."""
    self_stats: GoalStats
    """Messages recorded directly under it."""
    cumulative_stats: GoalStats
    """Its and its descendants' messages."""


class MessageAddedPayload(EventPayload):
    """`message_added`: a message was persisted (`add_message`, or recovery after a crash)."""

    message: Message
    """The message, byte for byte as written to its own file."""
    affected_goals: list[AffectedGoalStats]
    """The message's goal and its ancestors, with updated stats."""
    recovered: bool = False
    """True when announced by the next writer after a kill between the write and the event."""


class TraceStatusChangedPayload(EventPayload):
    """`trace_status_changed`: `update_trace` changed the status."""

    trace_id: str
    """The trace."""
    status: TraceStatus
    """New status."""
    previous: TraceStatus
    """Status before the update."""


class SubTraceStartedPayload(_OpenPayload):
    """`sub_trace_started`: a child run starts (or a revision continues it).

    Open: `cyber_agent/core/child_run.py:ChildRun.extra_started` adds caller-chosen fields.
    """

    trace_id: str
    """The child trace."""
    parent_goal_id: str | None
    """Goal of the parent the child works for."""
    agent_type: str | None
    """The child's agent type (`delegate`, `explore`, an archetype)."""
    task: str
    """Short task text."""
    revision: bool = False
    """True when an existing child continues (no new trace)."""


class SubTraceStats(EventPayload):
    """Totals of a child trace when its run ended."""

    total_messages: int
    """Messages of the child."""
    total_tokens: int
    """Its input plus output tokens."""
    total_cost: float
    """Its USD cost."""


class SubTraceCompletedPayload(_OpenPayload):
    """`sub_trace_completed`: a child run ended, whatever its status.

    Open: a child run's completion (`cyber_agent/core/child_run.py:Completion`) returns extra
    fields; the recursive protocol's are `outcome` and `verdict`, typed here.
    """

    trace_id: str
    """The child trace."""
    status: TraceStatus
    """Its status when the run ended."""
    summary: str
    """Its answer, report summary, or `(status: error)`."""
    stats: SubTraceStats
    """Its totals."""
    revision: bool = False
    """True when the run was a revision of an existing child."""
    outcome: Outcome | None = None
    """The child's report outcome (recursive protocol)."""
    verdict: Verdict | None = None
    """The validator's verdict on that report (recursive protocol)."""


class RewindPayload(EventPayload):
    """`rewind`: a run continues from an earlier message (`after_sequence`)."""

    after_sequence: int
    """The message the run continues after."""
    head_sequence: int
    """The trace's head after the rewind (the same message)."""
    goal_tree_snapshot: GoalTree | None
    """The goal tree when the rewind happened."""


class TraceCompletedPayload(EventPayload):
    """`trace_completed`: a run ended with status `completed`."""

    trace_id: str
    """The trace."""
    total_messages: int
    """Its message count then."""


class CompactionPayload(EventPayload):
    """`compaction`: the in-memory history was shrunk (`cyber_agent/trace/compaction.py:CompactionResult.event_payload`)."""

    kind: Literal["micro", "summary"]
    """Old tool results cleared (`micro`) or the middle summarized (`summary`)."""
    tokens_before: int
    """Estimated tokens of the history handed in."""
    tokens_after: int
    """Estimated tokens of the new history."""
    replaced_indices: list[int]
    """History indices rewritten or summarized away."""
    replaced_call_ids: list[str]
    """Tool-call ids whose results were cleared or summarized away."""
    kept_recent: int
    """Trailing messages kept byte-identical."""
    summary_chars: int
    """Length of the summary text (0 for micro)."""
    summary_cost: float
    """USD cost of the summary call."""


class ProgressPayload(_OpenPayload):
    """`progress`: a note on the way (a stage reached, an observer that failed).

    Open by design: each stage carries its own fields (`reflection_extracted` carries
    `reflection_id`, `reflection_status`, `extraction_ids`; a failing post-turn hook
    `post_turn_hook` and `error`; `tool_call_started`, written just before a tool call runs,
    `assistant_id`, `tool_call_id`, `tool`); tools and API callers add their own.
    """

    stage: str | None = None
    """Name of the stage reached, when the note is one."""
    error: str | None = None
    """`Type: message` of a failure the run survived."""
    assistant_id: str | None = None
    """`tool_call_started`: id of the assistant message holding the call."""
    tool_call_id: str | None = None
    """`tool_call_started`: id of the call about to run (with no result after a crash: outcome unknown)."""
    tool: str | None = None
    """`tool_call_started`: name of the tool."""


class ToolApprovalRequestedPayload(EventPayload):
    """`tool_approval_requested`: a batch of tool calls waits for a human."""

    batch: ApprovalBatch
    """The batch as opened."""


class ToolApprovalDecidedPayload(EventPayload):
    """`tool_approval_decided`: a reviewer decided every call of a batch."""

    batch: ApprovalBatch
    """The batch with its decisions."""


class LLMRetryPayload(EventPayload):
    """`llm_retry`: one attempt of a model call failed and was retried (`cyber_agent/llm/types.py:RetryRecord`).

    Appended by the runner after the call, one per retried attempt, before the assistant message
    (whose `metadata` holds `http_retries` and `retry_wait_s`) or the failure that ended the run.
    """

    attempt: int
    """The attempt that failed, from 1."""
    status: int | None
    """Its HTTP status; None for a network failure."""
    error: str
    """`HTTP 429`, or the transport exception's type (`ReadTimeout`, ...)."""
    wait_s: float
    """Seconds waited before the next attempt."""
    retry_after: bool
    """True when the wait is the server's Retry-After hint."""
    model: str
    """The model the call asked for."""
    partial_text: str | None = None
    """Text a stream had sent before it was cut off or dropped (clipped); None otherwise."""


class UsageInvalidPayload(EventPayload):
    """`usage_invalid`: a model call reported usage that could not be booked (`cyber_agent/llm/usage_check.py:validated_usage`).

    Appended by the runner before the assistant message, whose `metadata` says the same
    (`usage_invalid`, `usage_estimated`) and whose token counts are the estimate booked instead.
    """

    reason: str
    """What was reported and that the estimate was booked instead."""
    prompt_tokens: int
    """Input tokens booked instead (the characters ÷ 4 estimate)."""
    completion_tokens: int
    """Output tokens booked instead."""
    model: str
    """The model the call asked for."""


PAYLOAD_MODELS: dict[EventType, type[EventPayload]] = {
    "goal_added": GoalAddedPayload,
    "goal_updated": GoalUpdatedPayload,
    "message_added": MessageAddedPayload,
    "sub_trace_started": SubTraceStartedPayload,
    "sub_trace_completed": SubTraceCompletedPayload,
    "rewind": RewindPayload,
    "trace_completed": TraceCompletedPayload,
    "trace_status_changed": TraceStatusChangedPayload,
    "compaction": CompactionPayload,
    "progress": ProgressPayload,
    "tool_approval_requested": ToolApprovalRequestedPayload,
    "tool_approval_decided": ToolApprovalDecidedPayload,
    "llm_retry": LLMRetryPayload,
    "usage_invalid": UsageInvalidPayload,
}
"""The payload model of each event type (every `EventType` has one)."""


def check_payload(event_type: EventType, payload_json: str) -> None:
    """Raise InvalidUpdateError naming the event type and each bad field unless the payload fits its model."""
    model = PAYLOAD_MODELS[event_type]
    try:
        # The JSON about to be persisted is what is checked: what a reader will get back.
        model.model_validate_json(payload_json)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(payload)'}: {error['msg']}" for error in exc.errors()
        )
        raise InvalidUpdateError(
            f"{event_type} payload does not fit cyber_agent/trace/event_payloads.py:{model.__name__}: {problems}"
        ) from None
