"""Read and write the authoritative protocol state, `Trace.protocol` (see `trace/state.py:ProtocolState`).

Fields: `brief` (TaskBrief of a child), `report` (its TaskReport), `validations` (results on
it), `validator_count` (validators started on it), `children` / `pending_reviews` / `reviews`
(of a parent), `review` (the parent's decision on a child), `validation` (a validator's
submitted result), `ended_by` (the protocol tool that ended the run), `context_access`,
`validator`.

Every change of one protocol step goes to the store in one `update_trace` (a rewrite of the
trace record), and a change that leaves the state as stored writes nothing.
"""

from __future__ import annotations

from typing import Any

from cyber_agent.errors import TraceNotFoundError
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocol_records import TaskReport, TaskReview, ValidationResult
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.state import EndedBy, ProtocolState

__all__ = [
    "append_review",
    "append_validation",
    "report_changes",
    "store_report",
    "update_protocol",
    "with_protocol",
]


def with_protocol(trace: Trace, changes: dict[str, Any]) -> ProtocolState | None:
    """The trace's protocol state with `changes` (field → value) applied; None when nothing would change."""
    protocol = trace.protocol
    unknown = set(changes) - set(ProtocolState.model_fields)
    if unknown:
        raise ValueError(f"not protocol fields: {sorted(unknown)}; see cyber_agent/trace/state.py:ProtocolState")
    if all(getattr(protocol, key) == value for key, value in changes.items()):
        return None
    return ProtocolState.model_validate({**dict(protocol), **changes})


async def _current(store: TraceStore, trace_id: str) -> Trace:
    trace = await store.get_trace(trace_id)
    if trace is None:
        raise TraceNotFoundError(trace_id)
    return trace


async def update_protocol(store: TraceStore, trace_id: str, *, trace: Trace | None = None, **changes: Any) -> Trace:
    """Apply `changes` to the trace's protocol state and persist it (no write when nothing changes).

    `trace` is the trace as the caller just read it, when it has it (saves a read); the caller
    vouches that nothing wrote the trace's protocol state since.
    """
    current = trace if trace is not None and trace.trace_id == trace_id else await _current(store, trace_id)
    return await _write(store, current, changes)


async def _write(store: TraceStore, trace: Trace, changes: dict[str, Any]) -> Trace:
    protocol = with_protocol(trace, changes)
    if protocol is None:
        return trace
    return await store.update_trace(trace.trace_id, protocol=protocol)


def report_changes(report: TaskReport, *, ends_run: bool = False) -> dict[str, Any]:
    """The protocol changes that store a child's report (and, from submit_report, end its run)."""
    changes: dict[str, Any] = {"report": report}
    if ends_run:
        changes["ended_by"] = EndedBy(tool="submit_report", summary=report.summary)
    return changes


async def store_report(store: TraceStore, trace_id: str, report: TaskReport, *, ends_run: bool = False) -> Trace:
    """Persist a child's report (a new report replaces the previous one; history stays in messages)."""
    return await update_protocol(store, trace_id, **report_changes(report, ends_run=ends_run))


async def append_validation(store: TraceStore, trace_id: str, result: ValidationResult, **changes: Any) -> Trace:
    """Record a validation result on the validated trace, with any other `changes` of the same step, in one write."""
    trace = await _current(store, trace_id)
    return await _write(store, trace, {**changes, "validations": [*trace.protocol.validations, result]})


async def append_review(
    store: TraceStore, parent_id: str, review: TaskReview, *, still_pending: bool, parent: Trace | None = None,
) -> Trace:
    """Record a parent's review; drop the child from the pending list unless it stays pending.

    `parent` is the parent trace as just read, when the caller has it (saves a read).
    """
    trace = parent if parent is not None and parent.trace_id == parent_id else await _current(store, parent_id)
    protocol = trace.protocol
    pending = [c for c in protocol.pending_reviews if still_pending or c != review.child_trace_id]
    return await _write(store, trace, {"pending_reviews": pending, "reviews": [*protocol.reviews, review]})
