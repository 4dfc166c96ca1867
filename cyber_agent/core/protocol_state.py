"""Read and write the authoritative protocol state in `trace.context["task_protocol"]`.

Keys: `brief` (TaskBrief of a child), `report` (its TaskReport), `validations` (results on
it), `children` / `pending_reviews` / `reviews` (of a parent), `validation` (a validator's
submitted result), `ended_by` (the protocol tool that ended the run).
"""

from __future__ import annotations

from typing import Any

from cyber_agent.core.task_protocol import TaskReport, TaskReview, ValidationResult
from cyber_agent.errors import TraceNotFoundError
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceStore

__all__ = ["append_review", "append_validation", "protocol_of", "report_of", "store_report", "update_protocol"]


def protocol_of(trace: Trace) -> dict[str, Any]:
    """The protocol state of a trace (empty dict when none)."""
    return dict(trace.context.get("task_protocol") or {})


def report_of(trace: Trace) -> TaskReport | None:
    """The child's report, if it submitted one."""
    raw = protocol_of(trace).get("report")
    return TaskReport.model_validate(raw) if raw else None


async def update_protocol(store: TraceStore, trace_id: str, **changes: Any) -> Trace:
    """Merge `changes` into the trace's protocol state and persist it."""
    trace = await store.get_trace(trace_id)
    if trace is None:
        raise TraceNotFoundError(trace_id)
    protocol = protocol_of(trace)
    protocol.update(changes)
    return await store.update_trace(trace_id, context={**trace.context, "task_protocol": protocol})


async def store_report(store: TraceStore, trace_id: str, report: TaskReport, *, ends_run: bool = False) -> Trace:
    """Persist a child's report (a new report replaces the previous one; history stays in messages)."""
    changes: dict[str, Any] = {"report": report.model_dump(mode="json")}
    if ends_run:
        changes["ended_by"] = {"tool": "submit_report", "summary": report.summary}
    return await update_protocol(store, trace_id, **changes)


async def append_validation(store: TraceStore, trace_id: str, result: ValidationResult) -> Trace:
    """Record a validation result on the validated trace."""
    trace = await store.get_trace(trace_id)
    if trace is None:
        raise TraceNotFoundError(trace_id)
    validations = [*protocol_of(trace).get("validations", []), result.model_dump(mode="json")]
    return await update_protocol(store, trace_id, validations=validations)


async def append_review(store: TraceStore, parent_id: str, review: TaskReview, *, still_pending: bool) -> Trace:
    """Record a parent's review; drop the child from the pending list unless it stays pending."""
    trace = await store.get_trace(parent_id)
    if trace is None:
        raise TraceNotFoundError(parent_id)
    protocol = protocol_of(trace)
    pending = [c for c in protocol.get("pending_reviews", []) if still_pending or c != review.child_trace_id]
    reviews = [*protocol.get("reviews", []), review.model_dump(mode="json")]
    return await update_protocol(store, parent_id, pending_reviews=pending, reviews=reviews)
