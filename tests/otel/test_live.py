"""Live export: the observer sends what the after-the-fact export would, and never fails or blocks a run."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conftest import run_demo
from cyber_agent.core.approvals import CallDecision, current_batch, decide_batch
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.otel import OtelObserver, tree_spans
from cyber_agent.trace import InMemoryTraceStore
from test_protocol import approval_registry


def latest(spans: Sequence[ReadableSpan]) -> dict[int, ReadableSpan]:
    """The last version sent of each span id."""
    out: dict[int, ReadableSpan] = {}
    for span in spans:
        out[span.context.span_id] = span
    return out


def same(a: ReadableSpan, b: ReadableSpan) -> bool:
    return (a.name, a.kind, a.parent, a.start_time, a.end_time, dict(a.attributes), a.status.status_code,
            [(e.name, e.timestamp, dict(e.attributes)) for e in a.events], [link.context.span_id for link in a.links]) == (
        b.name, b.kind, b.parent, b.start_time, b.end_time, dict(b.attributes), b.status.status_code,
        [(e.name, e.timestamp, dict(e.attributes)) for e in b.events], [link.context.span_id for link in b.links])


async def no_hook_failures(store: InMemoryTraceStore) -> None:
    for trace in await store.list_traces(limit=None):
        events = await store.get_events(trace.trace_id)
        assert not [e for e in events if e.type == "progress" and "post_turn_hook" in e.payload], trace.trace_id


async def test_live_export_ends_with_what_the_after_the_fact_export_builds():
    store, exporter = InMemoryTraceStore(), InMemorySpanExporter()
    observer = OtelObserver(store, exporter)
    root = await run_demo(store, "recursive", post_turn_hooks=[observer])
    assert observer.flush(10)
    sent = latest(exporter.get_finished_spans())
    expected = {span.context.span_id: span for span in await tree_spans(store, root)}
    assert set(sent) == set(expected)
    assert [i for i in expected if not same(sent[i], expected[i])] == []
    ids = [s.context.span_id for s in exporter.get_finished_spans()]
    assert len(ids) == len(set(ids)), "each span is sent once, in its final form (Phoenix keeps the first)"
    assert observer.dropped_spans == 0 and observer.exported_spans == len(exporter.get_finished_spans())
    await no_hook_failures(store)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_an_unreachable_collector_is_logged_and_dropped_and_the_run_completes(caplog):
    store = InMemoryTraceStore()
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{closed_port()}/v1/traces", timeout=0.5)
    observer = OtelObserver(store, exporter)
    with caplog.at_level(logging.WARNING, logger="cyber_agent.otel"):
        root = await run_demo(store, "legacy", post_turn_hooks=[observer])  # asserts the run completed
        assert observer.flush(60)
    assert observer.exported_spans == 0 and observer.failed_exports >= 1
    assert observer.dropped_spans >= len(await tree_spans(store, root)), "every span was tried and dropped"
    assert any(r.name == "cyber_agent.otel" and "dropped" in r.getMessage() for r in caplog.records)
    await no_hook_failures(store)
    observer.shutdown(5)


class GatedExporter(SpanExporter):
    """Blocks every export until the test opens the gate; then accepts."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.gate.wait(30)
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


async def test_the_queue_is_bounded_and_a_stuck_collector_never_blocks_the_run(caplog):
    store, exporter = InMemoryTraceStore(), GatedExporter()
    observer = OtelObserver(store, exporter, max_queue_spans=12)
    with caplog.at_level(logging.WARNING, logger="cyber_agent.otel"):
        await run_demo(store, "legacy", post_turn_hooks=[observer])  # finishes while the exporter is stuck
    assert observer.dropped_spans > 0 and exporter.spans == []
    assert any("queue holds" in r.getMessage() for r in caplog.records)
    exporter.gate.set()
    assert observer.flush(10)
    assert observer.exported_spans == len(exporter.spans) > 0


class BrokenExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise RuntimeError("collector client crashed")


async def test_an_exporter_that_raises_never_fails_the_run(caplog):
    store = InMemoryTraceStore()
    observer = OtelObserver(store, BrokenExporter())
    with caplog.at_level(logging.WARNING, logger="cyber_agent.otel"):
        await run_demo(store, "legacy", post_turn_hooks=[observer])
        assert observer.flush(10)
    assert observer.exported_spans == 0 and observer.failed_exports >= 1
    assert any("collector client crashed" in r.getMessage() for r in caplog.records)
    await no_hook_failures(store)


async def test_a_continued_trace_sends_its_new_spans_and_its_agent_span_again():
    store, registry, exporter = InMemoryTraceStore(), approval_registry(), InMemorySpanExporter()
    observer = OtelObserver(store, exporter)
    reply = ScriptedModel.tool_calls(("look", {"path": "a"}, "c1"), ("deploy", {"target": "prod"}, "c2"))
    with ScriptedModel([reply]) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry, post_turn_hooks=[observer])
        first = await runner.run_result([{"role": "user", "content": "ship it"}], RunConfig())
        await runner.drain_hooks()
    trace_id = first.trace.trace_id
    batch = await current_batch(store, trace_id)
    await decide_batch(store, trace_id, batch.batch_id, [CallDecision(call_id="c1", decision="approve"),
                                                         CallDecision(call_id="c2", decision="approve")])
    with ScriptedModel(["done"]) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry, post_turn_hooks=[observer])
        await runner.run_result([], RunConfig(trace_id=trace_id))
        await runner.drain_hooks()
    assert observer.flush(10)
    sent = exporter.get_finished_spans()
    agents = [s for s in sent if s.name.startswith("invoke_agent")]
    assert [a.attributes["cyber_agent.status"] for a in agents] == ["waiting_confirmation", "completed"]
    others = [s for s in sent if not s.name.startswith("invoke_agent")]
    assert sorted(s.name for s in others) == ["chat demo", "chat demo", "execute_tool deploy", "execute_tool look"]
    observer.shutdown(5)
    with ScriptedModel(["hello"]) as model:  # a run after shutdown: its spans are dropped, the run is not harmed
        runner = AgentRunner(trace_store=store, llm_call=model, post_turn_hooks=[observer])
        late = await runner.run_result([{"role": "user", "content": "hi"}], RunConfig())
        await runner.drain_hooks()
    assert late.trace.status == "completed" and observer.dropped_spans == 2  # its agent span and its chat span
