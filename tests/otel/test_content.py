"""Opt-in content: captured as the GenAI conventions say, every value cut to size as JSON that parses."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conftest import SpanIndex
from cyber_agent.cli import DEMO_TASK
from cyber_agent.otel import ContentPolicy, bounded_json, export_otel

CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                "gen_ai.tool.call.arguments", "gen_ai.tool.call.result")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values, limit=st.integers(min_value=4, max_value=400))
def test_bounded_json_always_parses_and_fits(value, limit):
    text = bounded_json(value, limit)
    assert len(text) <= limit
    json.loads(text)


def test_bounded_json_keeps_what_fits_and_cuts_the_longest_strings_first():
    small = {"role": "user", "parts": [{"type": "text", "content": "hi"}]}
    assert json.loads(bounded_json(small, 1000)) == small
    big = [{"role": "user", "content": "a" * 5000}, {"role": "assistant", "content": "short"}]
    cut = json.loads(bounded_json(big, 300))
    assert cut[-1]["content"] == "short" and "truncated" in cut[0]["content"]
    many = [{"role": "user", "content": f"message {i}"} for i in range(200)]
    kept = json.loads(bounded_json(many, 200))
    assert kept and kept[-1] == {"role": "user", "content": "message 199"}, "the latest messages are kept"


def test_a_tiny_content_limit_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="max_content_chars must be at least 64, got 10"):
        ContentPolicy(capture=True, max_chars=10)


async def spans_with_content(store, root, limit: int) -> SpanIndex:
    exporter = InMemorySpanExporter()
    await export_otel(store, root, exporter=exporter, capture_content=True, max_content_chars=limit)
    return SpanIndex(list(exporter.get_finished_spans()))


@pytest.mark.parametrize("limit", [200, 100_000])
async def test_captured_content_follows_the_conventions_and_its_limit(recursive_tree, limit):
    store, root = recursive_tree
    index = await spans_with_content(store, root, limit)
    for span in index.spans:
        for key in CONTENT_KEYS:
            if key in span.attributes:
                assert len(span.attributes[key]) <= limit
                json.loads(span.attributes[key])
    for span in index.of_operation("chat"):
        output = json.loads(span.attributes["gen_ai.output.messages"])
        assert isinstance(output, list) and isinstance(json.loads(span.attributes["gen_ai.input.messages"]), list)
        if limit == 100_000:
            assert output[0]["role"] == "assistant"
            assert output[0]["finish_reason"] == ("tool_call" if span.attributes["cyber_agent.tool_calls"] else "stop")
    for span in index.of_operation("execute_tool"):
        assert isinstance(json.loads(span.attributes["gen_ai.tool.call.arguments"]), (dict, str))
    if limit == 100_000:
        first_chat = min(index.of_operation("chat"), key=lambda s: s.start_time)
        history = json.loads(first_chat.attributes["gen_ai.input.messages"])
        assert history[0] == {"role": "user", "parts": [{"type": "text", "content": DEMO_TASK}]}
        system = json.loads(first_chat.attributes["gen_ai.system_instructions"])
        assert system[0]["type"] == "text" and system[0]["content"].startswith("# cyber_agent")
        reads = [s for s in index.of_operation("execute_tool") if s.attributes["gen_ai.tool.name"] == "read_file"]
        assert any("date,region" in json.loads(s.attributes["gen_ai.tool.call.result"]) for s in reads)
        delegate = next(s for s in index.spans if s.attributes.get("gen_ai.agent.name") == "delegate")
        brief = next(e for e in delegate.events if e.name == "cyber_agent.brief")
        assert brief.attributes["cyber_agent.brief.objective"].startswith("Compute the revenue")
        assert delegate.attributes["cyber_agent.report.summary"]
