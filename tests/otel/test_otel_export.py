"""Golden tests of the after-the-fact export: the demo trees as GenAI spans, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections import Counter
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from conftest import SpanIndex, run_demo
from cyber_agent.cli import DEMO_TASK
from cyber_agent.errors import TraceNotFoundError
from cyber_agent.otel import export_otel, otel_trace_id
from cyber_agent.trace import FileSystemTraceStore
from cyber_agent.trace.protocols import TraceReader

LEGACY_OUTLINE = """\
invoke_agent main <- -: chat x6; agent x1, evaluate x1, goal x5, read_file x1
  invoke_agent explore <- execute_tool agent: chat x3; evaluate x1, read_file x1
  invoke_agent explore <- execute_tool agent: chat x3; evaluate x1, read_file x1
  invoke_agent explore <- execute_tool agent: chat x3; evaluate x1, read_file x1
  invoke_agent explore <- execute_tool agent: chat x3; evaluate x1, read_file x1"""

_VALIDATOR = "invoke_agent validator <- invoke_agent explore: chat x2; read_file x1, read_trajectory x1, submit_validation x1"
_EXPLORE = "invoke_agent explore <- execute_tool agent: chat x4; read_file x2, submit_report x2"
RECURSIVE_OUTLINE = "\n".join([
    "invoke_agent main <- -: chat x5; agent x1, goal x5, review_task x1",
    "  invoke_agent delegate <- execute_tool agent: chat x11; agent x1, read_file x1, review_task x8, submit_report x1",
    *[line for _ in range(4) for line in ("    " + _EXPLORE, "      " + _VALIDATOR, "      " + _VALIDATOR)],
    "    invoke_agent validator <- invoke_agent delegate: chat x2; read_file x1, read_trajectory x1, submit_validation x1",
    "  invoke_agent validator <- invoke_agent main: chat x2; read_file x1, read_trajectory x1, submit_validation x1",
])


def outline(index: SpanIndex) -> str:
    """Agent spans depth first: name, the span it hangs under, and its chat / tool children."""
    lines: list[str] = []

    def walk(span: ReadableSpan, depth: int) -> None:
        kids = index.children(span)
        chats = sum(1 for k in kids if k.name.startswith("chat "))
        tools = Counter(k.name.removeprefix("execute_tool ") for k in kids if k.name.startswith("execute_tool "))
        parent = index.parent(span)
        lines.append("  " * depth + f"{span.name} <- {parent.name if parent else '-'}: chat x{chats}; "
                     + ", ".join(f"{name} x{count}" for name, count in sorted(tools.items())))
        for kid in kids:
            for agent in [kid, *index.children(kid)]:
                if agent.name.startswith("invoke_agent"):
                    walk(agent, depth + 1)

    roots = [s for s in index.spans if s.parent is None]
    assert len(roots) == 1, [s.name for s in roots]
    walk(roots[0], 0)
    return "\n".join(lines)


async def export(store: TraceReader, root: str, **options: object) -> SpanIndex:
    exporter = InMemorySpanExporter()
    result = await export_otel(store, root, exporter=exporter, **options)  # type: ignore[arg-type]
    spans = list(exporter.get_finished_spans())
    assert result.exported and result.spans == len(spans)
    assert result.trace_id == format(otel_trace_id(root), "032x")
    return SpanIndex(spans)


@pytest.mark.parametrize(("tree", "expected"), [("legacy_tree", LEGACY_OUTLINE), ("recursive_tree", RECURSIVE_OUTLINE)])
async def test_the_demo_tree_has_its_golden_shape(tree, expected, request):
    store, root = request.getfixturevalue(tree)
    index = await export(store, root)
    assert outline(index) == expected
    records = await store.read_records([root])
    messages = [m for r in records for m in r.messages]
    assert Counter(s.attributes["gen_ai.operation.name"] for s in index.spans) == {
        "invoke_agent": len(records),
        "chat": sum(m["role"] == "assistant" for m in messages),
        "execute_tool": sum(m["role"] == "tool" for m in messages),
    }
    assert len(index.by_id) == len(index.spans), "span ids are unique"
    assert {s.context.trace_id for s in index.spans} == {uuid.UUID(root).int}


@pytest.mark.parametrize("tree", ["legacy_tree", "recursive_tree"])
async def test_names_kinds_parents_and_genai_attributes(tree, request):
    store, root = request.getfixturevalue(tree)
    index = await export(store, root)
    for span in index.of_operation("invoke_agent"):
        attributes = span.attributes
        assert span.kind is SpanKind.INTERNAL and span.name == f"invoke_agent {attributes['gen_ai.agent.name']}"
        assert attributes["gen_ai.provider.name"] == "cyber_agent.demo" and attributes["gen_ai.request.model"] == "demo"
        assert attributes["gen_ai.conversation.id"] == root
        assert "gen_ai.usage.input_tokens" not in attributes, "usage only on chat spans"
        trace = await store.get_trace(attributes["gen_ai.agent.id"])
        assert attributes["cyber_agent.usage.input_tokens"] == trace.total_prompt_tokens
        assert span.start_time == int(trace.created_at.timestamp()) * 10**9 + trace.created_at.microsecond * 1000
    for span in index.of_operation("chat"):
        assert span.name == "chat demo" and span.kind is SpanKind.INTERNAL  # the demo model runs in-process
        assert index.parent(span).attributes["gen_ai.operation.name"] == "invoke_agent"
        message = await store.get_message(span.attributes["cyber_agent.message_id"])
        assert message.role == "assistant" and message.trace_id == index.parent(span).attributes["gen_ai.agent.id"]
        assert span.attributes["gen_ai.usage.output_tokens"] == message.completion_tokens
        assert span.attributes["gen_ai.response.model"] == "demo" and span.attributes["gen_ai.conversation.id"] == root
        assert span.end_time - span.start_time == int(message.duration_ms * 1_000_000)
    for span in index.of_operation("execute_tool"):
        message = await store.get_message(span.attributes["cyber_agent.message_id"])
        assert span.name == f"execute_tool {message.tool_name}" and span.kind is SpanKind.INTERNAL
        assert span.attributes["gen_ai.tool.call.id"] == message.tool_call_id
        assert span.attributes["gen_ai.tool.type"] == "function"
        assert index.parent(span).attributes["gen_ai.agent.id"] == message.trace_id
    for span in index.of_operation("invoke_agent"):
        parent = index.parent(span)
        if parent is not None and parent.attributes["gen_ai.operation.name"] == "execute_tool":
            assert parent.attributes["gen_ai.tool.name"] == "agent", "a child hangs under the call that created it"


@pytest.mark.parametrize("tree", ["legacy_tree", "recursive_tree"])
async def test_token_sums_over_chat_spans_equal_the_trace_totals(tree, request):
    store, root = request.getfixturevalue(tree)
    index = await export(store, root)
    traces = [await store.get_trace(s.attributes["gen_ai.agent.id"]) for s in index.of_operation("invoke_agent")]
    chats = index.of_operation("chat")
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats) == sum(t.total_prompt_tokens for t in traces) > 0
    assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in chats) == sum(t.total_completion_tokens for t in traces) > 0
    usage = await store.get_resource_usage(root)
    if usage is not None:  # the recursive tree's budget record counts the same tokens
        assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats) == usage.prompt_tokens
        assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in chats) == usage.completion_tokens


async def test_re_export_gives_identical_ids_and_times(recursive_tree):
    store, root = recursive_tree
    first, second = await export(store, root), await export(store, root)

    def key(index: SpanIndex) -> set[tuple]:
        return {(s.context.trace_id, s.context.span_id, s.parent.span_id if s.parent else None, s.name,
                 s.start_time, s.end_time) for s in index.spans}

    assert key(first) == key(second)


async def test_exporting_never_changes_the_store(tmp_path: Path):
    store = FileSystemTraceStore(tmp_path)
    root = await run_demo(store, "recursive")

    def digest() -> dict[str, str]:
        return {str(p.relative_to(tmp_path)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(tmp_path.rglob("*")) if p.is_file()}

    before = digest()
    await export(FileSystemTraceStore(tmp_path), root, capture_content=True)
    assert digest() == before


async def test_an_unknown_root_is_refused_by_name(legacy_tree):
    store, _ = legacy_tree
    with pytest.raises(TraceNotFoundError, match="no-such-root"):
        await export_otel(store, "no-such-root", exporter=InMemorySpanExporter())


async def test_content_is_off_by_default(legacy_tree):
    store, root = legacy_tree
    index = await export(store, root)
    values = [str(v) for s in index.spans for v in s.attributes.values()]
    values += [str(v) for s in index.spans for e in s.events for v in e.attributes.values()]
    assert not [v for v in values if DEMO_TASK in v or "unit_price" in v or "date,region" in v]
    keys = {k for s in index.spans for k in s.attributes}
    assert not keys & {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                       "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}


def test_ids_derive_from_the_root_id():
    root = str(uuid.uuid4())
    assert otel_trace_id(root) == uuid.UUID(root).int
    assert otel_trace_id("my-own-root") == otel_trace_id("my-own-root") != otel_trace_id("other-root")
    assert 0 < otel_trace_id("my-own-root") < 2**128


def test_export_from_a_fresh_event_loop_matches(legacy_tree):
    """`export_otel` is a coroutine: a script runs it with asyncio.run and gets the same spans."""
    store, root = legacy_tree
    first = asyncio.run(export(store, root))
    second = asyncio.run(export(store, root))
    assert {s.context.span_id for s in first.spans} == {s.context.span_id for s in second.spans}
    assert all(s.status.status_code is StatusCode.UNSET for s in first.spans)
