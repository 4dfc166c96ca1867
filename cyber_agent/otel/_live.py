"""Live export: a post-turn hook that sends each trace's spans as soon as its run ends.

    AgentRunner(trace_store=store, post_turn_hooks=[OtelObserver(store, exporter)])

The hook runs in a runner-owned background task (`cyber_agent/core/runner.py:AgentRunner.drain_hooks`):
it reads the finished trace through the store's read API, builds its spans and puts them on a
bounded queue. One worker thread sends each batch at once (no batching window, like the SDK's
`SimpleSpanProcessor`, so a notebook that stops loses nothing already queued) yet off the event
loop, so a slow or unreachable collector never delays a run. What cannot be queued or sent is
logged on the `cyber_agent.otel` logger, counted and dropped; the observer never raises into a
run and never writes to the store.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import TYPE_CHECKING

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cyber_agent.otel._content import DEFAULT_MAX_CONTENT_CHARS
from cyber_agent.otel._export import make_settings, parent_span_of
from cyber_agent.otel._spans import TraceView, child_links, trace_spans
from cyber_agent.trace.protocols import TraceReader

if TYPE_CHECKING:
    from cyber_agent.core.hooks import TurnSnapshot

__all__ = ["OtelObserver"]

logger = logging.getLogger("cyber_agent.otel")

EXPORT_BATCH = 512
"""Spans per `export` call (a large trace is sent in several)."""


def _fingerprint(span: ReadableSpan) -> int:
    attributes = sorted((key, repr(value)) for key, value in (span.attributes or {}).items())
    events = [(e.name, e.timestamp, sorted((k, repr(v)) for k, v in (e.attributes or {}).items())) for e in span.events]
    return hash((span.end_time, span.status.status_code, repr(attributes), repr(events), len(span.links)))


class OtelObserver:
    """Export each trace's spans when its run ends; never fails or delays the run."""

    name = "otel"
    settle_before_return = True
    """The runner waits (bounded) for this hook before a root's `run_result` returns: it only reads and queues."""

    def __init__(
        self, store: TraceReader, exporter: SpanExporter, *, capture_content: bool = False,
        max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS, service_name: str = "cyber_agent",
        max_queue_spans: int = 2048,
    ) -> None:
        if max_queue_spans < 1:
            raise ValueError(f"max_queue_spans must be at least 1, got {max_queue_spans}")
        self.store = store
        self.exporter = exporter
        self.max_queue_spans = max_queue_spans
        self._settings = make_settings(capture_content=capture_content, max_content_chars=max_content_chars,
                                       service_name=service_name)
        self._queue: queue.Queue[list[ReadableSpan] | None] = queue.Queue()
        self._idle = threading.Condition()
        self._pending = 0
        self._sent: dict[int, int] = {}
        self._thread: threading.Thread | None = None
        self._closed = False
        self.exported_spans = 0
        """Spans the exporter accepted."""
        self.dropped_spans = 0
        """Spans dropped: the queue was full, the export failed, or the observer was shut down."""
        self.failed_exports = 0
        """Export calls that failed or raised."""

    async def after_turn(self, snapshot: TurnSnapshot) -> None:
        """Queue the new spans of the trace whose run just ended and its children's agent spans.

        A root's and a validator's agent span go at their own run end; another child's at its
        parent's run end, when its protocol record is final. A span id is sent again only when
        the span changed (a continued trace).
        """
        try:
            spans = await self._spans_of(snapshot.trace_id)
        except Exception as exc:  # noqa: BLE001 - an exporter never fails a run
            logger.warning("otel: could not read trace %s for export: %s: %s", snapshot.trace_id,
                           type(exc).__name__, exc)
            return
        for start in range(0, len(spans), EXPORT_BATCH):
            self._enqueue(spans[start:start + EXPORT_BATCH])

    async def _spans_of(self, trace_id: str) -> list[ReadableSpan]:
        store = self.store
        trace = await store.get_trace(trace_id)
        if trace is None:
            return []
        messages = await store.get_trace_messages(trace_id)
        events = await store.get_events(trace_id)
        typed_usage = await store.get_resource_usage(trace_id) if trace.is_root else None
        usage = typed_usage.model_dump(mode="json") if typed_usage is not None else None  # as an export holds it
        links = None
        if trace.parent_trace_id is not None and not trace.is_validator:
            links = child_links(await store.get_events(trace.parent_trace_id))
        spans = trace_spans(
            TraceView(trace=trace, messages=messages, events=events, usage=usage),
            parent_span=parent_span_of(trace, links),
            revisions=links.revised_by.get(trace_id, []) if links is not None else [], settings=self._settings,
        )
        if not (trace.is_root or trace.is_validator):
            # A child's record keeps changing after its own run ended (its validator's verdict, this
            # parent's review, a revision): its agent span waits for the parent's run end below.
            # Backends such as Phoenix keep the first version of a span id they receive.
            spans = spans[1:]
        own = child_links(events)
        for child_id in own.children:  # validators are not among them: sent at their own run end
            child = await store.get_trace(child_id)
            if child is None or child.is_validator:
                continue
            view = TraceView(trace=child, events=await store.get_events(child_id))
            spans += trace_spans(view, parent_span=parent_span_of(child, own),
                                 revisions=own.revised_by.get(child.trace_id, []), settings=self._settings)
        return [span for span in spans if self._is_new(span)]

    def _is_new(self, span: ReadableSpan) -> bool:
        """True when this version of the span was not sent yet (agent spans change; chat / tool spans never)."""
        if span.context is None:
            return False
        version = _fingerprint(span)
        if self._sent.get(span.context.span_id) == version:
            return False
        self._sent[span.context.span_id] = version
        return True

    def _enqueue(self, batch: list[ReadableSpan]) -> None:
        with self._idle:
            if self._closed or self._pending + len(batch) > self.max_queue_spans:
                self.dropped_spans += len(batch)
                reason = "the observer is shut down" if self._closed else f"the queue holds {self._pending} spans"
                logger.warning("otel: dropped %d spans: %s (max_queue_spans=%d)", len(batch), reason,
                               self.max_queue_spans)
                return
            self._pending += len(batch)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="cyber_agent-otel-export", daemon=True)
                self._thread.start()
        self._queue.put(batch)

    def _work(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            try:
                result = self.exporter.export(batch)
            except Exception as exc:  # noqa: BLE001 - the worker must outlive a broken exporter
                logger.warning("otel: export of %d spans raised %s: %s", len(batch), type(exc).__name__, exc)
                result = SpanExportResult.FAILURE
            with self._idle:
                self._pending -= len(batch)
                if result is SpanExportResult.SUCCESS:
                    self.exported_spans += len(batch)
                else:
                    self.failed_exports += 1
                    self.dropped_spans += len(batch)
                    logger.warning("otel: the exporter did not accept %d spans; they are dropped", len(batch))
                if self._pending == 0:
                    self._idle.notify_all()

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every queued span was sent or dropped; False when `timeout` ran out first.

        Call it at the end of a notebook cell or before exit. A root's `run_result` returns only
        once this observer has queued the spans of every run of its tree (`settle_before_return`),
        so nothing of a finished run is still pending outside the queue.
        """
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout=timeout)

    def shutdown(self, timeout: float | None = 30.0) -> None:
        """Flush, stop the worker and shut the exporter down; later spans are dropped."""
        self.flush(timeout)
        with self._idle:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)
        self.exporter.shutdown()
