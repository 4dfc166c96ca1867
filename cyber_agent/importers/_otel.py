"""OpenTelemetry GenAI spans as trace trees: `invoke_agent` → traces, `chat` → messages, `execute_tool` → tool calls.

The spans of any source (an OTLP/JSON file: `_otlp_json.py`; SDK spans in process:
`_otel_spans.py`) arrive as `SpanRecord`s. Per OTel trace, every `invoke_agent` span is a
trace; its parent trace is the nearest `invoke_agent` ancestor, so traces nest as the spans
nest, and an `execute_tool` span between the two is the call that started the child. A trace's
messages are its own `chat` and `execute_tool` spans (those whose nearest agent ancestor it is)
in start order: with content captured (`gen_ai.input.messages` / `gen_ai.output.messages` /
`gen_ai.system_instructions`, `gen_ai.tool.call.result`) the conversation is rebuilt from it;
without, each `chat` span is an assistant message holding only its usage and each
`execute_tool` span a tool message holding only its name and call id (`missing: content`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, get_args

from cyber_agent.importers._plan import ChildLink, TracePlan, import_trace_id
from cyber_agent.llm.types import ToolCall
from cyber_agent.trace.models import Message, MessageContent, Trace, TraceStatus
from cyber_agent.trace.provenance import Missing, Provenance
from cyber_agent.trace.state import Lineage

__all__ = ["SpanRecord", "plans_from_spans"]

_OPERATIONS = ("invoke_agent", "chat", "execute_tool")
_STATUSES = set(get_args(TraceStatus))


@dataclass(frozen=True, kw_only=True)
class SpanRecord:
    """One span, whatever it was read from."""

    trace_id: str
    """OTel trace id, 32 hex digits."""
    span_id: str
    """16 hex digits."""
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int | None
    attributes: dict[str, Any] = field(default_factory=dict)
    error: bool = False
    """Status ERROR."""
    status_message: str | None = None

    @property
    def operation(self) -> str | None:
        """`gen_ai.operation.name`, else the span name's first word when it is a GenAI operation."""
        value = self.attributes.get("gen_ai.operation.name")
        if isinstance(value, str):
            return value
        first = self.name.split(" ", 1)[0]
        return first if first in _OPERATIONS else None


def _time(ns: int | None) -> datetime | None:
    return None if ns is None else datetime.fromtimestamp(ns / 1e9, UTC)


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None
    return value


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _text_of(parts: Any) -> str | None:
    if not isinstance(parts, list):
        return None
    texts = [str(p["content"]) for p in parts if isinstance(p, dict) and p.get("type") == "text" and "content" in p]
    return "\n".join(texts) if texts else None


def _has_text(parts: Any) -> bool:
    return isinstance(parts, list) and any(isinstance(p, dict) and p.get("type") == "text" for p in parts)


def _captured(items: Any) -> bool:
    """True when any part carries content (a text, arguments, a response), not only structure."""
    return isinstance(items, list) and any(
        isinstance(part, dict) and ("content" in part or "response" in part or "arguments" in part)
        for item in items if isinstance(item, dict) for part in item.get("parts") or ())


def _response_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


@dataclass(kw_only=True)
class _Conversation:
    """The messages of one agent span being rebuilt from its own chat and tool spans."""

    messages: list[Message] = field(default_factory=list)
    call_names: dict[str, str] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)
    last_assistant: Message | None = None
    content: bool = False
    usage: bool = False
    cost: bool = False
    inferred_calls: int = 0

    def add(self, role: str, when: datetime | None, **fields: Any) -> Message:
        message = Message.create(trace_id="-", role=role, **fields)  # type: ignore[arg-type]
        if when is not None:
            message.created_at = when
        self.messages.append(message)
        return message

    def input_message(self, item: dict[str, Any], when: datetime | None, span_id: str) -> None:
        role, parts = item.get("role"), item.get("parts") or []
        ids = {"source_ids": {"span_id": span_id}}
        for part in parts:
            if isinstance(part, dict) and part.get("type") == "tool_call_response":
                call_id = str(part.get("id") or "")
                if call_id and call_id in self.answered:
                    continue
                self.answered.add(call_id)
                response = part.get("response")
                self.add("tool", when, content=None if response is None else _response_text(response),
                         tool_call_id=call_id or None, tool_name=self.call_names.get(call_id), metadata=dict(ids))
        text = _text_of(parts)
        if role == "assistant":
            self.assistant(item, when, span_id, usage=None)
        elif text is not None or _has_text(parts):
            self.add("system" if role == "system" else "user", when, content=text, metadata=dict(ids))

    def assistant(self, item: dict[str, Any] | None, when: datetime | None, span_id: str,
                  usage: SpanRecord | None) -> None:
        calls: list[ToolCall] = []
        text = None
        if item is not None:
            parts = item.get("parts") or []
            text = _text_of(parts)
            for part in parts:
                if isinstance(part, dict) and part.get("type") == "tool_call":
                    call_id, name = str(part.get("id") or ""), str(part.get("name") or "")
                    arguments = _json(part.get("arguments"))
                    calls.append(ToolCall(id=call_id, name=name, arguments=arguments if isinstance(arguments, dict) else {}))
                    self.call_names[call_id] = name
        metadata: dict[str, Any] = {"source_ids": {"span_id": span_id}}
        fields: dict[str, Any] = {}
        if usage is not None:
            a = usage.attributes
            fields = {"prompt_tokens": _int(a.get("gen_ai.usage.input_tokens")),
                      "completion_tokens": _int(a.get("gen_ai.usage.output_tokens")),
                      "cached_tokens": _int(a.get("gen_ai.usage.cache_read.input_tokens")),
                      "cost": float(a.get("cyber_agent.cost_usd") or 0.0)}
            if usage.end_ns is not None:
                fields["duration_ms"] = (usage.end_ns - usage.start_ns) / 1e6
            model = a.get("gen_ai.response.model") or a.get("gen_ai.request.model")
            if model:
                metadata["model"] = model
            self.usage = self.usage or "gen_ai.usage.input_tokens" in a or "gen_ai.usage.output_tokens" in a
            self.cost = self.cost or "cyber_agent.cost_usd" in a
            if item is None:
                metadata["content_missing"] = True
        self.last_assistant = self.add("assistant", when, content=MessageContent(text=text, tool_calls=calls),
                                       metadata=metadata, **fields)

    def chat(self, span: SpanRecord, first: bool) -> None:
        a = span.attributes
        start, end = _time(span.start_ns), _time(span.end_ns)
        inputs, outputs = _json(a.get("gen_ai.input.messages")), _json(a.get("gen_ai.output.messages"))
        if first:
            system = _text_of(_json(a.get("gen_ai.system_instructions")))
            if system:
                self.add("system", start, content=system, metadata={"source_ids": {"span_id": span.span_id}})
        self.content = self.content or _captured(inputs) or _captured(outputs)
        if isinstance(inputs, list):
            if not first:  # the history repeats: only what came after the model last spoke is new
                last = max((i for i, m in enumerate(inputs) if isinstance(m, dict) and m.get("role") == "assistant"),
                           default=-1)
                inputs = inputs[last + 1:]
            for item in inputs:
                if isinstance(item, dict):
                    self.input_message(item, start, span.span_id)
        replies = [m for m in outputs if isinstance(m, dict)] if isinstance(outputs, list) else []
        if replies:
            self.assistant(replies[0], end, span.span_id, usage=span)
            for extra in replies[1:]:
                self.assistant(extra, end, span.span_id, usage=None)
        else:
            self.assistant(None, end, span.span_id, usage=span)

    def tool(self, span: SpanRecord, responses: dict[str, Any]) -> None:
        a = span.attributes
        call_id = str(a.get("gen_ai.tool.call.id") or "")
        name = str(a.get("gen_ai.tool.name") or span.name.removeprefix("execute_tool").strip() or "tool")
        if call_id and self.last_assistant is not None and self.last_assistant.metadata.content_missing:
            arguments = _json(a.get("gen_ai.tool.call.arguments"))
            content = self.last_assistant.content
            if isinstance(content, MessageContent) and call_id not in {c.id for c in content.tool_calls}:
                content.tool_calls.append(ToolCall(id=call_id, name=name,
                                                   arguments=arguments if isinstance(arguments, dict) else {}))
                self.inferred_calls += 1
        self.call_names.setdefault(call_id, name)
        if call_id and call_id in self.answered:
            return
        self.answered.add(call_id)
        result = a.get("gen_ai.tool.call.result")
        if result is None and call_id in responses:
            result = responses[call_id]
        metadata: dict[str, Any] = {"source_ids": {"span_id": span.span_id}}
        if span.error or a.get("cyber_agent.tool.is_error"):
            metadata["is_error"] = True
        if result is None:
            metadata["content_missing"] = True
        self.add("tool", _time(span.end_ns), content=None if result is None else _response_text(result),
                 tool_call_id=call_id or None, tool_name=name, metadata=metadata,
                 duration_ms=None if span.end_ns is None else (span.end_ns - span.start_ns) / 1e6)


def _responses(spans: Sequence[SpanRecord]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for span in spans:
        for item in _json(span.attributes.get("gen_ai.input.messages")) or ():
            for part in (item.get("parts") or ()) if isinstance(item, dict) else ():
                if isinstance(part, dict) and part.get("type") == "tool_call_response" and part.get("id"):
                    found.setdefault(str(part["id"]), part.get("response"))
    return found


def _owner(span: SpanRecord, index: dict[str, SpanRecord]) -> tuple[str | None, str | None]:
    """(nearest invoke_agent ancestor's span id, the call id of the execute_tool span passed on the way)."""
    call: str | None = None
    seen: set[str] = set()
    parent = span.parent_id
    while parent is not None and parent in index and parent not in seen:
        seen.add(parent)
        ancestor = index[parent]
        if ancestor.operation == "invoke_agent":
            return ancestor.span_id, call
        if call is None and ancestor.operation == "execute_tool":
            call = str(ancestor.attributes.get("gen_ai.tool.call.id") or "") or None
        parent = ancestor.parent_id
    return None, call


def plans_from_spans(spans: Sequence[SpanRecord], path: str) -> list[TracePlan]:
    """The trees of every OTel trace among `spans`: one root plan per top-level agent span."""
    groups: dict[str, list[SpanRecord]] = defaultdict(list)
    for span in spans:
        groups[span.trace_id].append(span)
    roots: list[TracePlan] = []
    for otel_trace_id, group in groups.items():
        roots += _trace_group(otel_trace_id, sorted(group, key=lambda s: (s.start_ns, s.end_ns or 0)), path)
    return roots


def _trace_group(otel_trace_id: str, spans: list[SpanRecord], path: str) -> list[TracePlan]:
    index = {span.span_id: span for span in spans}
    owned: dict[str | None, list[SpanRecord]] = defaultdict(list)
    parents: dict[str, tuple[str | None, str | None]] = {}
    for span in spans:
        owner, call = _owner(span, index)
        if span.operation == "invoke_agent":
            parents[span.span_id] = (owner, call)
        elif span.operation in ("chat", "execute_tool"):
            owned[owner].append(span)
    plans: dict[str, TracePlan] = {}
    depth: dict[str, int] = {}
    root_of: dict[str, str] = {}
    out: list[TracePlan] = []
    for span in spans:  # parents start before their children
        if span.operation != "invoke_agent":
            continue
        owner, call = parents[span.span_id]
        parent_plan = plans.get(owner) if owner else None
        stated = span.attributes.get("cyber_agent.depth")  # our own export states it (a validator shares its target's)
        nested = depth[owner] + 1 if owner in depth else 0
        depth[span.span_id] = stated if isinstance(stated, int) and not isinstance(stated, bool) else nested
        root_of[span.span_id] = root_of[owner] if owner in root_of else span.span_id
        plan = _agent_plan(span, owned[span.span_id], otel_trace_id, path, parent_plan, depth[span.span_id],
                           import_trace_id("otel", f"{otel_trace_id}/{root_of[span.span_id]}"), call)
        plans[span.span_id] = plan
        if parent_plan is None:
            out.append(plan)
        else:
            parent_plan.children.append(plan)
            _link(parent_plan, plan, call)
    if owned[None]:
        out.append(_agent_plan(None, owned[None], otel_trace_id, path, None, 0,
                               import_trace_id("otel", f"{otel_trace_id}/calls"), None))
    return out


def _link(parent: TracePlan, child: TracePlan, call: str | None) -> None:
    if call is None:
        return
    for index, message in enumerate(parent.messages):
        if message.role == "assistant" and call in {c.id for c in message.tool_calls}:
            tool = next(c.name for c in message.tool_calls if c.id == call)
            parent.links.append(ChildLink(message_index=index, call_id=call, tool=tool, child=child))
            return


def _agent_plan(span: SpanRecord | None, own: list[SpanRecord], otel_trace_id: str, path: str,
                parent: TracePlan | None, depth: int, root_trace_id: str, call: str | None) -> TracePlan:
    conversation = _Conversation()
    responses = _responses(own)
    first = True
    for item in own:
        if item.operation == "chat":
            conversation.chat(item, first)
            first = False
        else:
            conversation.tool(item, responses)
    a = span.attributes if span is not None else {}
    messages = conversation.messages
    missing: list[Missing] = []
    notes: list[str] = []
    if not conversation.cost:
        missing.append("cost")
    if own and not conversation.content:
        missing.append("content")
    if any(s.operation == "chat" for s in own) and not conversation.usage:
        missing.append("usage")
    if conversation.inferred_calls:
        notes.append(f"{conversation.inferred_calls} tool call(s) without captured content are attributed to the "
                     "chat span before their execute_tool span")
    task_items = _json(a.get("gen_ai.input.messages"))
    task = _first_user(task_items) or next((m.text for m in messages if m.role == "user" and m.text), None)
    answer = _text_of((_json(a.get("gen_ai.output.messages")) or [{}])[0].get("parts")) if isinstance(
        _json(a.get("gen_ai.output.messages")), list) and _json(a.get("gen_ai.output.messages")) else None
    final = a.get("final_result")
    answer = answer or (final if isinstance(final, str) else None) or next(
        (m.text for m in reversed(messages) if m.role == "assistant" and m.text), None)
    model = a.get("gen_ai.request.model") or next((m.metadata.model for m in messages if m.metadata.model), None)
    if not model:
        missing.append("model")
    if task is None:
        missing.append("task")
    anchor = span or (own[0] if own else None)
    start = _time(anchor.start_ns) if anchor else None
    ends = [s.end_ns for s in ([span] if span else own) if s.end_ns is not None]
    end = _time(max(ends)) if ends else None
    status: TraceStatus
    recorded = a.get("cyber_agent.status")
    if isinstance(recorded, str) and recorded in _STATUSES:
        status = recorded  # type: ignore[assignment]
    elif span is not None and span.end_ns is None:
        status = "running"
    else:
        status = "failed" if span is not None and span.error else "completed"
    ids = {"otel_trace_id": otel_trace_id}
    if span is not None:
        ids["span_id"] = span.span_id
        for key in ("gen_ai.agent.id", "gen_ai.conversation.id", "gen_ai.agent.call.id"):
            if a.get(key):
                ids[key.removeprefix("gen_ai.")] = str(a[key])
    else:
        notes.append("no invoke_agent span: this trace holds the OTel trace's chat and execute_tool spans")
    key = f"{otel_trace_id}/{span.span_id if span else 'calls'}"
    agent_name = a.get("gen_ai.agent.name") or (span.name.removeprefix("invoke_agent").strip() if span else None)
    created_by = a.get("cyber_agent.created_by_tool")
    trace = Trace(
        trace_id=import_trace_id("otel", key), task=task,
        parent_trace_id=parent.trace.trace_id if parent else None,
        agent_type=str(a.get("cyber_agent.agent_type") or ("main" if parent is None else "delegate")),
        name=str(agent_name) if agent_name else None, model=str(model) if model else None, status=status,
        result_summary=answer, error_message=(span.status_message if span is not None and span.error else None),
        created_at=start or datetime(1970, 1, 1, tzinfo=UTC), updated_at=end or start or datetime(1970, 1, 1, tzinfo=UTC),
        completed_at=end if status in ("completed", "failed", "stopped") else None,
        lineage=Lineage(depth=depth, root_trace_id=root_trace_id,
                        created_by_tool=(created_by if created_by in ("agent", "validator") else
                                         None if parent is None else "agent")),
        provenance=Provenance(source="otel", path=path, ids=ids, missing=missing, notes=notes, started_by_call=call),
    )
    return TracePlan(trace=trace, messages=messages)


def _first_user(items: Any) -> str | None:
    if not isinstance(items, list):
        return None
    return next((_text_of(m.get("parts")) for m in items if isinstance(m, dict) and m.get("role") == "user"), None)
