"""Recursive delegation (SPEC A4, A5, A7, A8, A9): create children from briefs, run, validate.

Limits are checked for the whole batch before anything is created: depth 1..5, at most six
direct children per parent counted cumulatively, and the tree's agent budget (reserved all or
nothing; reservations of children never created are rolled back). Children run sequentially
by default or under a semaphore of `max_parallel_children`; results keep input order. A child
whose run raises gets a runner-written failed report judged `fail` and its siblings run on; a
child never created (the interrupt fence) releases its reservation. Each
child runs through the runner's `ProtocolRunner.run_child` (`cyber_agent/protocol/ports.py`; config
inherited from the parent's effective config, events in pairs, revisions included). Every child is registered before it runs so a stop of any ancestor reaches it, and a queued child of
a stopped parent never calls the model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from cyber_agent.errors import BudgetExceededError, ToolError, ToolRefusedError
from cyber_agent.protocol.briefs import build_child_task_message, grant_context_refs, normalize_task_brief, task_briefs_match
from cyber_agent.protocol.mode import MAX_CHILDREN_PER_PARENT
from cyber_agent.protocol.ports import ChildResult, ChildSetup, ChildSpec, Completion, protocol_runner
from cyber_agent.protocol.state import append_validation, report_changes, update_protocol
from cyber_agent.protocol.tool_rights import child_tool_snapshot
from cyber_agent.protocol.validation import render_validation, run_validation
from cyber_agent.tools.context import ToolContext
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocol_records import RootTaskAnchor, TaskBrief, TaskReport, ValidationResult
from cyber_agent.trace.state import ContextAccess, ContextRef, ProtocolState
from cyber_agent.trace.trace_id import new_sub_trace_id, parse_trace_id

__all__ = ["continue_child", "render_outcome", "run_recursive_agents"]


async def _root_of(ctx: ToolContext, trace: Trace) -> Trace:
    """The tree's root trace (the anchor and the scheduling policy live there)."""
    root_id = trace.root_id
    root = trace if root_id == trace.trace_id else await ctx.store.get_trace(root_id)
    return root or trace


def _anchor_of(root: Trace) -> RootTaskAnchor | None:
    return root.root_setup.anchor if root.root_setup is not None else None


def _schedule(root: Trace) -> tuple[str, int]:
    if root.root_setup is None:
        return "sequential", 2
    execution = root.root_setup.child_execution
    return execution.mode, execution.max_parallel_children


async def _finish_child(ctx: ToolContext, child_id: str, brief: TaskBrief) -> dict[str, Any]:
    """After a child run: make sure it has a report, then validate it independently."""
    store, runner = ctx.store, protocol_runner(ctx)
    child = await store.get_trace(child_id)
    assert child is not None
    report = child.protocol.report
    changes: dict[str, Any] = {}
    if child.status != "completed" or report is None:
        reason = child.error_message or f"the child ended {child.status} without a report"
        report = TaskReport(outcome="failed", summary=reason, submitted_by="runner")
        changes = report_changes(report)  # stored with its verdict: one write of the child
    if report.outcome == "failed" and report.submitted_by == "runner":
        validation = ValidationResult(scope="criteria", target_trace_id=child_id, verdict="fail", summary=report.summary)
        child = await append_validation(store, child_id, validation, **changes)
    else:
        validation = await run_validation(runner, target=child, scope="criteria", criteria=brief.completion_criteria,
                                          report=report, answer=None)
    return {"trace_id": child_id, "status": child.status, "report": report, "validation": validation}


async def _failed_outcome(ctx: ToolContext, child_id: str, exc: Exception, *, created: bool) -> dict[str, Any]:
    """The outcome of a child whose run (or judging) raised: a runner-written failed report judged `fail`.

    A child never created (refused by the interrupt fence, or it could not start) has no trace to
    write to: its outcome says so and its agent reservation is released by the batch.
    """
    error = str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
    report = TaskReport(outcome="failed", summary=error if not created else f"the child crashed: {error}",
                        submitted_by="runner")
    validation = ValidationResult(scope="criteria", target_trace_id=child_id, verdict="fail", summary=report.summary)
    status = "not created"
    if created:
        child = await ctx.store.get_trace(child_id)
        if child is not None:
            child = await append_validation(ctx.store, child_id, validation, **report_changes(report))
            status = child.status
    return {"trace_id": child_id, "status": status, "report": report, "validation": validation}


def _judged(ctx: ToolContext, child_id: str, brief: TaskBrief, out: dict[str, Any]) -> Completion:
    """The completion of a child's run: its report judged; `out` receives the outcome for the parent."""
    async def complete(result: ChildResult) -> dict[str, Any]:
        out.update(await _finish_child(ctx, child_id, brief))
        return {"summary": out["report"].summary, "outcome": out["report"].outcome, "verdict": out["validation"].verdict}
    return complete


def render_outcome(outcome: dict[str, Any]) -> str:
    """Render one child outcome (report + validation) for its parent."""
    report: TaskReport = outcome["report"]
    lines = [f"Child {outcome['trace_id']} [{outcome['status']}] outcome={report.outcome}: {report.summary}"]
    if report.outputs:
        lines += [f"  output: {item}" for item in report.outputs]
    if report.open_issues:
        lines += [f"  open issue: {item}" for item in report.open_issues]
    lines.append(render_validation(outcome["validation"]))
    return "\n".join(lines)


async def _mark_pending(ctx: ToolContext, child_ids: list[str]) -> None:
    parent = await ctx.store.get_trace(ctx.trace_id)
    protocol = parent.protocol if parent else ProtocolState()
    pending = [c for c in protocol.pending_reviews if c not in child_ids] + child_ids
    children = list(dict.fromkeys([*protocol.children, *child_ids]))
    await update_protocol(ctx.store, ctx.trace_id, trace=parent, pending_reviews=pending, children=children)  # no write if unchanged
    if ctx.goal_id is not None:
        await ctx.store.update_goal(ctx.trace_id, ctx.goal_id, status="pending_review")


async def run_recursive_agents(
    ctx: ToolContext, raw_briefs: Sequence[TaskBrief | dict[str, Any]], *, mode: str, continue_from: str | None,
    agent_type: str | None = None,
) -> str:
    """Validate, create and run a batch of recursive children; return their reports and verdicts."""
    store, runner = ctx.store, protocol_runner(ctx)
    parent = await store.get_trace(ctx.trace_id)
    assert parent is not None
    depth = parent.lineage.depth
    await runner.check_spawn(parent, workspace=ctx.run_config.workspace if ctx.run_config else None, agent_type=agent_type)
    parent_brief = parent.protocol.brief
    root = await _root_of(ctx, parent)
    anchor = _anchor_of(root)
    briefs = [normalize_task_brief(raw, parent_brief=parent_brief, anchor=anchor) for raw in raw_briefs]
    if continue_from is not None:
        if len(briefs) != 1:
            raise ToolError("continue_from revises one existing child: pass a single task_brief object")
        return await continue_child(ctx, continue_from, briefs[0])
    count = len(briefs)
    async with runner.lock(f"children:{ctx.trace_id}"):
        parent = await store.get_trace(ctx.trace_id)
        assert parent is not None
        created_before = parent.lineage.child_count
        if created_before + count > MAX_CHILDREN_PER_PARENT:
            raise ToolRefusedError(
                "children",
                f"child quota: this agent has created {created_before} of {MAX_CHILDREN_PER_PARENT} direct children; "
                f"a batch of {count} would exceed it, so nothing was created. Revise existing children with "
                "continue_from, or do the work yourself"
            )
        granted = [await grant_context_refs(store, parent, b.context_refs, created_before + i + 1) for i, b in enumerate(briefs)]
        budget = await runner.budget_for(parent)
        try:
            await budget.reserve_agents(count)
        except BudgetExceededError as exc:
            raise ToolRefusedError(exc.resource, f"tree budget refused {count} new agent(s): {exc}; nothing was created") from None
        await store.update_trace(ctx.trace_id, lineage=parent.lineage.model_copy(update={"child_count": created_before + count}))
    ids = [new_sub_trace_id(ctx.trace_id, mode, created_before + i + 1) for i in range(count)]
    snapshot = child_tool_snapshot(ctx.allowed_tools, depth + 1, runner.tool_names())
    for child_id in ids:
        runner.register_recursive_child(child_id, ctx.trace_id)
    if ctx.goal_id is not None:
        tree = await store.get_goal_tree(ctx.trace_id)
        goal = tree.find(ctx.goal_id) if tree else None
        if goal is not None:
            await store.update_goal(ctx.trace_id, goal.id, type="agent_call", status="waiting_children",
                                    sub_trace_ids=[*goal.sub_trace_ids, *ids])
    execution_mode, max_parallel = _schedule(root)
    semaphore = asyncio.Semaphore(max_parallel if execution_mode == "parallel" else 1)
    created: set[str] = set()

    async def run_one(index: int) -> dict[str, Any]:
        try:
            return await run_guarded(index)
        except Exception as exc:  # noqa: BLE001 - one child's failure is its own report; the batch goes on
            return await _failed_outcome(ctx, ids[index], exc, created=ids[index] in created)

    async def run_guarded(index: int) -> dict[str, Any]:
        child_id, brief = ids[index], briefs[index]
        async with semaphore:
            lineage = {"parent_trace_id": ctx.trace_id, "root_trace_id": parent.root_id, "agent_depth": depth + 1}
            refs = granted[index]
            setup = ChildSetup(tool_snapshot=snapshot, created_by_tool="agent", protocol=ProtocolState(
                brief=brief, context_access=ContextAccess(refs=refs, chars=sum(r.chars for r in refs.values())),
            ), parent=parent, root=root)
            message = build_child_task_message(brief=brief, anchor=anchor, lineage=lineage, refs=refs)
            outcome: dict[str, Any] = {}
            await runner.run_child(ChildSpec(
                parent_trace_id=ctx.trace_id, trace_id=child_id, agent_type=agent_type or mode,
                messages=[{"role": "user", "content": message}], inherit=ctx.run_config, parent_goal_id=ctx.goal_id,
                setup=setup, workspace=str(ctx.workspace), task=brief.objective,
                role_fields=frozenset({"max_iterations"}) if agent_type else frozenset(),
            ), complete=_judged(ctx, child_id, brief, outcome), on_started=lambda: created.add(child_id))
            return outcome

    try:
        async with asyncio.TaskGroup() as group:
            jobs = [group.create_task(run_one(i)) for i in range(count)]
    finally:
        # Only reservations of children that were never created are rolled back.
        await budget.release_agents(count - len(created))
        for child_id in ids:
            runner.release_child(child_id)
    outcomes = [job.result() for job in jobs]
    await _mark_pending(ctx, [child_id for child_id in ids if child_id in created])
    lines = [render_outcome(o) for o in outcomes]
    lines.append("Review each report with review_task(child_trace_id, decision, feedback) before anything else: "
                 "accept, revise (the same child continues with your feedback), replan, split or fail.")
    return "\n\n".join(lines)


async def continue_child(ctx: ToolContext, child_id: str, brief: TaskBrief | None, feedback: str | None = None) -> str:
    """Continue an existing child (a revision: no new quota), then validate its new report."""
    store, runner = ctx.store, protocol_runner(ctx)
    child = await store.get_trace(child_id)
    if child is None or child.parent_trace_id != ctx.trace_id or child.lineage.created_by_tool != "agent":
        raise ToolError(f"{child_id!r} is not a child of this agent; continue_from takes one of your children's trace ids")
    original = child.protocol.brief
    if original is None:
        raise ToolError(f"{child_id!r} has no task brief to revise; start a new child without continue_from")
    if brief is not None and not task_briefs_match(original, brief):
        raise ToolError(
            "continue_from revises the same task, but this brief has a different objective or completion criteria; "
            "start a new child without continue_from for a new task"
        )
    changes: dict[str, Any] = {"ended_by": None, "report": None}
    note = f"[parent review] Revise your work. Feedback: {feedback}" if feedback else "[parent] Continue this task with the revised brief."
    revised = original
    if brief is not None:
        # The revised brief (same objective and criteria) replaces the stored one, and the refs it
        # grants join the child's own: the child sees both in the note below.
        parent = await store.get_trace(ctx.trace_id)
        assert parent is not None
        granted = await grant_context_refs(store, parent, brief.context_refs, _sequence_of(child_id))
        refs = _merge_refs(child.protocol.context_access.refs, granted)
        changes["brief"] = revised = brief
        changes["context_access"] = ContextAccess(refs=refs, chars=sum(r.chars for r in refs.values()))
        new_refs = {ref_id: refs[ref_id] for ref_id in refs if ref_id not in child.protocol.context_access.refs}
        lineage = {"parent_trace_id": ctx.trace_id, "root_trace_id": child.root_id, "agent_depth": child.lineage.depth}
        note += "\n\n" + build_child_task_message(brief=brief, anchor=None, lineage=lineage, refs=new_refs)
    await update_protocol(store, child_id, trace=child, **changes)
    runner.register_recursive_child(child_id, ctx.trace_id, queued=False)
    outcome: dict[str, Any] = {}
    try:
        await runner.run_child(ChildSpec(
            parent_trace_id=ctx.trace_id, trace_id=child_id, agent_type=child.agent_type or "delegate",
            messages=[{"role": "user", "content": note}], parent_goal_id=child.parent_goal_id,
            task=revised.objective, revision=True,
        ), complete=_judged(ctx, child_id, revised, outcome))
    finally:
        runner.release_child(child_id)
    await _mark_pending(ctx, [child_id])
    return render_outcome(outcome) + "\n\nReview it again with review_task."


def _sequence_of(child_id: str) -> int:
    """The T2 sequence number of a sub-trace id (`{parent}@{mode}-{timestamp}-{seq}`)."""
    return parse_trace_id(child_id).seq or 1


def _merge_refs(held: dict[str, ContextRef], granted: dict[str, ContextRef]) -> dict[str, ContextRef]:
    """The child's refs plus newly granted ones; a new snapshot never takes the id of a different held one."""
    merged = dict(held)
    for ref_id, ref in granted.items():
        if merged.get(ref_id) in (None, ref):
            merged[ref_id] = ref
            continue
        bump = 1
        while f"{ref_id}.r{bump}" in merged:
            bump += 1
        new_id = f"{ref_id}.r{bump}"
        merged[new_id] = ref.model_copy(update={"ref_id": new_id})
    return merged
