"""Persisted tool-approval records (SPEC T8): one batch of tool calls waiting for a human decision.

They live in `trace/` because the trace persists them twice: in its `tool_approvals.json` side
record and in the `tool_approval_requested` / `tool_approval_decided` event payloads. The
workflow around them (open, decide, run, recover) is `cyber_agent/core/approvals.py`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from cyber_agent.trace.clock import utc_now

__all__ = ["ApprovalBatch", "BatchStatus", "PendingCall"]

BatchStatus = Literal["pending", "decided", "executing", "done", "cancelled", "execution_unknown"]


class PendingCall(BaseModel):
    """One tool call of a batch, with the reviewer's decision once made."""

    call_id: str
    """Id of the assistant's tool call."""
    name: str
    """Tool name."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Arguments as the model sent them."""
    requires_confirmation: bool = False
    """True when this call (not only its batch) needs a human decision."""
    editable_params: list[str] = Field(default_factory=list)
    """Arguments a reviewer may edit."""
    decision: Literal["approve", "reject"] | None = None
    """The reviewer's decision; None while pending."""
    edited_arguments: dict[str, Any] = Field(default_factory=dict)
    """Reviewer's edits (only `editable_params`)."""
    feedback: str = ""
    """Reviewer's note to the model."""


class ApprovalBatch(BaseModel):
    """The tool calls of one assistant turn waiting for (or past) a human decision."""

    batch_id: str
    """Short random id."""
    trace_id: str
    """Trace the batch belongs to."""
    assistant_message_id: str
    """Message whose tool calls the batch holds."""
    status: BatchStatus = "pending"
    """Lifecycle state (see `cyber_agent/core/approvals.py`)."""
    calls: list[PendingCall]
    """Every call of the turn, in order."""
    created_at: datetime = Field(default_factory=utc_now)
    """When the batch was opened (UTC)."""
    decided_at: datetime | None = None
    """When the reviewer decided (UTC)."""
    note: str = ""
    """Why the batch ended as it did (cancel, recovery)."""
