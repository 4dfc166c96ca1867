"""What a recursive child receives (SPEC A9): a normalized brief, the anchor, lineage and refs.

A child never receives its parent's history, unfiltered tool results or runner internals.
Context references are immutable snapshots granted edge by edge: a parent can grant a message
of its own trace, an accepted child report, or a ref it was itself granted.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import ValidationError

from cyber_agent.protocol.mode import MAX_CONTEXT_REFS
from cyber_agent.trace.protocol_records import MAX_ITEMS, RootTaskAnchor, TaskBrief
from cyber_agent.errors import ToolArgumentError
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.state import ContextRef
from cyber_agent.trace.trace_id import parse_message_id

__all__ = [
    "build_child_task_message",
    "grant_context_refs",
    "normalize_task_brief",
    "task_briefs_match",
]

MAX_REF_CHARS = 20_000


def normalize_task_brief(raw: Any, *, parent_brief: TaskBrief | None = None, anchor: RootTaskAnchor | None = None) -> TaskBrief:
    """Validate a brief from model input and append the hard constraints it inherits."""
    if not isinstance(raw, (dict, TaskBrief)):
        raise ToolArgumentError(f"task_brief must be an object with objective and completion_criteria, got {type(raw).__name__}")
    try:
        brief = raw if isinstance(raw, TaskBrief) else TaskBrief.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'task_brief'}: {e['msg']}" for e in exc.errors())
        raise ToolArgumentError(
            f"invalid task_brief: {problems}. Required: objective (text), completion_criteria (non-empty list of "
            "checkable statements); optional: reason, expected_outputs, constraints, context_refs"
        ) from None
    if len(brief.context_refs) > MAX_CONTEXT_REFS:
        raise ToolArgumentError(f"task_brief.context_refs may grant at most {MAX_CONTEXT_REFS} refs (got {len(brief.context_refs)})")
    inherited = list(anchor.constraints) if anchor else []
    if parent_brief is not None:
        inherited += parent_brief.constraints
    constraints = list(brief.constraints)
    for item in inherited:
        if item not in constraints:
            constraints.append(item)
    if len(constraints) > MAX_ITEMS:
        # The stored brief is read back as a TaskBrief (revisions, grandchildren); it must stay valid.
        raise ToolArgumentError(
            f"task_brief.constraints: {len(brief.constraints)} of your own plus {len(constraints) - len(brief.constraints)} "
            f"inherited hard constraints exceed the limit of {MAX_ITEMS}; drop some of your own (inherited ones always apply)"
        )
    return brief.model_copy(update={"constraints": constraints})


def _key(text: str) -> str:
    return " ".join(text.lower().split())


def task_briefs_match(a: TaskBrief, b: TaskBrief) -> bool:
    """True when two briefs describe the same task (a revision), False for a new task."""
    return _key(a.objective) == _key(b.objective) and sorted(map(_key, a.completion_criteria)) == sorted(
        map(_key, b.completion_criteria)
    )


def _snapshot(ref_id: str, kind: Literal["message", "report"], source: str, title: str, content: str) -> ContextRef:
    content = content[:MAX_REF_CHARS]
    return ContextRef(ref_id=ref_id, kind=kind, source=source, title=title, content=content,
                      sha256=hashlib.sha256(content.encode()).hexdigest(), chars=len(content))


async def grant_context_refs(store: TraceStore, parent: Trace, refs: list[str | dict[str, str]], child_index: int) -> dict[str, ContextRef]:
    """Resolve the refs a parent grants into immutable snapshots for one child; refuse what it cannot grant."""
    held = dict(parent.protocol.context_access.refs)
    root = parent.root_id
    granted: dict[str, ContextRef] = {}
    taken = set(held)
    for index, ref in enumerate(refs, start=1):
        # A new snapshot never takes the id of a ref the parent holds: it may be re-granted alongside.
        ref_id, bump = f"ref-{child_index}-{index}", 0
        while ref_id in taken or ref_id in granted:
            bump += 1
            ref_id = f"ref-{child_index}-{index}.{bump}"
        if isinstance(ref, str):
            if ref not in held:
                raise ToolArgumentError(f"context ref {ref!r} is not granted to this agent; it holds: {sorted(held) or 'none'}")
            granted[ref] = held[ref]
            continue
        title = str(ref.get("title", ""))
        if "message_id" in ref:
            trace_id, _ = parse_message_id(ref["message_id"])
            if trace_id != parent.trace_id:
                raise ToolArgumentError(f"message {ref['message_id']!r} is not in this agent's own trace; grant only your own messages")
            message = await store.get_message(ref["message_id"])
            if message is None:
                raise ToolArgumentError(f"message {ref['message_id']!r} does not exist")
            granted[ref_id] = _snapshot(ref_id, "message", message.message_id, title or message.description, message.text)
        elif "report_of" in ref:
            child = await store.get_trace(ref["report_of"])
            if child is None or child.parent_trace_id != parent.trace_id or child.root_id != root:
                raise ToolArgumentError(f"{ref['report_of']!r} is not a child of this agent; grant reports of your own children")
            report = child.protocol.report
            if report is None:
                raise ToolArgumentError(f"child {ref['report_of']!r} has no report to grant")
            text = json.dumps(report.model_dump(mode="json"), ensure_ascii=False)
            granted[ref_id] = _snapshot(ref_id, "report", child.trace_id, title or "report", text)
        else:
            raise ToolArgumentError(f"context ref {ref!r}: use a ref id you hold, {{'message_id': ...}} or {{'report_of': child_trace_id}}")
    return granted


def build_child_task_message(*, brief: TaskBrief, anchor: RootTaskAnchor | None, lineage: dict[str, Any], refs: dict[str, ContextRef]) -> str:
    """Render what the child sees as its task: the brief, the anchor, lineage and the refs it may read."""
    lines = ["# Task brief", f"Objective: {brief.objective}"]
    if brief.reason:
        lines.append(f"Reason: {brief.reason}")
    lines.append("Completion criteria:")
    lines += [f"{i}. {c}" for i, c in enumerate(brief.completion_criteria, start=1)]
    if brief.expected_outputs:
        lines.append("Expected outputs: " + "; ".join(brief.expected_outputs))
    if brief.constraints:
        lines.append("Hard constraints:")
        lines += [f"- {c}" for c in brief.constraints]
    if anchor is not None:
        lines += ["", "# Root task (context only; your job is the brief above)", f"Objective: {anchor.objective}"]
    lines += ["", "# Lineage", ", ".join(f"{k}={v}" for k, v in lineage.items())]
    if refs:
        lines += ["", "# Context refs granted to you (read with read_context_ref)"]
        lines += [f"- {ref_id}: {ref.title} ({ref.kind}, {ref.chars} chars)" for ref_id, ref in refs.items()]
    lines += ["", "When done, call submit_report with outcome, summary, outputs, evidence and open_issues."]
    return "\n".join(lines)
