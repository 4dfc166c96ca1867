"""Benchmark the OpenTelemetry export: a 1,000-trace tree, and the span counts of the demo trees.

    python bench/otel_export.py                  # 1,000 traces, file and memory store, 5 reps (~1 min)
    python bench/otel_export.py --quick          # 2 reps
    python bench/otel_export.py --traces 200 --json out.json --dir /dev/shm

The tree is written directly through the store's public write API (no model runs): a root and
children breadth first, `--fanout` (10) per parent, until `--traces` traces exist. Each trace
holds what a short agent run stores: a system and a user message, an assistant turn with one
tool call and its result, and a final assistant answer (two model calls with usage); a parent's
tool call starts its children (`tool_call_started` + `sub_trace_started` events), so every child
hangs under an `execute_tool agent` span. Measured, median over `--reps`:

- `build`: `tree_spans` (one `read_records` call, typed views, spans) on a fresh store instance;
- `export`: `export_otel` to the SDK's `InMemorySpanExporter` (build plus the export call);
- `encode`: the OTLP protobuf request of all spans (`encode_spans(...).SerializeToString()`),
  what `OTLPSpanExporter` sends, without the network.

The span counts of the offline demo trees (legacy and recursive, `cyber-agent demo`) are printed
too (no timing). The export of one tree is checked: one root span, every parent present, token
sums over `chat` spans equal to the trace totals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK  # noqa: E402
from cyber_agent.core.config import RunConfig  # noqa: E402
from cyber_agent.core.runner import AgentRunner  # noqa: E402
from cyber_agent.llm.types import ToolCall  # noqa: E402
from cyber_agent.otel import export_otel, tree_spans  # noqa: E402
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore, Message, MessageContent, Trace  # noqa: E402
from cyber_agent.trace.protocols import TraceStore  # noqa: E402
from cyber_agent.trace.trace_id import new_sub_trace_id  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


async def _write_trace(store: TraceStore, trace: Trace, children: list[str]) -> None:
    """One short agent run: system, user, a tool call (starting `children`), its result, the answer."""
    trace_id = await store.create_trace(trace)
    add = store.add_message
    system = await add(Message.create(trace_id=trace_id, role="system", content="You are a worker."))
    user = await add(Message.create(trace_id=trace_id, role="user", content=trace.task, parent_sequence=1))
    tool = "agent" if children else "read_file"
    call = ToolCall(id="call_0", name=tool, arguments={"tasks": children} if children else {"path": "data/sales.csv"})
    assistant = Message.create(trace_id=trace_id, role="assistant", content=MessageContent(tool_calls=[call]),
                               parent_sequence=2, prompt_tokens=420, completion_tokens=35, duration_ms=800.0,
                               metadata={"model": "bench"})
    assistant_id = await add(assistant)
    await store.append_event(trace_id, "progress", {"stage": "tool_call_started", "assistant_id": assistant_id,
                                                    "tool_call_id": "call_0", "tool": tool})
    for child in children:
        await store.append_event(trace_id, "sub_trace_started", {"trace_id": child, "parent_goal_id": None,
                                                                 "agent_type": "explore", "task": "part"})
    await add(Message.create(trace_id=trace_id, role="tool", content="result " * 40, tool_call_id="call_0",
                             tool_name=tool, parent_sequence=3, duration_ms=12.0))
    await add(Message.create(trace_id=trace_id, role="assistant", content=MessageContent(text="done: 42"),
                             parent_sequence=4, prompt_tokens=600, completion_tokens=12, duration_ms=500.0,
                             metadata={"model": "bench"}))
    await store.update_trace(trace_id, status="completed", result_summary="done: 42")
    del system, user


async def build_tree(store: TraceStore, traces: int, fanout: int) -> str:
    """Write a breadth-first tree of `traces` traces; return the root id."""
    root = Trace.create(task="the root task", agent_type="main", model="demo")
    plan: dict[str, list[str]] = {root.trace_id: []}
    order, queue, count = [root.trace_id], [root.trace_id], 1
    while queue and count < traces:
        parent = queue.pop(0)
        for seq in range(1, fanout + 1):
            if count >= traces:
                break
            child = new_sub_trace_id(parent, "explore", seq)
            plan[parent].append(child)
            plan[child] = []
            order.append(child)
            queue.append(child)
            count += 1
    parents = {child: parent for parent, kids in plan.items() for child in kids}
    for trace_id in order:
        trace = root if trace_id == root.trace_id else Trace(
            trace_id=trace_id, task="a part", parent_trace_id=parents[trace_id], agent_type="explore", model="demo",
            lineage={"root_trace_id": root.trace_id, "depth": trace_id.count("@"), "created_by_tool": "agent"})
        await _write_trace(store, trace, plan[trace_id])
    return root.trace_id


def _check(spans: list[ReadableSpan], traces: int) -> None:
    ids = {s.context.span_id for s in spans if s.context}
    roots = [s for s in spans if s.parent is None]
    missing = [s.name for s in spans if s.parent is not None and s.parent.span_id not in ids]
    agents = [s for s in spans if s.name.startswith("invoke_agent")]
    if len(roots) != 1 or missing or len(agents) != traces:
        raise AssertionError(f"bad tree: {len(roots)} roots, {len(missing)} orphans, {len(agents)} agent spans")
    chat = sum(int((s.attributes or {}).get("gen_ai.usage.input_tokens", 0)) for s in spans)  # type: ignore[arg-type]
    if chat != sum(int((s.attributes or {})["cyber_agent.usage.input_tokens"]) for s in agents):  # type: ignore[arg-type]
        raise AssertionError("token sums over chat spans differ from the trace totals")


async def time_tree(kind: str, traces: int, fanout: int, reps: int, directory: str | None) -> dict[str, Any]:
    """Write the tree once, then time build, export and encode `reps` times."""
    with tempfile.TemporaryDirectory(dir=directory, prefix="bench-otel-") as tmp:
        store: TraceStore = FileSystemTraceStore(tmp) if kind == "file" else InMemoryTraceStore()
        started = time.perf_counter()
        root = await build_tree(store, traces, fanout)
        written = time.perf_counter() - started
        build, export, encode = [], [], []
        spans: list[ReadableSpan] = []
        size = 0
        for _ in range(reps):
            reader = FileSystemTraceStore(tmp) if kind == "file" else store  # a fresh reader: nothing cached
            begin = time.perf_counter()
            spans = await tree_spans(reader, root)
            build.append(time.perf_counter() - begin)
            exporter = InMemorySpanExporter()
            begin = time.perf_counter()
            await export_otel(reader, root, exporter=exporter)
            export.append(time.perf_counter() - begin)
            begin = time.perf_counter()
            size = len(encode_spans(spans).SerializeToString())
            encode.append(time.perf_counter() - begin)
        _check(spans, traces)
        operations = Counter(str((s.attributes or {}).get("gen_ai.operation.name")) for s in spans)
        return {"store": kind, "traces": traces, "spans": len(spans), "by_operation": dict(operations),
                "write_s": written, "build_s": statistics.median(build), "export_s": statistics.median(export),
                "encode_s": statistics.median(encode), "otlp_bytes": size,
                "samples": {"build": build, "export": export, "encode": encode}}


async def demo_counts() -> dict[str, dict[str, int]]:
    """Span counts of the offline demo trees."""
    out: dict[str, dict[str, int]] = {}
    for mode in ("legacy", "recursive"):
        store = InMemoryTraceStore()
        config = RunConfig(model="demo", workspace=str(REPO), agent_mode=mode,  # type: ignore[arg-type]
                           root_task_anchor=DEMO_ANCHOR if mode == "recursive" else None)
        result = await AgentRunner(trace_store=store, workspace=REPO).run_result(
            [{"role": "user", "content": DEMO_TASK}], config)
        done = await export_otel(store, result.trace.trace_id, exporter=InMemorySpanExporter())
        out[mode] = {"spans": done.spans, **done.by_operation}
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--fanout", type=int, default=10)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 repetitions")
    parser.add_argument("--store", choices=["file", "memory", "both"], default="both")
    parser.add_argument("--dir", default=None, help="directory for the file store (e.g. /dev/shm)")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    reps = 2 if args.quick else args.reps
    kinds = ["file", "memory"] if args.store == "both" else [args.store]
    rows = [asyncio.run(time_tree(kind, args.traces, args.fanout, reps, args.dir)) for kind in kinds]
    demos = asyncio.run(demo_counts())
    print(f"\n{'store':7} {'traces':>6} {'spans':>6}  {'build s':>8} {'export s':>8} {'encode s':>8} {'OTLP KiB':>9}"
          f"  {'us/span':>7}")
    for row in rows:
        print(f"{row['store']:7} {row['traces']:>6} {row['spans']:>6}  {row['build_s']:8.3f} {row['export_s']:8.3f} "
              f"{row['encode_s']:8.3f} {row['otlp_bytes'] / 1024:9.0f}  {row['export_s'] / row['spans'] * 1e6:7.1f}")
    print(f"(median of {reps}; spans by operation: {rows[0]['by_operation']})")
    for mode, counts in demos.items():
        print(f"demo {mode}: {counts['spans']} spans = {counts.get('invoke_agent', 0)} invoke_agent + "
              f"{counts.get('chat', 0)} chat + {counts.get('execute_tool', 0)} execute_tool")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "demo": demos, "reps": reps}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
