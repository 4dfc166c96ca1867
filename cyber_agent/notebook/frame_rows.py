"""Rows of the analysis frames, built from JSON-mode trace records (see `frames.py` for the schema).

The recursive protocol's frames (reports, validations, verdicts) are built in `protocol_rows.py`.

Pure functions over `TraceRecord`s: no store access, no pandas. Each returns the columns of
its schema as a dict of lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from cyber_agent.notebook.columns import SHAPE
from cyber_agent.notebook.records import TraceRecord, parse_time
from cyber_agent.trace.goal_models import FINAL_GOAL_STATUSES
from cyber_agent.trace.models import refusal_kind

__all__ = [
    "Columns",
    "MessageTables",
    "TreeIndex",
    "event_rows",
    "goal_rows",
    "message_and_call_rows",
    "trace_label",
    "trace_role",
    "trace_rows",
    "usage_rows",
]

Columns = dict[str, list[Any]]


_SHAPE_NAMES = frozenset(column.name for column in SHAPE)


def _without_shape(names: Sequence[str]) -> list[str]:
    return [name for name in names if name not in _SHAPE_NAMES]


def _columns(names: Sequence[str]) -> Columns:
    return {name: [] for name in names}


def trace_role(meta: dict[str, Any]) -> str:
    """`validator` for validator traces, else the agent type (main, explore, delegate, ...)."""
    lineage = meta.get("lineage") or {}
    if lineage.get("created_by_tool") == "validator":
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
        self.path: dict[str, str] = {}  # as `tree_labels.trace_paths` numbers them: agents 1, 2, ..., validators v1, ...
        numbered: dict[str, list[int]] = {}
        for position, record in enumerate(records):
            meta, trace_id = record.trace, record.trace_id
            lineage = record.lineage
            parent = meta.get("parent_trace_id")
            self.meta[trace_id] = meta
            self.position[trace_id] = position
            computed_depth = self.depth[parent] + 1 if parent in self.depth else 0
            depth = lineage.get("depth")
            self.depth[trace_id] = depth if isinstance(depth, int) else computed_depth
            root = lineage.get("root_trace_id")
            self.root[trace_id] = root if isinstance(root, str) else (self.root.get(parent, trace_id) if parent else trace_id)
            if parent in self.path:
                seen = numbered.setdefault(parent, [0, 0])
                validator = trace_role(meta) == "validator"
                seen[validator] += 1
                base = "" if self.path[parent] == "root" else f"{self.path[parent]}."
                self.path[trace_id] = f"{base}{'v' if validator else ''}{seen[validator]}"
            else:
                self.path[trace_id] = "root"


def trace_rows(records: Sequence[TraceRecord], index: TreeIndex, names: Sequence[str],
               refusals: Sequence[str | None] | None = None, origin: str | None = None) -> Columns:
    """One row per trace (`refusals`: each record's last refused tool call, when messages were read;
    `origin`: the store URL or export the records came from, the `provenance` of native traces).
    The shape columns among `names` are left out (`frame_shape.py` computes them for a whole tree)."""
    names = _without_shape(names)
    cols = _columns(names)
    for number, record in enumerate(records):
        meta, lineage, trace_id = record.trace, record.lineage, record.trace_id
        validator = record.protocol.get("validator") or {}
        end = meta.get("completed_at") or meta.get("updated_at")
        values = {
            "trace_id": trace_id,
            "root_trace_id": index.root[trace_id],
            "parent_trace_id": meta.get("parent_trace_id"),
            "parent_goal_id": meta.get("parent_goal_id"),
            "depth": index.depth[trace_id],
            "position": index.position[trace_id],
            "label": trace_label(meta),
            "path": index.path[trace_id],
            "role": trace_role(meta),
            "agent_type": meta.get("agent_type"),
            "agent_mode": lineage.get("mode", "legacy"),
            "created_by_tool": lineage.get("created_by_tool"),
            "is_validator": lineage.get("created_by_tool") == "validator",
            "validation_scope": validator.get("scope"),
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
            "refusal": refusals[number] if refusals is not None else None,
            "created_at": meta.get("created_at"),
            "updated_at": meta.get("updated_at"),
            "completed_at": meta.get("completed_at"),
            "duration_seconds": _seconds(meta.get("created_at"), end),
            "context": record.context,
            "protocol": record.protocol,
            "root_setup": record.root_setup,
            "resource_usage": record.resource_usage,
            **_provenance_values(meta.get("provenance"), origin),
        }
        for name in names:
            cols[name].append(values[name])
    return cols


def _provenance_values(provenance: object, origin: str | None) -> dict[str, Any]:
    """`source`, `provenance`, `source_ids`, `missing` of a trace (`Trace.provenance`; native when None)."""
    if not isinstance(provenance, dict):
        return {"source": "native", "provenance": origin, "source_ids": None, "missing": None}
    missing = provenance.get("missing") or []
    return {"source": provenance.get("source"), "provenance": provenance.get("path"),
            "source_ids": provenance.get("ids") or {}, "missing": ",".join(missing) or None}


# Every field a persisted message has; older or foreign records missing some get these defaults.
_MESSAGE_DEFAULTS: dict[str, Any] = {
    "message_id": None, "sequence": 0, "role": None, "goal_id": None, "content": None, "tool_call_id": None,
    "tool_name": None, "parent_sequence": None, "branch": None, "description": None, "prompt_tokens": 0,
    "completion_tokens": 0, "cached_tokens": 0, "cost": 0.0, "duration_ms": None, "metadata": None,
    "created_at": None,
}

# Columns of the messages frame filled message by message, in `_add_messages`' order.
_MESSAGE_COLUMNS = (
    "message_id", "sequence", "message_role", "goal_id", "parent_sequence", "branch", "tool_call_id", "tool_name",
    "description", "prompt_tokens", "completion_tokens", "cached_tokens", "total_tokens", "cost", "duration_ms",
    "created_at", "text", "n_tool_calls", "tool_call_names", "is_error", "refused", "model", "usage_estimated",
    "cost_estimated", "cost_unpriced", "truncated", "summarized",
)
_CALL_COLUMNS = (
    "trace_id", "message_id", "sequence", "call_index", "call_id", "tool_name", "arguments", "result_sequence",
    "is_error", "refused", "truncated", "summarized", "result_chars", "duration_ms", "created_at",
)
_NO_RESULT = (None, None, None, None, None, None, None)
# The fields `_add_messages` reads, all in one C call per message.
_fields = itemgetter(
    "message_id", "sequence", "role", "goal_id", "parent_sequence", "branch", "tool_call_id", "tool_name", "description",
    "prompt_tokens", "completion_tokens", "cached_tokens", "cost", "duration_ms", "created_at", "content", "metadata",
)


class MessageTables(NamedTuple):
    """What one pass over the messages yields."""

    messages: Columns
    """Columns of the messages frame."""
    tool_calls: Columns
    """Columns of the tool-calls frame."""
    role_counts: list[tuple[int, int, int, int]]
    """(assistant messages, tool messages, estimated-cost calls, unpriced calls) of each record, in record order."""
    refusals: list[str | None]
    """The text of each record's last refused tool call (`cyber_agent/trace/models.py:is_refusal`), in record order."""


def message_and_call_rows(records: Sequence[TraceRecord]) -> MessageTables:
    """Columns of the messages frame and of the tool calls (each joined to its result message).

    The messages frame is the big one (100k rows are common) and its records are far bigger than
    the CPU caches, so each message is visited once: one pass reads every field it needs and
    appends it to its column (no row tuples to transpose, no second pass over the messages).
    """
    columns: Columns = {name: [] for name in (*_MESSAGE_COLUMNS, "trace_id", "on_main_path")}
    calls: Columns = {name: [] for name in _CALL_COLUMNS}
    counts: list[tuple[int, int, int, int]] = []
    refusals: list[str | None] = []
    for record in records:
        messages = record.messages
        if not messages:
            counts.append((0, 0, 0, 0))
            refusals.append(None)
            continue
        start = len(columns["sequence"])
        try:
            parents, pending, results, roles, refusal = _add_messages(messages, columns)
        except KeyError:  # an older or foreign record without some fields
            for values in columns.values():
                del values[start:]
            parents, pending, results, roles, refusal = _add_messages([{**_MESSAGE_DEFAULTS, **m} for m in messages], columns)
        counts.append(roles)
        refusals.append(refusal)
        main = _main_path(parents, int(record.trace.get("head_sequence") or 0))
        columns["trace_id"].extend([record.trace_id] * len(messages))
        columns["on_main_path"].extend(map(main.__contains__, columns["sequence"][start:]))
        _add_calls(record.trace_id, pending, results, calls)
    return MessageTables(columns, calls, counts, refusals)


def _add_messages(messages: list[dict[str, Any]], columns: Columns) -> tuple[
        dict[int, int | None], list[tuple[Any, ...]], dict[str, list[tuple[Any, ...]]], tuple[int, int, int, int],
        str | None]:
    """Append one trace's messages to the columns; return its parent links, tool calls, results, counts, last refusal."""
    (message_id, sequence, role, goal_id, parent_sequence, branch, tool_call_id, tool_name, description,
     prompt_tokens, completion_tokens, cached_tokens, total_tokens, cost, duration_ms, created_at, text,
     n_tool_calls, tool_call_names, is_error, refused, model, usage_estimated, cost_estimated, cost_unpriced,
     truncated, summarized) = [columns[name].append for name in _MESSAGE_COLUMNS]
    parents: dict[int, int | None] = {}
    pending: list[tuple[Any, ...]] = []  # (message id, sequence, created_at, [(call id, name, arguments)]) per caller
    # call id -> (sequence, is_error, chars, duration, refused, truncated, summarized) of its results
    results: dict[str, list[tuple[Any, ...]]] = {}
    assistants = tools = estimated = unpriced = 0
    last_refusal: str | None = None
    for m in messages:
        (key, seq, kind, goal, parent, fork, call_id, tool, about, prompt, completion, cached, price, duration, created,
         content, extra) = _fields(m)
        message_id(key)
        sequence(seq)
        role(kind)
        goal_id(goal)
        parent_sequence(parent)
        branch(fork)
        tool_call_id(call_id)
        tool_name(tool)
        description(about)
        prompt_tokens(prompt)
        completion_tokens(completion)
        cached_tokens(cached)
        total_tokens(prompt + completion)
        cost(price)
        duration_ms(duration)
        created_at(created)
        parents[seq] = parent
        if isinstance(content, dict):
            calls = content.get("tool_calls") or ()
            text(content.get("text"))
            n_tool_calls(len(calls))
            tool_call_names(",".join([c.get("name", "") for c in calls]) or None)
            if calls:  # read each call now, while the message is in the CPU cache
                pending.append((key, seq, created, [(c.get("id"), c.get("name"), c.get("arguments") or {}) for c in calls]))
        else:
            text(content)
            n_tool_calls(0)
            tool_call_names(None)
        refusal = None
        cut = shortened = False
        if extra:
            error = extra.get("is_error")
            is_error(None if error is None else bool(error))
            refusal = refusal_kind(extra) if error else None
            refused(refusal)
            model(extra.get("model"))
            guessed, priced_guess, no_price = (bool(extra.get("usage_estimated")), bool(extra.get("cost_estimated")),
                                               bool(extra.get("cost_unpriced")))
            usage_estimated(guessed)
            cost_estimated(priced_guess)
            cost_unpriced(no_price)
            estimated += priced_guess or guessed
            unpriced += no_price
            payload = extra.get("payload")
            path = payload.get("path") if isinstance(payload, dict) else None
            cut, shortened = bool(extra.get("truncated")) or path == "truncated", path == "summarized"
        else:
            is_error(None)
            refused(None)
            model(None)
            usage_estimated(False)
            cost_estimated(False)
            cost_unpriced(False)
        truncated(cut)
        summarized(shortened)
        if kind == "assistant":
            assistants += 1
        elif kind == "tool":
            tools += 1
            if call_id:
                result = (seq, bool((extra or {}).get("is_error")),
                          len(content) if isinstance(content, str) else None, duration, refusal, cut, shortened)
                results.setdefault(call_id, []).append(result)
            if refusal is not None:
                last_refusal = content if isinstance(content, str) else str(content)
    return parents, pending, results, (assistants, tools, estimated, unpriced), last_refusal


def _main_path(parents: dict[int, int | None], head: int) -> set[int]:
    path: set[int] = set()
    sequence: int | None = head or None
    while sequence is not None and sequence not in path and sequence in parents:
        path.add(sequence)
        sequence = parents[sequence]
    return path


def _add_calls(trace_id: str, pending: list[tuple[Any, ...]], results: dict[str, list[tuple[Any, ...]]],
               columns: Columns) -> None:
    """Append one trace's tool calls, each joined to the first later result with its id."""
    (trace_ids, message_ids, sequences, call_index, call_ids, tool_name, arguments, result_sequence, is_error,
     refused, truncated, summarized, result_chars, duration_ms, created_at) = [columns[name].append for name in _CALL_COLUMNS]
    for message_id, sequence, created, calls in pending:
        for index, (call_id, name, args) in enumerate(calls):
            joined = _NO_RESULT
            for result in results.get(call_id, ()):
                if result[0] > sequence:
                    joined = result
                    break
            trace_ids(trace_id)
            message_ids(message_id)
            sequences(sequence)
            call_index(index)
            call_ids(call_id)
            tool_name(name)
            arguments(args)
            result_sequence(joined[0])
            is_error(joined[1])
            refused(joined[4])
            truncated(joined[5])
            summarized(joined[6])
            result_chars(joined[2])
            duration_ms(joined[3])
            created_at(created)


def goal_rows(records: Sequence[TraceRecord], names: Sequence[str]) -> Columns:
    """One row per goal, in depth-first plan order."""
    cols = _columns(names)
    for record in records:
        trace_status = record.trace.get("status")
        ended = trace_status if trace_status in ("failed", "stopped") else None
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
                "trace_status": trace_status,
                "effective_status": ended if ended and goal.get("status") not in FINAL_GOAL_STATUSES else goal.get("status"),
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


_SUB_TRACE_EVENTS = ("sub_trace_started", "sub_trace_completed")
_EVENT_COLUMNS = (
    "trace_id", "event_id", "type", "created_at", "goal_id", "message_sequence", "sub_trace_id", "status", "payload")


def event_rows(records: Sequence[TraceRecord], names: Sequence[str]) -> Columns:
    """One row per event; common payload fields are lifted into columns (one pass, no row tuples).

    A `message_added` payload keeps everything but the message itself, which is the messages
    frame's row (`message_sequence`): no second copy of every message in memory.
    """
    cols = _columns(names)
    (trace_ids, event_id, event_type, created_at, goal_id, message_sequence, sub_trace_id, status,
     payloads) = [cols[name].append for name in _EVENT_COLUMNS]
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
                payload = dict(payload)  # a copy without the message: the record's own dict is left as it is
                del payload["message"]
            trace_ids(trace_id)
            event_id(event.get("event_id"))
            event_type(kind)
            created_at(event.get("created_at"))
            goal_id(payload.get("goal_id") or (goal.get("id") if isinstance(goal, dict) else None))
            message_sequence(sequence)
            sub_trace_id(payload.get("trace_id") if kind in _SUB_TRACE_EVENTS else None)
            status(payload.get("status"))
            payloads(payload)
    return cols



def usage_rows(records: Sequence[TraceRecord], index: TreeIndex, names: Sequence[str],
               role_counts: Sequence[tuple[int, int, int, int]] | None) -> Columns:
    """One row per trace: what the agent consumed (calls and flags from `role_counts` when messages were read;
    the shape columns among `names` are left out, as in `trace_rows`)."""
    names = _without_shape(names)
    cols = _columns(names)
    for number, record in enumerate(records):
        meta, trace_id = record.trace, record.trace_id
        calls, tools, estimated, unpriced = role_counts[number] if role_counts is not None else (None, None, None, None)
        end = meta.get("completed_at") or meta.get("updated_at")
        values = {
            "trace_id": trace_id, "root_trace_id": index.root[trace_id], "parent_trace_id": meta.get("parent_trace_id"),
            "depth": index.depth[trace_id], "role": trace_role(meta), "label": trace_label(meta),
            "status": meta.get("status"), "llm_calls": calls, "tool_calls": tools,
            "total_prompt_tokens": meta.get("total_prompt_tokens", 0),
            "total_completion_tokens": meta.get("total_completion_tokens", 0),
            "total_cached_tokens": meta.get("total_cached_tokens", 0), "total_tokens": meta.get("total_tokens", 0),
            "total_cost": meta.get("total_cost", 0.0), "estimated_calls": estimated, "unpriced_calls": unpriced,
            "duration_seconds": _seconds(meta.get("created_at"), end),
        }
        for name in names:
            cols[name].append(values[name])
    return cols
