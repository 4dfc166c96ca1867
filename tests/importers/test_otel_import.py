"""OpenTelemetry GenAI spans: pydantic-ai's own instrumentation, and a round trip of our export_otel."""

from __future__ import annotations

import json
from collections import Counter

import pytest

pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim (in dev) is not installed")
pytest.importorskip("opentelemetry.sdk")

from otlp_files import write_otlp_json  # noqa: E402
from pydantic_ai_run import run_agents  # noqa: E402

from cyber_agent.errors import ImportFormatError  # noqa: E402
from cyber_agent.importers import import_runs, import_spans  # noqa: E402
from cyber_agent.trace import open_store  # noqa: E402


def _chat_usage(spans, agent: str) -> tuple[int, int]:
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"
             and s.attributes.get("gen_ai.agent.name") == agent]
    return (sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats),
            sum(s.attributes["gen_ai.usage.output_tokens"] for s in chats))


@pytest.mark.parametrize("content", [True, False], ids=["content", "structure-only"])
async def test_pydantic_ai_spans_nest_as_agents_with_usage_and_tool_calls(content):
    spans = await run_agents(include_content=content)
    store = open_store("memory:")
    [root_id] = await import_spans(spans, store)
    records = await store.read_records([root_id])
    by_name = {r.trace["name"]: r for r in records}
    assert set(by_name) == {"main", "helper"}
    main, helper = by_name["main"], by_name["helper"]
    assert helper.trace["parent_trace_id"] == main.trace_id and helper.trace["lineage"]["depth"] == 1
    for name, record in by_name.items():
        assert (record.trace["total_prompt_tokens"], record.trace["total_completion_tokens"]) == _chat_usage(spans, name)
    roles = Counter(m["role"] for m in main.messages)
    assert roles["assistant"] == 2 and roles["tool"] == 1
    [call] = [c for m in main.messages if isinstance(m["content"], dict) for c in m["content"]["tool_calls"]]
    assert call["name"] == "ask_helper"
    [started] = [e for e in await store.get_events(main.trace_id) if e.type == "sub_trace_started"]
    assert started.payload["trace_id"] == helper.trace_id
    assert helper.trace["provenance"]["started_by_call"] == call["id"]
    if content:
        assert main.trace["task"] == "What is 1+2?" and main.trace["result_summary"] == "The answer is 3"
        assert [m for m in main.messages if m["role"] == "tool"][0]["content"] == "3"
        assert "content" not in main.trace["provenance"]["missing"]
    else:
        assert "content" in main.trace["provenance"]["missing"]
        assert main.trace["task"] is None and "task" in main.trace["provenance"]["missing"]
        texts = [m["content"]["text"] if isinstance(m["content"], dict) else m["content"] for m in main.messages]
        assert texts == [None] * len(main.messages)  # no text was captured: none is made up


async def test_our_own_export_round_trips_through_an_otlp_json_file(demo_store, tmp_path):
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from cyber_agent.otel import export_otel

    store, root = demo_store
    exporter = InMemorySpanExporter()
    await export_otel(store, root, exporter=exporter, capture_content=True)
    path = write_otlp_json(exporter.get_finished_spans(), tmp_path / "spans.json")
    target = open_store("memory:")
    summary = await import_runs([path], target, source="otel")
    original = {r.trace_id: r for r in await store.read_records([root])}
    imported = {r.trace["provenance"]["ids"]["agent.id"]: r for r in await target.read_records(summary.roots)}
    assert set(imported) == set(original)  # every trace, validators included
    new_ids = {old: r.trace_id for old, r in imported.items()}
    for trace_id, record in original.items():
        twin = imported[trace_id]
        parent = record.trace["parent_trace_id"]
        assert twin.trace["parent_trace_id"] == (new_ids[parent] if parent else None)
        assert twin.trace["lineage"]["depth"] == record.trace["lineage"]["depth"]
        assert twin.trace["total_tokens"] == record.trace["total_tokens"]
        assert twin.trace["total_cost"] == pytest.approx(record.trace["total_cost"])
        main_path = [m for m in record.messages if m.get("branch") is None]
        assert Counter(m["role"] for m in twin.messages) == Counter(m["role"] for m in main_path)
        assert twin.trace["status"] == record.trace["status"]


async def test_base64_ids_read_too_and_a_file_without_spans_is_named(tmp_path):
    spans = await run_agents()
    path = write_otlp_json(spans, tmp_path / "b64.json", hex_ids=False)
    summary = await import_runs([path], open_store("memory:"))  # detected as otel
    assert summary.imported[0].source == "otel" and summary.traces == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x"}]}]}]}), encoding="utf-8")
    with pytest.raises(ImportFormatError) as caught:
        await import_runs([bad], open_store("memory:"), source="otel")
    assert str(bad) in str(caught.value) and "resourceSpans[0].scopeSpans[0].spans[0]" in str(caught.value)
