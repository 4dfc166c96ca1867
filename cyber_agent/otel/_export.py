"""Export a stored task tree as OpenTelemetry spans, after the fact (`export_otel`).

The tree is read with one `read_records` call (`cyber_agent/trace/protocols.py:TraceReader`),
parents first, so each child finds the tool call that started it in its parent's events. The
store is only read.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import GEN_AI_OPERATION_NAME

from cyber_agent.otel._content import DEFAULT_MAX_CONTENT_CHARS, ContentPolicy
from cyber_agent.otel._ids import agent_span_id, otel_trace_id
from cyber_agent.otel._spans import ChildLinks, SpanSettings, TraceView, child_links, trace_spans
from cyber_agent.trace.events import TraceEvent
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocols import TraceReader
from cyber_agent.trace.records import TraceRecord
from cyber_agent.trace.store_listing import DamagedEntry, damaged_record, warn_damaged

__all__ = ["OtelExport", "export_otel", "make_settings", "parent_span_of", "tree_spans", "view_of"]

SCOPE_NAME = "cyber_agent.otel"


@dataclass(frozen=True, kw_only=True)
class OtelExport:
    """What one export sent."""

    trace_id: str
    """The OTel trace id, 32 hex digits (a UUID root id without its dashes)."""
    spans: int
    """Spans handed to the exporter."""
    by_operation: dict[str, int] = field(default_factory=dict)
    """Span count per `gen_ai.operation.name` (invoke_agent, chat, execute_tool)."""
    exported: bool = False
    """True when the exporter reported success."""


def make_settings(*, capture_content: bool = False, max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS,
                  service_name: str = "cyber_agent") -> SpanSettings:
    """The settings every span of an export shares (content policy, resource, scope)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        package_version = version("cyber-agent")
    except PackageNotFoundError:  # running from a source tree that was never installed
        package_version = "0"
    return SpanSettings(
        content=ContentPolicy(capture=capture_content, max_chars=max_content_chars),
        resource=Resource.create({"service.name": service_name}),
        scope=InstrumentationScope(SCOPE_NAME, package_version),
    )


def view_of(record: TraceRecord) -> TraceView:
    """A JSON-mode record of the store as the typed view the spans are built from."""
    trace = Trace.model_validate(record.trace)
    return TraceView(
        trace=trace, messages=[Message.model_validate(m) for m in record.messages],
        events=[TraceEvent.model_validate(e) for e in record.events],
        usage=record.resource_usage if trace.is_root else None,
    )


def parent_span_of(trace: Trace, links: ChildLinks | None) -> int | None:
    """The span the trace's agent span hangs under: the call that started it, else its parent's agent span."""
    if trace.parent_trace_id is None:
        return None
    if not trace.is_validator and links is not None and trace.trace_id in links.started_by:
        return links.started_by[trace.trace_id]
    return agent_span_id(trace.parent_trace_id)


async def tree_spans(reader: TraceReader, root_id: str, *, settings: SpanSettings | None = None) -> list[ReadableSpan]:
    """Every span of the tree under `root_id` (parents first); TraceNotFoundError for an unknown root."""
    settings = settings or make_settings()
    records = await reader.read_records([root_id])
    links: dict[str, ChildLinks] = {}
    spans: list[ReadableSpan] = []
    damaged: list[DamagedEntry] = []
    for record in records:
        try:
            view = view_of(record)
        except ValueError as exc:  # a record that parses but is not a trace's: skipped and named, like the listing
            damaged.append(damaged_record(record.trace_id, f"{reader!r}/{record.trace_id}", exc))
            continue
        trace = view.trace
        links[trace.trace_id] = child_links(view.events)
        parent_links = links.get(trace.parent_trace_id or "")
        revisions = parent_links.revised_by.get(trace.trace_id, []) if parent_links is not None else []
        spans.extend(trace_spans(view, parent_span=parent_span_of(trace, parent_links), revisions=revisions,
                                 settings=settings))
    warn_damaged(damaged)
    return spans


def _summary(root_id: str, spans: list[ReadableSpan], exported: bool) -> OtelExport:
    operations = Counter(str((span.attributes or {}).get(GEN_AI_OPERATION_NAME, "")) for span in spans)
    first = spans[0].context if spans else None
    trace_id = first.trace_id if first is not None else otel_trace_id(root_id)
    return OtelExport(trace_id=format(trace_id, "032x"), spans=len(spans), by_operation=dict(operations),
                      exported=exported)


async def export_otel(
    store: TraceReader, root_id: str, *, exporter: SpanExporter, capture_content: bool = False,
    max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS, service_name: str = "cyber_agent",
) -> OtelExport:
    """Export the stored tree under `root_id` to `exporter`; the store is only read.

    Content (prompts, answers, tool arguments and results, the protocol's texts) is exported only
    with `capture_content=True`, each value cut to `max_content_chars` as valid JSON. The export
    call runs in a worker thread, so a slow collector never blocks the event loop.
    """
    settings = make_settings(capture_content=capture_content, max_content_chars=max_content_chars,
                             service_name=service_name)
    spans = await tree_spans(store, root_id, settings=settings)
    result = await asyncio.to_thread(exporter.export, spans) if spans else SpanExportResult.SUCCESS
    return _summary(root_id, spans, result is SpanExportResult.SUCCESS)
