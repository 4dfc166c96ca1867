"""ReDel runs (`state.json`, and `events.jsonl` when present) as trace trees.

ReDel (zhudotexe/redel) saves a run as a folder: `state.json` holds every node (`id`, `depth`,
`parent`, `children`, `chat_history` of OpenAI-style messages, `state`, `name`) and
`events.jsonl` every event (`kani_spawn`, `kani_message`, `tokens_used`, ...). Each node becomes
a trace with its depth and parent exactly as the file says; a parent's `delegate` call is linked
to the child it started: DelegateOne starts the helper with the call's `instructions` as its
first user message, so that text pairs call and child. Without `events.jsonl` the file records
no times, tokens, cost or model, and the traces say so (`Provenance.missing`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cyber_agent.errors import ImportFormatError
from cyber_agent.importers._plan import ChildLink, TracePlan, import_trace_id, ordered_times
from cyber_agent.llm.types import ToolCall
from cyber_agent.trace.models import Message, MessageContent, Trace, TraceStatus
from cyber_agent.trace.provenance import Missing, Provenance
from cyber_agent.trace.state import Lineage

__all__ = ["EVENTS_FILE", "STATE_FILE", "read_redel", "redel_state_path"]

STATE_FILE = "state.json"
EVENTS_FILE = "events.jsonl"
_DELEGATE_TOOLS = ("delegate",)
_STATUS: dict[str, TraceStatus] = {"stopped": "completed", "errored": "failed", "running": "running",
                                   "waiting": "running"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Function(_Model):
    name: str
    arguments: str | dict[str, Any] | None = None


class _ToolCall(_Model):
    id: str
    function: _Function


class _Message(_Model):
    role: str
    content: str | list[Any] | None = None
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[_ToolCall] | None = None
    is_tool_call_error: bool | None = None


class _Node(_Model):
    id: str
    depth: int
    parent: str | None
    children: list[str] = Field(default_factory=list)
    chat_history: list[_Message]
    always_included_messages: list[_Message] = Field(default_factory=list)
    state: str | None = None
    name: str | None = None
    engine_type: str | None = None


class _State(_Model):
    id: str
    title: str | None = None
    last_modified: float | None = None
    n_events: int | None = None
    state: list[_Node]


@dataclass(kw_only=True)
class _Timeline:
    """What `events.jsonl` says about one node: when it spawned, when each message came, tokens per message."""

    spawned: datetime | None = None
    message_times: list[datetime] = field(default_factory=list)
    message_roles: list[str] = field(default_factory=list)
    tokens: dict[int, tuple[int, int]] = field(default_factory=dict)
    """chat_history index of an assistant message → (prompt, completion) tokens of its completion."""


def redel_state_path(path: Path) -> Path:
    """The `state.json` of a run folder (or the file itself)."""
    return path / STATE_FILE if path.is_dir() else path


def _problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "(top level)"
    return f"{where}: {error['msg']}"


def _load_state(path: Path) -> _State:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFormatError(path, "ReDel state.json", f"cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise ImportFormatError(path, "ReDel state.json", f"not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("state"), list):
        keys = sorted(data)[:6] if isinstance(data, dict) else type(data).__name__
        raise ImportFormatError(path, "ReDel state.json",
                                f"no 'state' list of nodes at the top level (found {keys})")
    try:
        return _State.model_validate(data)
    except ValidationError as exc:
        raise ImportFormatError(path, "ReDel state.json", _problem(exc)) from None


def _time(value: object) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if isinstance(value, (int, float)) else None


def _timelines(path: Path, state: _State) -> tuple[dict[str, _Timeline], list[str]]:
    """Read `events.jsonl` into per-node timelines; notes say what did not line up."""
    timelines: dict[str, _Timeline] = defaultdict(_Timeline)
    notes: list[str] = []
    lines = 0
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportFormatError(path, "ReDel events.jsonl", f"line {number} is not JSON ({exc})") from None
            if not isinstance(event, dict) or "type" not in event:
                raise ImportFormatError(path, "ReDel events.jsonl", f"line {number} has no event 'type'")
            lines += 1
            kind, node_id, when = event["type"], event.get("id"), _time(event.get("timestamp"))
            if not isinstance(node_id, str):
                continue
            timeline = timelines[node_id]
            if kind == "kani_spawn" and timeline.spawned is None:
                timeline.spawned = when
            elif kind == "kani_message" and when is not None:
                timeline.message_times.append(when)
                message = event.get("msg")
                timeline.message_roles.append(str(message.get("role") if isinstance(message, dict) else None))
            elif kind == "tokens_used":
                assistants = [i for i, role in enumerate(timeline.message_roles) if role == "assistant"]
                pending = [i for i in assistants if i not in timeline.tokens]
                if pending:
                    timeline.tokens[pending[-1]] = (int(event.get("prompt_tokens") or 0),
                                                    int(event.get("completion_tokens") or 0))
                else:
                    notes.append(f"a tokens_used event of node {node_id} follows no assistant message; not counted")
    if state.n_events is not None and state.n_events != lines:
        notes.append(f"events.jsonl holds {lines} events, state.json counts {state.n_events}")
    return timelines, notes


def _text(content: str | list[Any] | None) -> str | None:
    if content is None or isinstance(content, str):
        return content
    parts = [part if isinstance(part, str) else str(part.get("text") or part.get("content") or "")
             for part in content if isinstance(part, (str, dict))]
    return "".join(parts)


def _arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _tool_call(call: _ToolCall) -> ToolCall:
    raw = call.function.arguments
    arguments = _arguments(raw)
    unparsed = isinstance(raw, str) and raw.strip() and not arguments and raw.strip() != "{}"
    return ToolCall(id=call.id, name=call.function.name, arguments=arguments,
                    raw_arguments=raw if unparsed and isinstance(raw, str) else None,
                    parse_error="arguments are not a JSON object" if unparsed else None)


def _message(message: _Message, index: int, always: bool) -> Message:
    metadata: dict[str, Any] = {"source_ids": {"chat_history_index": index}}
    if always:
        metadata["source_ids"] = {"always_included_index": index}
    text = _text(message.content)
    if message.role == "assistant":
        calls = [_tool_call(call) for call in message.tool_calls or ()]
        return Message.create(trace_id="-", role="assistant", content=MessageContent(text=text, tool_calls=calls),
                              metadata=metadata)
    if message.role in ("function", "tool"):
        if message.is_tool_call_error:
            metadata["is_error"] = True
        return Message.create(trace_id="-", role="tool", content=text, tool_call_id=message.tool_call_id,
                              tool_name=message.name, metadata=metadata)
    if message.role == "system":
        return Message.create(trace_id="-", role="system", content=text, metadata=metadata)
    return Message.create(trace_id="-", role="user", content=text, metadata=metadata)


def read_redel(path: Path) -> list[TracePlan]:
    """Read one ReDel run (its folder or `state.json`) into one tree of plans (a list of its roots)."""
    state_path = redel_state_path(path)
    state = _load_state(state_path)
    nodes = {node.id: node for node in state.state}
    for node in state.state:
        if node.parent is not None and node.parent not in nodes:
            raise ImportFormatError(state_path, "ReDel state.json",
                                    f"node {node.id!r} names parent {node.parent!r}, which is not a node of the file")
    roots = [node for node in state.state if node.parent is None]
    if not roots:
        raise ImportFormatError(state_path, "ReDel state.json", "no node has parent null (no root)")
    events_path = state_path.parent / EVENTS_FILE
    timelines: dict[str, _Timeline] = {}
    file_notes: list[str] = []
    if events_path.is_file():
        timelines, file_notes = _timelines(events_path, state)
    missing: list[Missing] = ["cost", "model"] if timelines else ["usage", "cost", "timestamps", "model"]
    synthetic = iter(ordered_times(_time(state.last_modified), sum(2 + len(n.chat_history) for n in state.state)
                                   + sum(len(n.always_included_messages) for n in state.state)))
    plans: dict[str, TracePlan] = {}
    root_id = {node.id: import_trace_id("redel", f"{state.id}/{_root_of(node, nodes)}") for node in state.state}
    for node in state.state:  # ReDel writes nodes in creation order, parents before children
        timeline = timelines.get(node.id)
        plans[node.id] = _plan(node, state, state_path, timeline, missing, file_notes, synthetic, root_id[node.id])
    for node in state.state:
        parent = node.parent
        if parent is not None:
            plans[parent].children.append(plans[node.id])
    for node in state.state:
        _link(plans[node.id], node, nodes, plans)
    return [plans[node.id] for node in roots]


def _root_of(node: _Node, nodes: dict[str, _Node]) -> str:
    seen = set()
    while node.parent is not None and node.id not in seen:
        seen.add(node.id)
        node = nodes[node.parent]
    return node.id


def _plan(node: _Node, state: _State, path: Path, timeline: _Timeline | None, missing: list[Missing],
          file_notes: list[str], synthetic: Any, root_trace_id: str) -> TracePlan:
    notes = list(file_notes) if node.parent is None else []
    messages = [_message(m, i, True) for i, m in enumerate(node.always_included_messages)]
    messages += [_message(m, i, False) for i, m in enumerate(node.chat_history)]
    times = [next(synthetic) for _ in range(len(messages) + 2)]
    created, finished = times[0], times[-1]
    own_missing = list(missing)
    if timeline is None and "timestamps" not in missing:
        own_missing = ["usage", "cost", "timestamps", "model"]
        notes.append(f"events.jsonl has no event of node {node.id}: its times and tokens are not recorded")
    if timeline is not None:
        roles = [m.role for m in node.chat_history]
        if timeline.message_roles == roles:
            offset = len(node.always_included_messages)
            for index, when in enumerate(timeline.message_times):
                messages[offset + index].created_at = when
            for index, (prompt, completion) in timeline.tokens.items():
                messages[offset + index].prompt_tokens = prompt
                messages[offset + index].completion_tokens = completion
            created = timeline.spawned or (timeline.message_times[0] if timeline.message_times else created)
            finished = timeline.message_times[-1] if timeline.message_times else created
            for message in messages[:offset]:
                message.created_at = created
        else:
            own_missing = ["usage", "cost", "timestamps", "model"]
            notes.append(f"events.jsonl lists {len(timeline.message_roles)} messages of node {node.id}, "
                         f"its chat_history {len(roles)}: times and tokens not taken from the events")
    if timeline is None or own_missing != missing:
        for message, when in zip(messages, times[1:], strict=False):
            message.created_at = when
    first_user = next((m.text for m in messages if m.role == "user"), None)
    answer = next((m.text for m in reversed(messages) if m.role == "assistant" and m.text), None)
    status = _STATUS.get(node.state or "", "completed")
    if node.state not in _STATUS:
        own_missing.append("status")
    if first_user is None:
        own_missing.append("task")
    ids = {"session_id": state.id, "node_id": node.id}
    if node.engine_type:
        ids["engine_type"] = node.engine_type
    if node.state:
        ids["state"] = node.state
    is_root = node.parent is None
    trace = Trace(
        trace_id=import_trace_id("redel", f"{state.id}/{node.id}"),
        task=first_user, parent_trace_id=None if is_root else import_trace_id("redel", f"{state.id}/{node.parent}"),
        agent_type="main" if is_root else "delegate", name=node.name, model=None, status=status,
        result_summary=answer, created_at=created, updated_at=finished,
        completed_at=finished if status in ("completed", "failed") else None,
        lineage=Lineage(depth=node.depth, root_trace_id=root_trace_id, created_by_tool=None if is_root else "agent"),
        provenance=Provenance(source="redel", path=str(path.resolve()), ids=ids, missing=own_missing, notes=notes),
    )
    return TracePlan(trace=trace, messages=messages)


def _link(plan: TracePlan, node: _Node, nodes: dict[str, _Node], plans: dict[str, TracePlan]) -> None:
    """Pair each `delegate` call of the node with the child whose first user message is its instructions,
    else with the child whose assistant texts (joined as DelegateOne returns them) are the call's result."""
    children = [nodes[c] for c in node.children if c in nodes] or [n for n in nodes.values() if n.parent == node.id]
    firsts = {child.id: next((_text(m.content) for m in child.chat_history if m.role == "user"), None)
              for child in children}
    answers = {child.id: "\n".join(_text(m.content) or "" for m in child.chat_history
                                   if m.role == "assistant" and _text(m.content)) for child in children}
    results = {m.tool_call_id: _text(m.content) for m in node.chat_history if m.role in ("function", "tool")}
    unmatched = [child.id for child in children]
    offset = len(node.always_included_messages)
    for index, message in enumerate(node.chat_history):
        for call in message.tool_calls or ():
            if call.function.name not in _DELEGATE_TOOLS:
                continue
            instructions = _arguments(call.function.arguments).get("instructions")
            match = next((c for c in unmatched if firsts[c] == instructions), None)
            if match is None and isinstance(instructions, str):
                match = next((c for c in unmatched if " ".join(str(firsts[c] or "").split())
                              == " ".join(instructions.split())), None)
            if match is None and results.get(call.id):  # DelegateOne answers with the helper's texts joined
                match = next((c for c in unmatched if answers[c] and answers[c] == results[call.id]), None)
            if match is None:
                continue  # refused (e.g. "You shouldn't delegate the entire task"): no child started
            unmatched.remove(match)
            child = plans[match]
            child.trace.provenance.started_by_call = call.id  # type: ignore[union-attr]
            plan.links.append(ChildLink(message_index=offset + index, call_id=call.id, tool=call.function.name,
                                        child=child))
    if unmatched:
        plan.trace.provenance.notes.append(  # type: ignore[union-attr]
            f"{len(unmatched)} child(ren) matched no delegate call by instructions: {', '.join(unmatched)}")
