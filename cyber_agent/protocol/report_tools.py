"""Recursive protocol tools: submit_report, review_task, read_context_ref, and the validator's tools.

Which of them a run sees depends on its role and protocol state (`cyber_agent/protocol/tool_rights.py`).
They are thin adapters: state changes go through `cyber_agent/protocol/state.py`, revisions
through `cyber_agent/protocol/delegation.py:continue_child`.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field

from cyber_agent.errors import ToolError
from cyber_agent.protocol.delegation import continue_child
from cyber_agent.protocol.state import append_review, store_report, update_protocol
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocol_records import (
    ArtifactRef,
    CriterionVerdict,
    ReviewDecision,
    TaskReport,
    TaskReview,
    ValidationResult,
    aggregate_verdict,
)
from cyber_agent.trace.state import EndedBy
from cyber_agent.trace.trace_id import parse_message_id

__all__ = ["register_protocol_tools"]

MAX_TRAJECTORY_CHARS = 4000


class ArtifactInput(BaseModel):
    """An artifact a child points at: a message of its own trace (usually a tool result)."""

    message_id: str
    title: str = ""


class VerdictInput(BaseModel):
    """A validator's verdict on one numbered criterion."""

    criterion: int = Field(ge=1, description="1-based number of the completion criterion")
    verdict: Literal["pass", "fail", "unknown"]
    evidence: str = Field(default="", description="what in the persisted trajectory supports the verdict")


async def _trace(ctx: ToolContext, trace_id: str | None = None) -> Trace:
    trace = await ctx.store.get_trace(trace_id or ctx.trace_id)
    if trace is None:
        raise ToolError(f"trace {trace_id or ctx.trace_id!r} not found")
    return trace


async def _same_tree(ctx: ToolContext, trace_id: str, mine: Trace | None = None) -> Trace:
    mine = mine if mine is not None else await _trace(ctx)
    other = mine if trace_id == mine.trace_id else await ctx.store.get_trace(trace_id)
    if other is None or other.root_id != mine.root_id:
        raise ToolError(f"trace {trace_id!r} is not part of this task tree; references across trees are refused")
    return other


async def submit_report(
    ctx: ToolContext, outcome: Literal["completed", "partial", "failed"], summary: str,
    outputs: list[str] | None = None, artifacts: list[ArtifactInput] | None = None,
    evidence: list[str] | None = None, open_issues: list[str] | None = None,
) -> str:
    """Submit your TaskReport to your parent; your run ends after this call.

    Args:
        outcome: completed, partial or failed.
        summary: The result in a few sentences.
        outputs: The concrete results (numbers, findings), one per item.
        artifacts: Messages of your own trace that hold the material (usually tool results).
        evidence: How you know: what in your trajectory supports each output.
        open_issues: What is left or doubtful.
    """
    refs = []
    for item in artifacts or []:
        trace_id, _ = parse_message_id(item.message_id)
        if trace_id != ctx.trace_id:
            raise ToolError(f"artifact {item.message_id!r} is not a message of your own trace {ctx.trace_id!r}")
        message = await ctx.store.get_message(item.message_id)
        if message is None:
            raise ToolError(f"artifact {item.message_id!r} does not exist")
        refs.append(ArtifactRef(message_id=item.message_id, title=item.title,
                                sha256=hashlib.sha256(message.text.encode()).hexdigest()))
    try:
        report = TaskReport(outcome=outcome, summary=summary, outputs=outputs or [], artifacts=refs,
                            evidence=evidence or [], open_issues=open_issues or [], submitted_by="tool")
    except ValueError as exc:
        raise ToolError(f"invalid report: {exc}") from None
    await store_report(ctx.store, ctx.trace_id, report, ends_run=True)
    return "Report submitted; an independent validator will check it against your trajectory. Your run ends here."


async def review_task(ctx: ToolContext, child_trace_id: str, decision: ReviewDecision, feedback: str = "") -> str:
    """Review one child's report: accept, revise (it continues with your feedback), replan, split or fail.

    Args:
        child_trace_id: The child whose report you review.
        decision: accept | revise | replan | split | fail.
        feedback: Why; required for revise (the child receives it).
    """
    parent = await _trace(ctx)
    pending = parent.protocol.pending_reviews
    if child_trace_id not in pending:
        raise ToolError(f"{child_trace_id!r} has no report waiting for your review; pending: {pending or 'none'}")
    if decision == "revise" and not feedback.strip():
        raise ToolError("decision 'revise' needs feedback telling the child what to change")
    review = TaskReview(child_trace_id=child_trace_id, decision=decision, feedback=feedback.strip())
    child = await _trace(ctx, child_trace_id)
    changes: dict[str, object] = {"review": review}
    if decision == "revise":
        # The revision reopens the child: its review and the cleared report are one write
        # (continue_child then finds nothing to clear).
        changes.update(ended_by=None, report=None)
    await update_protocol(ctx.store, child_trace_id, trace=child, **changes)
    if decision == "revise":
        await append_review(ctx.store, ctx.trace_id, review, still_pending=True, parent=parent)
        return await continue_child(ctx, child.trace_id, None, feedback=feedback.strip())
    parent = await append_review(ctx.store, ctx.trace_id, review, still_pending=False, parent=parent)
    left = parent.protocol.pending_reviews
    if not left and ctx.goal_id is not None:
        await ctx.store.update_goal(ctx.trace_id, ctx.goal_id, status="in_progress")
    follow = {
        "accept": "Report accepted.",
        "replan": "Report rejected; plan a different approach (new children count against your quota).",
        "split": "Report rejected; split the task into smaller briefs.",
        "fail": "Report rejected as failed; decide whether your own task can still succeed.",
    }[decision]
    return f"{follow} Pending reviews: {', '.join(left) if left else 'none'}."


async def read_context_ref(ctx: ToolContext, ref_id: str) -> str:
    """Read a context reference your parent granted you (an immutable snapshot).

    Args:
        ref_id: The id listed under "Context refs granted to you".
    """
    trace = await _trace(ctx)
    refs = trace.protocol.context_access.refs
    if ref_id not in refs:
        raise ToolError(f"context ref {ref_id!r} is not granted to this agent; granted: {sorted(refs) or 'none'}")
    ref = refs[ref_id]
    if hashlib.sha256(ref.content.encode()).hexdigest() != ref.sha256:
        raise ToolError(f"context ref {ref_id!r} failed its hash check; it was altered after it was granted")
    return f"[{ref_id}] {ref.title} ({ref.kind} from {ref.source})\n{ref.content}"


async def read_trajectory(ctx: ToolContext, trace_id: str | None = None, offset: int = 0, limit: int = 40) -> str:
    """Read the persisted main path of the trace under validation (or one of its descendants).

    Args:
        trace_id: Defaults to the validation target; a descendant of it may be read too.
        offset: Messages to skip.
        limit: Messages to return (at most 100).
    """
    me = await _trace(ctx)
    assignment = me.protocol.validator
    target_id = assignment.target_trace_id if assignment is not None else None
    if not target_id:
        raise ToolError("read_trajectory is a validator tool; this trace validates nothing")
    wanted = trace_id or target_id
    if wanted != target_id and not wanted.startswith(target_id + "@"):
        raise ToolError(f"{wanted!r} is neither the validation target {target_id!r} nor one of its descendants")
    target = await _same_tree(ctx, wanted, mine=me)
    messages = await ctx.store.get_main_path_messages(target.trace_id, target.head_sequence)
    rows = []
    for message in messages[offset : offset + max(1, min(limit, 100))]:
        if message.role == "system":
            continue
        label = message.role + (f" ({message.tool_name})" if message.tool_name else "")
        calls = "; ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        text = message.text[:MAX_TRAJECTORY_CHARS]
        rows.append(f"[{message.message_id}] {label}: {text}{' | calls: ' + calls if calls else ''}")
    return f"Trajectory of {target.trace_id} ({len(messages)} messages, status {target.status}):\n" + "\n".join(rows)


async def read_artifact(ctx: ToolContext, message_id: str) -> str:
    """Resolve an artifact reference of the target (hash-checked against its report).

    Args:
        message_id: The artifact's message id.
    """
    trace_id, _ = parse_message_id(message_id)
    owner = await _same_tree(ctx, trace_id)
    message = await ctx.store.get_message(message_id)
    if message is None:
        raise ToolError(f"artifact {message_id!r} does not exist")
    digest = hashlib.sha256(message.text.encode()).hexdigest()
    report = owner.protocol.report
    claimed = [a for a in (report.artifacts if report is not None else []) if a.message_id == message_id]
    check = ""
    if claimed and claimed[0].sha256 and claimed[0].sha256 != digest:
        check = " HASH MISMATCH: the message changed after the report referenced it."
    return f"Artifact {message_id} (sha256 {digest[:16]}…){check}\n{message.text[:20000]}"


async def submit_validation(ctx: ToolContext, verdicts: list[VerdictInput], summary: str = "") -> str:
    """Submit your verdict per completion criterion; your run ends after this call.

    Args:
        verdicts: One entry per criterion number: pass, fail or unknown, with evidence.
        summary: One or two sentences on the whole judgement.
    """
    me = await _trace(ctx)
    assignment = me.protocol.validator
    if assignment is None:
        raise ToolError("submit_validation is a validator tool; this trace validates nothing")
    criteria = list(assignment.criteria)
    judged: dict[int, VerdictInput] = {}
    for item in verdicts:
        if not 1 <= item.criterion <= len(criteria):
            raise ToolError(f"criterion {item.criterion} does not exist; criteria are numbered 1..{len(criteria)}")
        judged[item.criterion] = item
    rows = [
        CriterionVerdict(criterion=c, verdict=judged[i].verdict if i in judged else "unknown",
                         evidence=judged[i].evidence if i in judged else "not judged")
        for i, c in enumerate(criteria, start=1)
    ]
    result = ValidationResult(
        scope=assignment.scope, target_trace_id=assignment.target_trace_id,
        validator_trace_id=me.trace_id, verdict=aggregate_verdict([r.verdict for r in rows]), criteria=rows, summary=summary,
    )
    await update_protocol(ctx.store, ctx.trace_id, trace=me, validation=result,
                          ended_by=EndedBy(tool="submit_validation", summary=f"verdict: {result.verdict}"))
    return f"Validation submitted: {result.verdict}."


def register_protocol_tools(registry: ToolRegistry) -> ToolRegistry:
    """Add the recursive protocol and validator tools to a registry and return it."""
    for tool in (submit_report, review_task, read_context_ref, read_trajectory, read_artifact, submit_validation):
        registry.register(tool, category="protocol")
    return registry
