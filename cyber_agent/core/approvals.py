"""Human tool approvals (SPEC T8).

If any call of a model turn needs confirmation, the whole batch waits: the trace enters
`waiting_confirmation`, nothing in the batch runs, and the batch is persisted in the trace's
`tool_approvals.json`. A reviewer decides every call at once (approve / reject; edits only to
the tool's declared `editable_params`). Continuing the trace then executes the decided batch
from the persisted assistant tool calls. A batch is marked `executing` before its first call
runs; a process that dies after that leaves `executing`, which recovery turns into
`execution_unknown` and a failed trace — it is never retried automatically.

    pending ──decide──▶ decided ──run──▶ executing ──▶ done
       └──stop──▶ cancelled            (crash) └──recover──▶ execution_unknown
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cyber_agent.errors import ConflictError, CorruptRecordError, InvalidUpdateError, NotFoundError
from cyber_agent.llm.types import ToolCall
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.approval_records import ApprovalBatch, PendingCall
from cyber_agent.trace.models import utc_now
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.side_records import ToolApprovals
from cyber_agent.trace.store_listing import list_traces_report

__all__ = [
    "ApprovalBatch",
    "CallDecision",
    "PendingCall",
    "cancel_batch",
    "current_batch",
    "decide_batch",
    "open_batch",
    "recover_approvals",
    "save_batch",
]

# ApprovalBatch and PendingCall are persisted (side record and event payloads): trace/approval_records.py.


class CallDecision(BaseModel):
    """A reviewer's decision on one call (API body item); an unknown field (`edits` for `arguments`) is refused,
    so an edit the reviewer believes they made is never dropped while the call is approved."""

    model_config = ConfigDict(extra="forbid")

    call_id: str
    decision: Literal["approve", "reject"]
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Edited values; only the tool's editable_params may appear."""
    feedback: str = ""


async def _load(store: TraceStore, trace_id: str) -> list[ApprovalBatch]:
    # The store parses the record (CorruptRecordError naming `tool_approvals.json` when a batch does not fit).
    state = await store.get_tool_approvals(trace_id)
    return list(state.batches) if state is not None else []


async def save_batch(store: TraceStore, batch: ApprovalBatch) -> None:
    """Persist a batch (replacing the one with the same id)."""
    batches = [b for b in await _load(store, batch.trace_id) if b.batch_id != batch.batch_id]
    batches.append(batch)
    await store.replace_tool_approvals(batch.trace_id, ToolApprovals(batches=batches))


async def current_batch(store: TraceStore, trace_id: str) -> ApprovalBatch | None:
    """The latest batch of the trace, if any."""
    batches = await _load(store, trace_id)
    return batches[-1] if batches else None


async def open_batch(store: TraceStore, registry: ToolRegistry, trace_id: str, assistant_message_id: str,
                     calls: list[ToolCall]) -> ApprovalBatch:
    """Persist a pending batch for the calls of one assistant turn and move the trace to waiting_confirmation."""
    pending = []
    for call in calls:
        spec = registry.get(call.name)
        pending.append(PendingCall(
            call_id=call.id, name=call.name, arguments=call.arguments,
            requires_confirmation=bool(spec and spec.requires_confirmation),
            editable_params=list(spec.editable_params) if spec else [],
        ))
    batch = ApprovalBatch(batch_id=uuid.uuid4().hex[:12], trace_id=trace_id, assistant_message_id=assistant_message_id, calls=pending)
    await save_batch(store, batch)
    await store.update_trace(trace_id, status="waiting_confirmation")
    await store.append_event(trace_id, "tool_approval_requested", {"batch": batch.model_dump(mode="json")})
    return batch


async def decide_batch(store: TraceStore, trace_id: str, batch_id: str, decisions: list[CallDecision]) -> ApprovalBatch:
    """Record decisions for every call of a pending batch at once."""
    batches = await _load(store, trace_id)
    batch = next((b for b in batches if b.batch_id == batch_id), None)
    if batch is None:
        raise NotFoundError(f"approval batch {batch_id!r} not found in trace {trace_id!r}")
    if batch.status != "pending":
        raise ConflictError(f"approval batch {batch_id!r} is {batch.status}, not pending; it was already decided")
    by_id = {d.call_id: d for d in decisions}
    if len(by_id) != len(decisions):
        raise InvalidUpdateError("each call may be decided once; duplicate call_id in decisions")
    expected = {c.call_id for c in batch.calls}
    if set(by_id) != expected:
        raise InvalidUpdateError(
            f"decide every call of the batch at once: expected {sorted(expected)}, got {sorted(by_id)}"
        )
    for call in batch.calls:
        decision = by_id[call.call_id]
        illegal = set(decision.arguments) - set(call.editable_params)
        if illegal:
            raise InvalidUpdateError(
                f"call {call.call_id} ({call.name}): {sorted(illegal)} cannot be edited; editable: {call.editable_params or 'none'}"
            )
        call.decision = decision.decision
        call.edited_arguments = dict(decision.arguments)
        call.feedback = decision.feedback
    batch.status = "decided"
    batch.decided_at = utc_now()
    await save_batch(store, batch)
    await store.append_event(trace_id, "tool_approval_decided", {"batch": batch.model_dump(mode="json")})
    return batch


async def cancel_batch(store: TraceStore, trace_id: str, reason: str = "stopped") -> ApprovalBatch | None:
    """Cancel a pending or decided batch (a stop); return it, or None when nothing was open."""
    batch = await current_batch(store, trace_id)
    if batch is None or batch.status not in ("pending", "decided"):
        return None
    batch.status = "cancelled"
    batch.note = reason
    await save_batch(store, batch)
    return batch


async def recover_approvals(store: TraceStore) -> dict[str, str]:
    """After a restart: fail closed on batches whose execution had started; report every open batch's state.

    A damaged store entry (`cyber_agent/trace/store_listing.py:DamagedEntry`) is reported as
    "corrupt" under its name and recovery goes on with the others.
    """
    listing = await list_traces_report(store, limit=None)
    states: dict[str, str] = {entry.name: "corrupt" for entry in listing.errors}
    for trace in listing.traces:
        try:
            status = await _recover_one(store, trace.trace_id)
        except CorruptRecordError:
            # One unreadable file must not stop recovery of the others; the runner still refuses to
            # continue this trace, because it cannot read its approval state (or its records) either.
            status = "corrupt"
        if status is not None:
            states[trace.trace_id] = status
    return states


async def _recover_one(store: TraceStore, trace_id: str) -> str | None:
    batch = await current_batch(store, trace_id)
    if batch is None or batch.status in ("done", "cancelled"):
        return None
    if batch.status == "executing":
        batch.status = "execution_unknown"
        batch.note = "the process stopped while this batch was executing; its side effects are unknown"
        await save_batch(store, batch)
        await store.update_trace(trace_id, status="failed", error_message=batch.note)
    return batch.status
