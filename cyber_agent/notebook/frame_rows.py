"""Rows of the analysis frames, built from JSON-mode trace records (see `frames.py` for the schema).

Pure functions over `TraceRecord`s: no store access, no pandas. Each returns the columns of
its schema as a dict of lists, or — for the frames with one row per message or event — a list
of row tuples in schema order.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
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


# Every field a persisted message has; older or foreign records missing some get these defaults.
_MESSAGE_DEFAULTS: dict[str, Any] = {
    "message_id": None, "sequence": 0, "role": None, "goal_id": None, "content": None, "tool_call_id": None,
    "tool_name": None, "parent_sequence": None, "branch": None, "description": None, "prompt_tokens": 0,
    "completion_tokens": 0, "cached_tokens": 0, "cost": 0.0, "duration_ms": None, "metadata": None,
    "created_at": None,
}


def _main_path(messages: list[dict[str, Any]], head: int) -> set[int]:
    parents = {m["sequence"]: m["parent_sequence"] for m in messages}
    path: set[int] = set()
    sequence: int | None = head or None
    while sequence is not None and sequence not in path and sequence in parents:
        path.add(sequence)
        sequence = parents[sequence]
    return path


_SIMPLE_FIELDS = (
    "message_id", "sequence", "role", "goal_id", "parent_sequence", "branch", "tool_call_id", "tool_name",
    "description", "prompt_tokens", "completion_tokens", "cached_tokens", "cost", "duration_ms", "created_at",
)
_simple = itemgetter(*_SIMPLE_FIELDS)


def message_and_call_rows(records: Sequence[TraceRecord]) -> tuple[Columns, Rows]:
    """Columns of the messages frame, and one row per tool call (joined to its result message).

    The messages frame is the big one (100k rows are common), so plain fields are gathered with
    one `itemgetter` map per trace and a transpose, both in C; only derived fields loop in Python.
    """
    columns: Columns = {name: [] for name in _SIMPLE_FIELDS}
    derived: Columns = {name: [] for name in (
        "trace_id", "on_main_path", "text", "n_tool_calls", "tool_call_names", "is_error", "model")}
    calls: Rows = []
    for record in records:
        messages = record.messages
        try:
            plain = list(zip(*map(_simple, messages)))
        except KeyError:  # an older or foreign record without some fields
            messages = [{**_MESSAGE_DEFAULTS, **m} for m in messages]
            plain = list(zip(*map(_simple, messages)))
        if not messages:
            continue
        for name, values in zip(_SIMPLE_FIELDS, plain):
            columns[name].extend(values)
        main = _main_path(messages, int(record.trace.get("head_sequence") or 0))
        derived["trace_id"].extend([record.trace_id] * len(messages))
        derived["on_main_path"].extend([m["sequence"] in main for m in messages])
        text, n_calls, names = derived["text"], derived["n_tool_calls"], derived["tool_call_names"]
        for m in messages:
            content = m["content"]
            if isinstance(content, dict):
                tool_calls = content.get("tool_calls") or ()
                text.append(content.get("text"))
                n_calls.append(len(tool_calls))
                names.append(",".join([c.get("name", "") for c in tool_calls]) or None)
            else:
                text.append(content)
                n_calls.append(0)
                names.append(None)
        extras = [m["metadata"] or {} for m in messages]
        derived["is_error"].extend([None if (e := x.get("is_error")) is None else bool(e) for x in extras])
        derived["model"].extend([x.get("model") for x in extras])
        calls.extend(_call_rows(record.trace_id, messages))
    columns.update(derived)
    columns["total_tokens"] = [a + b for a, b in zip(columns["prompt_tokens"], columns["completion_tokens"])]
    return columns, calls


def _call_rows(trace_id: str, messages: list[dict[str, Any]]) -> Rows:
    """Tool calls of one trace in schema order, each joined to the first later result with its id."""
    results: dict[str, list[dict[str, Any]]] = {}
    for message in messages:
        if message["role"] == "tool" and message["tool_call_id"]:
            results.setdefault(message["tool_call_id"], []).append(message)
    rows: Rows = []
    for message in messages:
        content = message["content"]
        if not isinstance(content, dict) or not content.get("tool_calls"):
            continue
        sequence = message["sequence"]
        for position, call in enumerate(content["tool_calls"]):
            result = None
            for candidate in results.get(call.get("id"), ()):
                if candidate["sequence"] > sequence:
                    result = candidate
                    break
            if result is None:
                joined: tuple[Any, ...] = (None, None, None, None)
            else:
                text = result["content"]
                joined = (result["sequence"], bool((result["metadata"] or {}).get("is_error")),
                          len(text) if isinstance(text, str) else None, result["duration_ms"])
            rows.append((trace_id, message["message_id"], sequence, position, call.get("id"), call.get("name"),
                         call.get("arguments") or {}, *joined, message["created_at"]))
    return rows


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
    """One row per event (tuples in schema order); common payload fields are lifted into columns.

    A `message_added` payload keeps everything but the message itself, which is the messages
    frame's row (`message_sequence`): no second copy of every message in memory.
    """
    out: Rows = []
    for record in records:
        trace_id = record.trace_id
        for event in record.events:
            payload = event.get("payload") or {}
            kind = event.get("type")
            goal = payload.get("goal")
            message = payload.get("message")
            sequence = None
            if isinstance(message, dict):
                sequence = message.get("sequence")
                payload = {k: v for k, v in payload.items() if k != "message"}
            out.append((
                trace_id, event.get("event_id"), kind, event.get("created_at"),
                payload.get("goal_id") or (goal.get("id") if isinstance(goal, dict) else None), sequence,
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
