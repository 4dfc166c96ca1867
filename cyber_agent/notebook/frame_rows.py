"""Rows of the analysis frames, built from JSON-mode trace records (see `frames.py` for the schema).

Pure functions over `TraceRecord`s: no store access, no pandas. Each returns the columns of
its schema as a dict of lists, or — for the frames with one row per message or event — a list
of row tuples in schema order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cyber_agent.notebook.records import TraceRecord, parse_time

__all__ = [
    "event_rows",
    "goal_rows",
    "message_and_call_rows",
    "report_rows",
    "trace_label",
    "trace_rows",
    "usage_rows",
    "validation_rows",
]

Columns = dict[str, list[Any]]
Rows = list[tuple[Any, ...]]


def _columns(names: Sequence[str]) -> Columns:
    return {name: [] for name in names}


def trace_role(meta: dict[str, Any]) -> str:
    """`validator` for validator traces, else the agent type (main, explore, delegate, ...)."""
    context = meta.get("context") or {}
    if context.get("created_by_tool") == "validator":
        return "validator"
    return str(meta.get("agent_type") or "agent")


def trace_label(meta: dict[str, Any]) -> str:
    """A short name: the role for a root, `{mode} {seq}` for a T2 sub-trace id."""
    trace_id = str(meta["trace_id"])
    role = trace_role(meta)
    if meta.get("parent_trace_id") and "@" in trace_id:
        parts = trace_id.rsplit("@", 1)[1].split("-")
        if len(parts) == 3 and parts[2].isdigit():
            return f"{parts[0]} {int(parts[2])}"
    return role


def _seconds(start: object, end: object) -> float | None:
    if not start or not end:
        return None
    return (parse_time(end) - parse_time(start)).total_seconds()


class TreeIndex:
    """Depth, root and order of every trace of a record list (parents come before children)."""

    def __init__(self, records: Sequence[TraceRecord]) -> None:
        self.depth: dict[str, int] = {}
        self.root: dict[str, str] = {}
        self.position: dict[str, int] = {}
        self.meta: dict[str, dict[str, Any]] = {}
        for position, record in enumerate(records):
            meta, trace_id = record.trace, record.trace_id
            context = record.context
            parent = meta.get("parent_trace_id")
            self.meta[trace_id] = meta
            self.position[trace_id] = position
            computed_depth = self.depth[parent] + 1 if parent in self.depth else 0
            depth = context.get("agent_depth")
            self.depth[trace_id] = depth if isinstance(depth, int) else computed_depth
            root = context.get("root_trace_id")
            self.root[trace_id] = root if isinstance(root, str) else self.root.get(parent, trace_id)


def trace_rows(records: Sequence[TraceRecord], index: TreeIndex, names: Sequence[str]) -> Columns:
    """One row per trace."""
    cols = _columns(names)
    for record in records:
        meta, context, trace_id = record.trace, record.context, record.trace_id
        end = meta.get("completed_at") or meta.get("updated_at")
        values = {
            "trace_id": trace_id,
            "root_trace_id": index.root[trace_id],
            "parent_trace_id": meta.get("parent_trace_id"),
            "parent_goal_id": meta.get("parent_goal_id"),
            "depth": index.depth[trace_id],
            "position": index.position[trace_id],
            "label": trace_label(meta),
            "role": trace_role(meta),
            "agent_type": meta.get("agent_type"),
            "agent_mode": context.get("agent_mode"),
            "created_by_tool": context.get("created_by_tool"),
            "is_validator": context.get("created_by_tool") == "validator",
            "validation_scope": context.get("validation_scope"),
            "mode": meta.get("mode"),
            "status": meta.get("status"),
            "task": meta.get("task"),
            "model": meta.get("model"),
            "name": meta.get("name"),
            "total_messages": meta.get("total_messages", 0),
            "total_prompt_tokens": meta.get("total_prompt_tokens", 0),
            "total_completion_tokens": meta.get("total_completion_tokens", 0),
            "total_cached_tokens": meta.get("total_cached_tokens", 0),
            "total_tokens": meta.get("total_tokens", 0),
            "total_cost": meta.get("total_cost", 0.0),
            "head_sequence": meta.get("head_sequence", 0),
            "current_goal_id": meta.get("current_goal_id"),
            "result_summary": meta.get("result_summary"),
            "error_message": meta.get("error_message"),
            "created_at": meta.get("created_at"),
            "updated_at": meta.get("updated_at"),
            "completed_at": meta.get("completed_at"),
            "duration_seconds": _seconds(meta.get("created_at"), end),
            "context": context,
            "resource_usage": record.resource_usage,
        }
        for name in names:
            cols[name].append(values[name])
    return cols


def _main_path(messages: list[dict[str, Any]], head: int) -> set[int]:
    parents = {m.get("sequence"): m.get("parent_sequence") for m in messages}
    path: set[int] = set()
    sequence: int | None = head or None
    while sequence is not None and sequence not in path and sequence in parents:
        path.add(sequence)
        sequence = parents[sequence]
    return path


def message_and_call_rows(
    records: Sequence[TraceRecord], message_names: Sequence[str], call_names: Sequence[str]
) -> tuple[Rows, Rows]:
    """One row per message, and one row per tool call (joined to its result message).

    Rows are tuples in the order of `SCHEMAS["messages"]` / `SCHEMAS["tool_calls"]` (checked
    by the frame builder): this loop runs once per message, so it stays flat.
    """
    msgs: Rows = []
    calls: Rows = []
    for record in records:
        trace_id = record.trace_id
        main = _main_path(record.messages, int(record.trace.get("head_sequence") or 0))
        results: dict[str, list[dict[str, Any]]] = {}
        for message in record.messages:
            if message.get("role") == "tool" and message.get("tool_call_id"):
                results.setdefault(message["tool_call_id"], []).append(message)
        for message in record.messages:
            get = message.get
            content = get("content")
            if isinstance(content, dict):
                text, tool_calls = content.get("text"), content.get("tool_calls") or []
            else:
                text, tool_calls = content, []
            extra = get("metadata") or {}
            prompt, completion = get("prompt_tokens", 0), get("completion_tokens", 0)
            sequence = get("sequence", 0)
            is_error = extra.get("is_error")
            msgs.append((
                trace_id, get("message_id"), sequence, get("role"), get("goal_id"), get("parent_sequence"), get("branch"),
                sequence in main, text, len(tool_calls), ",".join(c.get("name", "") for c in tool_calls) or None,
                get("tool_call_id"), get("tool_name"), bool(is_error) if is_error is not None else None,
                get("description"), prompt, completion, get("cached_tokens", 0), prompt + completion, get("cost", 0.0),
                get("duration_ms"), extra.get("model"), get("created_at"),
            ))
            for position, call in enumerate(tool_calls):
                result = next((r for r in results.get(call.get("id"), []) if r.get("sequence", 0) > sequence), None)
                result_meta = (result.get("metadata") or {}) if result else {}
                result_text = result.get("content") if result else None
                calls.append((
                    trace_id, get("message_id"), sequence, position, call.get("id"), call.get("name"),
                    call.get("arguments") or {}, result.get("sequence") if result else None,
                    bool(result_meta.get("is_error")) if result else None,
                    len(result_text) if isinstance(result_text, str) else None,
                    result.get("duration_ms") if result else None, get("created_at"),
                ))
    return msgs, calls


def goal_rows(records: Sequence[TraceRecord], names: Sequence[str]) -> Columns:
    """One row per goal, in depth-first plan order."""
    cols = _columns(names)
    for record in records:
        tree = record.goal_tree or {}
        goals = tree.get("goals") or []
        by_parent: dict[str | None, list[dict[str, Any]]] = {}
        for goal in goals:
            by_parent.setdefault(goal.get("parent_id"), []).append(goal)
        order: list[tuple[dict[str, Any], int]] = []
        stack = [(g, 0) for g in reversed(by_parent.get(None, []))]
        while stack:
            goal, depth = stack.pop()
            order.append((goal, depth))
            stack.extend((c, depth + 1) for c in reversed(by_parent.get(goal.get("id"), [])))
        for position, (goal, depth) in enumerate(order):
            own, total = goal.get("self_stats") or {}, goal.get("cumulative_stats") or {}
            subs = goal.get("sub_trace_ids") or []
            values = {
                "trace_id": record.trace_id, "goal_id": goal.get("id"), "parent_goal_id": goal.get("parent_id"),
                "depth": depth, "position": position, "description": goal.get("description"),
                "reason": goal.get("reason"), "type": goal.get("type"), "status": goal.get("status"),
                "summary": goal.get("summary"), "n_sub_traces": len(subs), "sub_trace_ids": list(subs),
                "self_messages": own.get("message_count", 0), "self_tokens": own.get("total_tokens", 0),
                "self_cost": own.get("total_cost", 0.0), "cumulative_messages": total.get("message_count", 0),
                "cumulative_tokens": total.get("total_tokens", 0), "cumulative_cost": total.get("total_cost", 0.0),
                "is_current": goal.get("id") == tree.get("current_id"),
                "created_at": goal.get("created_at"), "completed_at": goal.get("completed_at"),
            }
            for name in names:
                cols[name].append(values[name])
    return cols


def event_rows(records: Sequence[TraceRecord], names: Sequence[str]) -> Rows:
    """One row per event (tuples in schema order); common payload fields are lifted into columns."""
    out: Rows = []
    for record in records:
        trace_id = record.trace_id
        for event in record.events:
            payload = event.get("payload") or {}
            kind = event.get("type")
            goal = payload.get("goal")
            message = payload.get("message")
            out.append((
                trace_id, event.get("event_id"), kind, event.get("created_at"),
                payload.get("goal_id") or (goal.get("id") if isinstance(goal, dict) else None),
                message.get("sequence") if isinstance(message, dict) else None,
                payload.get("trace_id") if kind in ("sub_trace_started", "sub_trace_completed") else None,
                payload.get("status"), payload,
            ))
    return out


def usage_rows(records: Sequence[TraceRecord], index: TreeIndex, names: Sequence[str], *, with_messages: bool) -> Columns:
    """One row per trace: what the agent consumed."""
    cols = _columns(names)
    for record in records:
        meta, trace_id = record.trace, record.trace_id
        calls = sum(1 for m in record.messages if m.get("role") == "assistant") if with_messages else None
        tools = sum(1 for m in record.messages if m.get("role") == "tool") if with_messages else None
        end = meta.get("completed_at") or meta.get("updated_at")
        values = {
            "trace_id": trace_id, "root_trace_id": index.root[trace_id], "parent": meta.get("parent_trace_id"),
            "depth": index.depth[trace_id], "role": trace_role(meta), "label": trace_label(meta),
            "status": meta.get("status"), "llm_calls": calls, "tool_calls": tools,
            "prompt_tokens": meta.get("total_prompt_tokens", 0), "completion_tokens": meta.get("total_completion_tokens", 0),
            "cached_tokens": meta.get("total_cached_tokens", 0), "tokens": meta.get("total_tokens", 0),
            "cost": meta.get("total_cost", 0.0), "duration_seconds": _seconds(meta.get("created_at"), end),
        }
        for name in names:
            cols[name].append(values[name])
    return cols


def _protocol(record: TraceRecord) -> dict[str, Any]:
    protocol = record.context.get("task_protocol")
    return protocol if isinstance(protocol, dict) else {}


def report_rows(records: Sequence[TraceRecord], index: TreeIndex, names: Sequence[str]) -> Columns:
    """One row per trace holding a TaskBrief or TaskReport (recursive mode), with the parent's review."""
    cols = _columns(names)
    reviews: dict[str, dict[str, Any]] = {}
    for record in records:
        for review in _protocol(record).get("reviews") or []:
            if isinstance(review, dict) and review.get("child_trace_id"):
                reviews[review["child_trace_id"]] = review
    for record in records:
        protocol = _protocol(record)
        brief, report = protocol.get("brief"), protocol.get("report")
        if not isinstance(brief, dict) and not isinstance(report, dict):
            continue
        brief, report = brief if isinstance(brief, dict) else {}, report if isinstance(report, dict) else {}
        review = reviews.get(record.trace_id, {})
        values = {
            "trace_id": record.trace_id, "parent_trace_id": record.trace.get("parent_trace_id"),
            "root_trace_id": index.root[record.trace_id], "depth": index.depth[record.trace_id],
            "role": trace_role(record.trace), "objective": brief.get("objective"), "brief": brief,
            "outcome": report.get("outcome"), "summary": report.get("summary"),
            "outputs": list(report.get("outputs") or []), "evidence": list(report.get("evidence") or []),
            "open_issues": list(report.get("open_issues") or []), "artifacts": list(report.get("artifacts") or []),
            "submitted_by": report.get("submitted_by"),
            "review_decision": review.get("decision"), "review_feedback": review.get("feedback"),
        }
        for name in names:
            cols[name].append(values[name])
    return cols


def validation_rows(records: Sequence[TraceRecord], names: Sequence[str]) -> Columns:
    """One row per judged criterion (one row with no criterion for a validation without any)."""
    cols = _columns(names)
    for record in records:
        for number, validation in enumerate(_protocol(record).get("validations") or []):
            if not isinstance(validation, dict):
                continue
            criteria = [c for c in validation.get("criteria") or [] if isinstance(c, dict)] or [None]
            for position, criterion in enumerate(criteria):
                criterion = criterion or {}
                values = {
                    "trace_id": validation.get("target_trace_id") or record.trace_id,
                    "validator_trace_id": validation.get("validator_trace_id"),
                    "validation_index": number, "scope": validation.get("scope"), "verdict": validation.get("verdict"),
                    "summary": validation.get("summary"),
                    "criterion_index": position if criterion else None, "criterion": criterion.get("criterion"),
                    "criterion_verdict": criterion.get("verdict"), "criterion_evidence": criterion.get("evidence"),
                    "created_at": validation.get("created_at"),
                }
                for name in names:
                    cols[name].append(values[name])
    return cols
