"""One stored trace as GenAI spans: `invoke_agent`, one `chat` per model call, one `execute_tool` per tool call.

The spans are the SDK's `ReadableSpan`s built with the store's ids and timestamps (a tracer
would stamp the export's own clock and random ids), ready for any `SpanExporter`. The mapping
table is docs/otel.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_AGENT_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_SYSTEM_INSTRUCTIONS,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
)
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from cyber_agent.llm.types import ToolCall
from cyber_agent.otel._content import ContentPolicy, input_messages, output_message, system_instructions
from cyber_agent.otel._ids import agent_span_id, chat_span_id, otel_trace_id, span_id, tool_span_id
from cyber_agent.otel._protocol import (
    NS,
    Attributes,
    approval_decisions,
    protocol_attributes,
    protocol_events,
    put,
    to_ns,
)
from cyber_agent.trace.events import TraceEvent
from cyber_agent.trace.models import Message, Trace

__all__ = ["ChildLinks", "ERROR_STATUSES", "SpanSettings", "TraceView", "child_links", "provider_and_model", "trace_spans"]

_KNOWN_PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "demo": "cyber_agent.demo",
                    "replay": "cyber_agent.replay"}
_IN_PROCESS = {"cyber_agent.demo", "cyber_agent.replay"}


@dataclass(frozen=True, kw_only=True)
class TraceView:
    """One stored trace with what its spans are built from."""

    trace: Trace
    messages: Sequence[Message] = ()
    """All messages of the trace, every branch, in sequence order."""
    events: Sequence[TraceEvent] = ()
    """The trace's events in id order."""
    usage: Mapping[str, Any] | None = None
    """The tree's usage record (`resource_usage.json`) when the trace is a recursive root."""


@dataclass(frozen=True, kw_only=True)
class SpanSettings:
    """What every span of an export shares."""

    content: ContentPolicy = field(default_factory=ContentPolicy)
    resource: Resource = field(default_factory=lambda: Resource.create({"service.name": "cyber_agent"}))
    scope: InstrumentationScope = field(default_factory=lambda: InstrumentationScope("cyber_agent.otel"))


@dataclass(frozen=True, kw_only=True)
class ChildLinks:
    """How a parent's tool calls started and revised its children (from its events)."""

    started_by: dict[str, int] = field(default_factory=dict)
    """Child trace id → span id of the `execute_tool` span whose call created it."""
    revised_by: dict[str, list[tuple[int, datetime]]] = field(default_factory=dict)
    """Child trace id → (span id of the call that sent it back, when) per revision."""
    children: list[str] = field(default_factory=list)
    """Every child the events announce (validators excepted: the runner starts them without an event)."""


def child_links(events: Sequence[TraceEvent]) -> ChildLinks:
    """Pair each `sub_trace_started` event with the `tool_call_started` event before it."""
    links = ChildLinks()
    current: int | None = None
    for event in events:
        payload = event.payload
        if event.type == "progress" and payload.get("stage") == "tool_call_started":
            assistant, call = payload.get("assistant_id"), payload.get("tool_call_id")
            current = tool_span_id(str(assistant), str(call)) if assistant and call else None
        elif event.type == "sub_trace_started":
            child = str(payload.get("trace_id"))
            if child not in links.children:
                links.children.append(child)
            if current is None:
                continue
            if payload.get("revision") and child in links.started_by:
                links.revised_by.setdefault(child, []).append((current, event.created_at))
            else:
                links.started_by.setdefault(child, current)
    return links


def provider_and_model(spec: str | None) -> tuple[str, str]:
    """`gen_ai.provider.name` and the model name of a model spec (`openai:gpt-4o` → openai, gpt-4o)."""
    text = (spec or "").strip()
    prefix, colon, rest = text.partition(":")
    if prefix.lower() in _KNOWN_PROVIDERS:
        return _KNOWN_PROVIDERS[prefix.lower()], (rest if colon else text) or text
    return "cyber_agent.custom", text or "unknown"


def _context(trace_id: int, span: int) -> SpanContext:
    return SpanContext(trace_id=trace_id, span_id=span, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _agent_name(trace: Trace) -> str:
    return trace.name or trace.agent_type or "agent"


def _message_window(message: Message, by_sequence: Mapping[int, Message]) -> list[Message]:
    """The main path the model saw before `message`: its parent chain, oldest first."""
    chain: list[Message] = []
    sequence = message.parent_sequence
    seen: set[int] = set()
    while sequence is not None and sequence in by_sequence and sequence not in seen:
        seen.add(sequence)
        parent = by_sequence[sequence]
        chain.append(parent)
        sequence = parent.parent_sequence
    chain.reverse()
    return chain


ERROR_STATUSES: Mapping[str, str] = {"failed": "failed", "stopped": "stopped"}
"""Trace statuses whose agent span has status ERROR, and the `error.type` each gets (docs/otel.md, Status)."""


def _retries_by_message(events: Sequence[TraceEvent]) -> dict[str, list[TraceEvent]]:
    """`llm_retry` events by the assistant message they preceded ("" for retries of a call that failed)."""
    by_message: dict[str, list[TraceEvent]] = {}
    pending: list[TraceEvent] = []
    for event in events:
        if event.type == "llm_retry":
            pending.append(event)
        elif event.type == "message_added" and pending:
            message = event.payload.get("message") or {}
            if message.get("role") == "assistant":
                by_message.setdefault(str(message.get("message_id") or ""), []).extend(pending)
                pending = []
    if pending:
        by_message.setdefault("", []).extend(pending)
    return by_message


def _retry_event(event: TraceEvent) -> Event:
    payload = event.payload
    attributes: Attributes = {NS + "retry.attempt": int(payload.get("attempt") or 0),
                              NS + "retry.error": str(payload.get("error") or ""),
                              NS + "retry.wait_s": float(payload.get("wait_s") or 0.0)}
    put(attributes, NS + "retry.status", payload.get("status"))
    return Event(NS + "llm_retry", attributes, timestamp=to_ns(event.created_at))


def trace_spans(
    view: TraceView, *, parent_span: int | None, revisions: Sequence[tuple[int, datetime]] = (),
    settings: SpanSettings | None = None,
) -> list[ReadableSpan]:
    """Return the agent span of `view.trace` (first), then its chat and tool spans in sequence order."""
    settings = settings or SpanSettings()
    trace, content = view.trace, settings.content
    root_id = trace.root_id
    otel_id = otel_trace_id(root_id)
    agent_id = agent_span_id(trace.trace_id)
    agent_context = _context(otel_id, agent_id)
    provider, model = provider_and_model(trace.model)
    start = to_ns(trace.created_at)
    end = max(start, to_ns(trace.completed_at or trace.updated_at))

    attributes: Attributes = {
        GEN_AI_OPERATION_NAME: "invoke_agent", GEN_AI_PROVIDER_NAME: provider, GEN_AI_AGENT_NAME: _agent_name(trace),
        GEN_AI_AGENT_ID: trace.trace_id, GEN_AI_CONVERSATION_ID: root_id, GEN_AI_REQUEST_MODEL: model,
        NS + "trace_id": trace.trace_id, NS + "agent_mode": trace.lineage.mode, NS + "depth": trace.lineage.depth,
        NS + "status": trace.status, NS + "messages": trace.total_messages,
        NS + "usage.input_tokens": trace.total_prompt_tokens, NS + "usage.output_tokens": trace.total_completion_tokens,
        NS + "usage.cached_tokens": trace.total_cached_tokens, NS + "cost_usd": trace.total_cost,
    }
    put(attributes, NS + "parent_trace_id", trace.parent_trace_id)
    put(attributes, NS + "agent_type", trace.agent_type)
    put(attributes, NS + "created_by_tool", trace.lineage.created_by_tool)
    if trace.cost_unpriced:
        attributes[NS + "cost_unpriced"] = True
    attributes.update(protocol_attributes(trace, view.usage, content))
    if content.capture:
        put(attributes, GEN_AI_INPUT_MESSAGES,
            content.json([{"role": "user", "parts": [{"type": "text", "content": trace.task or ""}]}]))
        if trace.result_summary is not None:
            put(attributes, GEN_AI_OUTPUT_MESSAGES, content.json([{
                "role": "assistant", "parts": [{"type": "text", "content": trace.result_summary}],
                "finish_reason": "stop"}]))
    status = Status(StatusCode.UNSET)
    if trace.status in ERROR_STATUSES:
        status = Status(StatusCode.ERROR, trace.error_message or trace.status)
        attributes[ERROR_TYPE] = ERROR_STATUSES[trace.status]
    if trace.status == "stopped":
        put(attributes, NS + "stop_reason", trace.error_message)
    events = protocol_events(trace, view.events, content)
    retries = _retries_by_message(view.events)
    events.extend(_retry_event(record) for record in retries.pop("", []))  # a call that failed: on the agent span
    links = [Link(_context(otel_id, span), {NS + "link": "revision"}) for span, _ in revisions]
    events.extend(Event(NS + "revision", {NS + "revised_by_span": format(span, "016x")}, timestamp=to_ns(at))
                  for span, at in revisions)
    events.sort(key=lambda e: e.timestamp)
    spans = [ReadableSpan(
        name=f"invoke_agent {_agent_name(trace)}", context=agent_context,
        parent=_context(otel_id, parent_span) if parent_span is not None else None,
        attributes=attributes, events=events, links=links, kind=SpanKind.INTERNAL, status=status,
        start_time=start, end_time=end, resource=settings.resource, instrumentation_scope=settings.scope,
    )]

    chat_kind = SpanKind.INTERNAL if provider in _IN_PROCESS else SpanKind.CLIENT
    decisions = approval_decisions(view.events)
    by_sequence = {m.sequence: m for m in view.messages} if content.capture else {}
    open_calls: dict[str, tuple[Message, ToolCall]] = {}
    for message in view.messages:
        finished = to_ns(message.created_at)
        began = finished - int((message.duration_ms or 0.0) * 1_000_000)
        if message.role == "assistant":
            for call in message.tool_calls:
                open_calls[call.id] = (message, call)
            spans.append(_chat_span(message, model, provider, root_id, by_sequence, content, chat_kind,
                                    _context(otel_id, chat_span_id(message.message_id)), agent_context,
                                    began, finished, settings, retries.get(message.message_id, ())))
        elif message.role == "tool":
            opened = open_calls.get(message.tool_call_id or "")
            key = (tool_span_id(opened[0].message_id, opened[1].id) if opened is not None
                   else span_id(f"tool-message:{message.message_id}"))
            spans.append(_tool_span(message, opened[1] if opened else None, decisions, content,
                                    _context(otel_id, key), agent_context, began, finished, settings))
    return spans


def _chat_span(message: Message, model: str, provider: str, root_id: str, by_sequence: Mapping[int, Message],
               content: ContentPolicy, kind: SpanKind, context: SpanContext, parent: SpanContext, start: int,
               end: int, settings: SpanSettings, retries: Sequence[TraceEvent] = ()) -> ReadableSpan:
    _, response_model = provider_and_model(str(message.metadata.model or model))
    attributes: Attributes = {
        GEN_AI_OPERATION_NAME: "chat", GEN_AI_PROVIDER_NAME: provider, GEN_AI_REQUEST_MODEL: model,
        GEN_AI_RESPONSE_MODEL: response_model, GEN_AI_CONVERSATION_ID: root_id,
        GEN_AI_USAGE_INPUT_TOKENS: message.prompt_tokens, GEN_AI_USAGE_OUTPUT_TOKENS: message.completion_tokens,
        GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: message.cached_tokens,
        NS + "message_id": message.message_id, NS + "sequence": message.sequence, NS + "cost_usd": message.cost,
        NS + "tool_calls": len(message.tool_calls),
    }
    put(attributes, NS + "goal_id", message.goal_id)
    put(attributes, NS + "branch", message.branch)
    meta = message.metadata
    for flag, value in (("usage_estimated", meta.usage_estimated), ("cost_estimated", meta.cost_estimated),
                        ("cost_unpriced", meta.cost_unpriced)):
        if value:
            attributes[NS + flag] = True
    put(attributes, NS + "usage_invalid", meta.usage_invalid)
    if content.capture:
        window = _message_window(message, by_sequence)
        put(attributes, GEN_AI_SYSTEM_INSTRUCTIONS, content.json(system_instructions(window)))
        put(attributes, GEN_AI_INPUT_MESSAGES, content.json(input_messages(window)))
        put(attributes, GEN_AI_OUTPUT_MESSAGES, content.json(output_message(message)))
    return ReadableSpan(name=f"chat {response_model}", context=context, parent=parent, attributes=attributes,
                        events=[_retry_event(record) for record in retries],
                        kind=kind, start_time=start, end_time=end, resource=settings.resource,
                        instrumentation_scope=settings.scope)


def _tool_span(message: Message, call: ToolCall | None, decisions: Mapping[str, str], content: ContentPolicy,
               context: SpanContext, parent: SpanContext, start: int, end: int,
               settings: SpanSettings) -> ReadableSpan:
    name = message.tool_name or (call.name if call else "tool")
    attributes: Attributes = {GEN_AI_OPERATION_NAME: "execute_tool", GEN_AI_TOOL_NAME: name,
                              GEN_AI_TOOL_TYPE: "function", NS + "message_id": message.message_id}
    put(attributes, GEN_AI_TOOL_CALL_ID, message.tool_call_id)
    put(attributes, NS + "goal_id", message.goal_id)
    put(attributes, NS + "approval.decision", decisions.get(message.tool_call_id or ""))
    status = Status(StatusCode.UNSET)
    if message.metadata.is_error:
        attributes[NS + "tool.is_error"] = True
        attributes[ERROR_TYPE] = "tool_error"
        status = Status(StatusCode.ERROR, "the tool returned an error")
    if content.capture:
        put(attributes, GEN_AI_TOOL_CALL_ARGUMENTS, content.json(call.arguments if call else {}))
        put(attributes, GEN_AI_TOOL_CALL_RESULT, content.json(message.text))
    return ReadableSpan(name=f"execute_tool {name}", context=context, parent=parent, attributes=attributes,
                        kind=SpanKind.INTERNAL, status=status, start_time=start, end_time=end,
                        resource=settings.resource, instrumentation_scope=settings.scope)
