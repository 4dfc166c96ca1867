"""The recursive protocol and the runner's state as span attributes and events (`cyber_agent.` namespace).

Read from the typed trace (`cyber_agent/trace/state.py:ProtocolState`, `RootSetup`), the
root's usage record and the trace's events. Structure is always exported (outcomes, verdicts,
decisions, counts, ids, limits, usage); the texts (objective, criteria, summaries, evidence,
feedback, approval arguments) only under `ContentPolicy(capture=True)`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from opentelemetry.sdk.trace import Event
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_EVALUATION_EXPLANATION,
    GEN_AI_EVALUATION_NAME,
    GEN_AI_EVALUATION_SCORE_LABEL,
)
from opentelemetry.util.types import AttributeValue

from cyber_agent.otel._content import ContentPolicy
from cyber_agent.trace.events import TraceEvent
from cyber_agent.trace.models import Trace
from cyber_agent.trace.records import parse_time

__all__ = ["Attributes", "approval_decisions", "put", "protocol_attributes", "protocol_events", "to_ns"]

Attributes = dict[str, AttributeValue]
"""Span or event attributes (no None values: OTel drops them with a warning)."""

NS = "cyber_agent."


def to_ns(value: datetime | str | None) -> int:
    """Nanoseconds since the epoch of a stored timestamp (exact to the microsecond)."""
    moment = parse_time(value)
    seconds = int(moment.timestamp())
    return seconds * 1_000_000_000 + moment.microsecond * 1_000


def put(attributes: Attributes, key: str, value: Any) -> None:
    """Set `key` unless `value` is None; sequences become lists of one type (OTel's rule)."""
    if value is None:
        return
    if isinstance(value, (str, bool, int, float)):
        attributes[key] = value
    elif isinstance(value, Sequence):
        attributes[key] = [str(item) for item in value]
    else:
        attributes[key] = str(value)


def protocol_attributes(trace: Trace, usage: Mapping[str, Any] | None, content: ContentPolicy) -> Attributes:
    """Attributes of a trace's agent span: report, latest review, validator assignment, budget."""
    out: Attributes = {}
    protocol = trace.protocol
    if protocol.brief is not None:
        brief = protocol.brief
        put(out, NS + "brief.criteria", len(brief.completion_criteria))
        put(out, NS + "brief.objective", content.text(brief.objective))
    if protocol.report is not None:
        report = protocol.report
        put(out, NS + "report.outcome", report.outcome)
        put(out, NS + "report.submitted_by", report.submitted_by)
        put(out, NS + "report.outputs", len(report.outputs))
        put(out, NS + "report.artifacts", len(report.artifacts))
        put(out, NS + "report.evidence", len(report.evidence))
        put(out, NS + "report.open_issues", len(report.open_issues))
        put(out, NS + "report.summary", content.text(report.summary))
    if protocol.review is not None:
        put(out, NS + "review.decision", protocol.review.decision)
    if protocol.validator is not None:
        put(out, NS + "validator.scope", protocol.validator.scope)
        put(out, NS + "validator.target_trace_id", protocol.validator.target_trace_id)
        put(out, NS + "validator.criteria", len(protocol.validator.criteria))
    if protocol.validation is not None:
        put(out, NS + "validator.verdict", protocol.validation.verdict)
    if protocol.ended_by is not None:
        put(out, NS + "ended_by", protocol.ended_by.tool)
    setup = trace.root_setup
    if setup is not None and setup.resource_budget is not None:
        for field, value in setup.resource_budget.model_dump().items():
            put(out, f"{NS}budget.limit.{field}", value)
    for key, value in (usage or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            put(out, f"{NS}budget.used.{key}", value)
    if usage and usage.get("last_refusal"):
        put(out, NS + "budget.last_refusal", str(usage["last_refusal"]))
    return out


def _event(name: str, attributes: Attributes, at: datetime | str | None) -> Event:
    return Event(name, attributes, timestamp=to_ns(at))


def protocol_events(trace: Trace, events: Sequence[TraceEvent], content: ContentPolicy) -> list[Event]:
    """Span events of a trace: anchor, brief, validations, reviews, approvals, compactions; in time order."""
    out: list[Event] = []
    protocol = trace.protocol
    setup = trace.root_setup
    if setup is not None and setup.anchor is not None:
        attributes: Attributes = {NS + "anchor.criteria": len(setup.anchor.completion_criteria),
                                  NS + "anchor.constraints": len(setup.anchor.constraints)}
        put(attributes, NS + "anchor.hash", setup.anchor_hash)
        put(attributes, NS + "anchor.objective", content.text(setup.anchor.objective))
        put(attributes, NS + "anchor.completion_criteria", content.texts(setup.anchor.completion_criteria))
        out.append(_event(NS + "anchor", attributes, trace.created_at))
    if protocol.brief is not None:
        brief = protocol.brief
        attributes = {NS + "brief.criteria": len(brief.completion_criteria),
                      NS + "brief.expected_outputs": len(brief.expected_outputs),
                      NS + "brief.constraints": len(brief.constraints), NS + "brief.context_refs": len(brief.context_refs)}
        put(attributes, NS + "brief.objective", content.text(brief.objective))
        put(attributes, NS + "brief.reason", content.text(brief.reason))
        put(attributes, NS + "brief.completion_criteria", content.texts(brief.completion_criteria))
        put(attributes, NS + "brief.expected_outputs_text", content.texts(brief.expected_outputs))
        put(attributes, NS + "brief.constraints_text", content.texts(brief.constraints))
        out.append(_event(NS + "brief", attributes, trace.created_at))
    for validation in protocol.validations:
        attributes = {NS + "validation.scope": validation.scope, NS + "validation.verdict": validation.verdict,
                      NS + "validation.criteria_verdicts": [c.verdict for c in validation.criteria],
                      GEN_AI_EVALUATION_NAME: f"cyber_agent.validation.{validation.scope}",
                      GEN_AI_EVALUATION_SCORE_LABEL: validation.verdict}
        put(attributes, NS + "validation.validator_trace_id", validation.validator_trace_id)
        put(attributes, NS + "validation.criteria", content.texts([c.criterion for c in validation.criteria]))
        put(attributes, NS + "validation.evidence", content.texts([c.evidence for c in validation.criteria]))
        put(attributes, GEN_AI_EVALUATION_EXPLANATION, content.text(validation.summary or None))
        out.append(_event(NS + "validation", attributes, validation.created_at))
    for review in protocol.reviews:
        attributes = {NS + "review.child_trace_id": review.child_trace_id, NS + "review.decision": review.decision}
        put(attributes, NS + "review.feedback", content.text(review.feedback or None))
        out.append(_event(NS + "review", attributes, review.created_at))
    for event in events:
        if event.type in ("tool_approval_requested", "tool_approval_decided"):
            out.append(_approval_event(event, content))
        elif event.type == "compaction":
            payload = event.payload
            attributes = {}
            for key in ("kind", "tokens_before", "tokens_after", "kept_recent", "summary_chars"):
                put(attributes, f"{NS}compaction.{key}", payload.get(key))
            out.append(_event(NS + "compaction", attributes, event.created_at))
    out.sort(key=lambda e: e.timestamp)
    return out


def _approval_event(event: TraceEvent, content: ContentPolicy) -> Event:
    batch = event.payload.get("batch") or {}
    calls = [call for call in batch.get("calls") or [] if isinstance(call, dict)]
    attributes: Attributes = {NS + "approval.batch_id": str(batch.get("batch_id", "")),
                              NS + "approval.status": str(batch.get("status", "")),
                              NS + "approval.call_ids": [str(c.get("call_id", "")) for c in calls],
                              NS + "approval.tools": [str(c.get("name", "")) for c in calls]}
    if event.type == "tool_approval_decided":
        attributes[NS + "approval.decisions"] = [str(c.get("decision") or "") for c in calls]
        put(attributes, NS + "approval.feedback", content.texts([str(c.get("feedback") or "") for c in calls]))
    put(attributes, NS + "approval.arguments", content.json([c.get("arguments", {}) for c in calls]))
    name = NS + ("approval.decided" if event.type == "tool_approval_decided" else "approval.requested")
    return _event(name, attributes, event.created_at)


def approval_decisions(events: Sequence[TraceEvent]) -> dict[str, str]:
    """The reviewer's decision per tool call id, from the trace's `tool_approval_decided` events (latest wins)."""
    out: dict[str, str] = {}
    for event in events:
        if event.type != "tool_approval_decided":
            continue
        for call in (event.payload.get("batch") or {}).get("calls") or []:
            if isinstance(call, dict) and call.get("call_id") and call.get("decision"):
                out[str(call["call_id"])] = str(call["decision"])
    return out
