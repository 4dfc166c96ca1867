"""Human review endpoints: tool approvals (SPEC T8) and reflection extractions (T9 reflect).

    GET  /api/traces/{id}/tool-approvals/pending     the batch waiting for a decision, or null
    POST /api/traces/{id}/tool-approvals/{batch_id}  decide every call of the batch at once
    GET  /api/extractions                            lessons waiting for (or past) review
    POST /api/extractions/{extraction_id}            approve (→ experiences file) or reject

A decision is recorded by `cyber_agent/core/approvals.py:decide_batch` (404 unknown batch,
409 already decided, 422 an edit outside `editable_params` or a call missing), and then the
server resumes the trace in the background: the decided batch runs from the persisted
assistant tool calls, then the model continues.
"""

from __future__ import annotations

import logging
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from cyber_agent.core.approvals import ApprovalBatch, CallDecision, current_batch, decide_batch
from cyber_agent.core.config import RunConfig
from cyber_agent.errors import CyberAgentError, TraceNotFoundError
from cyber_agent.server.http_errors import error_responses
from cyber_agent.server.json_body import JSONBodyRoute
from cyber_agent.server.runs import RunManager
from cyber_agent.server.state import State, TraceId
from cyber_agent.trace.reflection import Extraction, ExtractionStatus

__all__ = ["DecisionRequest", "DecisionResult", "ExtractionList", "PendingApproval", "ReviewRequest", "resume", "router"]

router = APIRouter(route_class=JSONBodyRoute)
log = logging.getLogger("cyber_agent.server")


class PendingApproval(BaseModel):
    """Answer of GET .../tool-approvals/pending."""

    trace_id: str
    """The trace."""
    batch: ApprovalBatch | None
    """The batch waiting for a decision, or null when none is pending."""
    descendants: list[DescendantApproval] = Field(default_factory=list)
    """Pending batches of the trace's descendants (for a root: the whole tree), e.g. a sub-agent's."""


class DescendantApproval(BaseModel):
    """A pending batch of a descendant trace (decide it on that trace's own endpoint)."""

    trace_id: str
    """The descendant that waits."""
    batch: ApprovalBatch
    """Its pending batch."""


class DecisionRequest(BaseModel):
    """Decisions for every call of one batch."""

    model_config = ConfigDict(extra="forbid")

    decisions: list[CallDecision] = Field(max_length=100)
    """One decision per call of the batch: approve (optionally editing editable_params) or reject."""


class DecisionResult(BaseModel):
    """Answer of POST .../tool-approvals/{batch_id}."""

    batch: ApprovalBatch
    """The batch as decided."""
    resumed: bool
    """True when the trace's run resumed in the background (the decided calls run first)."""
    resume_error: str | None = None
    """Why the run could not resume (the decision stays recorded; POST /run retries)."""


class ExtractionList(BaseModel):
    """Answer of GET /api/extractions."""

    extractions: list[Extraction]
    """In creation order."""


class ReviewRequest(BaseModel):
    """A reviewer's decision on one extracted lesson."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject"]
    """approve appends the lesson to the experiences file; reject keeps it out."""
    note: str = Field("", max_length=2000)
    """Optional reviewer note."""


async def resume(runs: RunManager, runner: object, trace_id: str) -> None:
    """Resume a trace whose batch was decided: its calls run, then the model continues."""
    await runs.wait_idle(trace_id)  # the run that opened the batch may still be unwinding
    config = RunConfig(trace_id=trace_id)
    await runs.launch(trace_id, lambda: runner.run([], config))  # type: ignore[attr-defined]


@router.get("/api/traces/{trace_id}/tool-approvals/pending", response_model=PendingApproval,
            tags=["approvals"], responses=error_responses(404, 422))
async def pending_approval(state: State, trace_id: TraceId) -> PendingApproval:
    """Return the approval batch waiting for a decision, or null."""
    if await state.store.get_trace(trace_id) is None:
        raise TraceNotFoundError(trace_id)
    batch = await current_batch(state.store, trace_id)
    descendants: list[DescendantApproval] = []
    frontier = [trace_id]
    while frontier:  # the whole subtree: a sub-agent's approval is visible from the root (issue 14)
        children = await state.store.list_traces(parent_trace_id=frontier.pop(0), limit=None)
        for child in sorted(children, key=lambda t: t.trace_id):
            frontier.append(child.trace_id)
            pending = await current_batch(state.store, child.trace_id) if child.status == "waiting_confirmation" else None
            if pending is not None and pending.status == "pending":
                descendants.append(DescendantApproval(trace_id=child.trace_id, batch=pending))
    return PendingApproval(trace_id=trace_id, batch=batch if batch is not None and batch.status == "pending" else None,
                           descendants=descendants)


@router.post("/api/traces/{trace_id}/tool-approvals/{batch_id}", response_model=DecisionResult,
             tags=["approvals"], responses=error_responses(404, 409, 422))
async def decide(
    state: State, trace_id: TraceId,
    batch_id: Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")],
    body: DecisionRequest,
) -> DecisionResult:
    """Decide every call of a pending batch at once; the trace then resumes in the background."""
    if await state.store.get_trace(trace_id) is None:
        raise TraceNotFoundError(trace_id)
    async with state.runner.lock(f"approval:{trace_id}"):  # two racing decisions: one wins, one gets 409
        batch = await decide_batch(state.store, trace_id, batch_id, body.decisions)
    try:
        await resume(state.runs, state.runner, trace_id)
    except CyberAgentError as exc:
        return DecisionResult(batch=batch, resumed=False, resume_error=str(exc))
    return DecisionResult(batch=batch, resumed=True)


@router.get("/api/extractions", response_model=ExtractionList, tags=["reflection"])
async def list_extractions(
    state: State,
    status: ExtractionStatus | None = None,
    trace_id: Annotated[str | None, Query(max_length=220)] = None,
) -> ExtractionList:
    """List extracted lessons, optionally by review status and trace."""
    return ExtractionList(extractions=state.cognition.entries(status=status, trace_id=trace_id))


@router.post("/api/extractions/{extraction_id}", response_model=Extraction, tags=["reflection"],
             responses=error_responses(404, 409, 422))
async def review_extraction(
    state: State, extraction_id: Annotated[str, Path(min_length=1, max_length=64)], body: ReviewRequest,
) -> Extraction:
    """Approve (append to the experiences file) or reject a pending lesson."""
    return state.cognition.review(extraction_id, body.decision, body.note)
