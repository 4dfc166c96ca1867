"""Benchmark the notebook helpers: drawing big trees, and frames of many messages.

    .venv/bin/python bench/notebook.py            # 1,000-node trees x 5 reps; 100k messages x 2 reps (~1.5 min)
    .venv/bin/python bench/notebook.py --quick    # 1,000-node trees x 3 reps; 10k messages x 2 reps (~20 s)
    .venv/bin/python bench/notebook.py --dir /tmp # put the file store on disk (default: /dev/shm if writable)

Prints medians. Targets (printed as verdicts, never asserted in tests):
- a 1,000-node tree draws (layout + artists + PNG at 80 dpi) well under a second;
- `to_frames` of a file store holding N messages costs at most 1.5x reading and `json.loads`-ing
  the same files into a list (every message file, meta.json, goal.json, events.jsonl; the GC
  paused in both, as a careful loader does), run back to back; wall and CPU clocks are printed.
The store (a root and ten sub-traces sharing the N messages) is filled through the TraceStore
API (`add_message`), as runs would fill it, one process per core.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import networkx as nx  # noqa: E402

from cyber_agent.notebook import draw_tree, to_frames  # noqa: E402
from cyber_agent.trace import FileSystemTraceStore, Goal, Message, Trace  # noqa: E402

_STATUSES = ["completed"] * 8 + ["failed", "stopped", "running"]


def random_tree(n: int, seed: int = 7) -> nx.DiGraph:
    """A random recursive tree: deep and irregular, the hard case for layout and labels."""
    rng = random.Random(seed)
    graph = nx.DiGraph(root=0)
    graph.add_node(0, status="completed", role="main", label="main")
    for i in range(1, n):
        graph.add_node(i, status=rng.choice(_STATUSES), role=rng.choice(["explore", "delegate"]), label=f"agent {i}")
        graph.add_edge(rng.randrange(i), i)
    return graph


def agent_tree(n: int, seed: int = 7) -> nx.DiGraph:
    """A recursive-mode-shaped tree: up to 6 children per agent, depth <= 5, a validator per agent."""
    rng = random.Random(seed)
    graph = nx.DiGraph(root=0)
    graph.add_node(0, status="completed", role="main", label="main")
    frontier, depth, count = [0], {0: 0}, 1
    while count < n and frontier:
        parent = frontier.pop(0)
        for _ in range(rng.randint(3, 7)):
            if count >= n:
                break
            role = "validator" if rng.random() < 0.2 else "delegate"
            graph.add_node(count, status=rng.choice(_STATUSES), role=role, label=f"{role} {count}")
            graph.add_edge(parent, count)
            depth[count] = depth[parent] + 1
            if role != "validator" and depth[count] < 5:
                frontier.append(count)
            count += 1
    return graph


def bench_draw(graph: nx.DiGraph, reps: int) -> tuple[float, float]:
    """Median seconds of (draw_tree, draw_tree + PNG)."""
    draw, total = [], []
    for _ in range(reps):
        start = time.perf_counter()
        fig = draw_tree(graph, title="bench")
        mid = time.perf_counter()
        fig.savefig(io.BytesIO(), format="png", dpi=80)
        end = time.perf_counter()
        draw.append(mid - start)
        total.append(end - start)
    return statistics.median(draw), statistics.median(total)


async def _fill_trace(base: Path, messages: int, parent: str | None) -> str:
    """One trace of `messages` alternating assistant / tool messages, written through the store API."""
    store = FileSystemTraceStore(base, checkpoint_every=1000, checkpoint_interval=60.0)  # the bench is about reading
    trace = Trace.create(task="benchmark", parent_trace_id=parent, agent_type="explore" if parent else "main")
    await store.create_trace(trace)
    await store.add_goal(trace.trace_id, Goal(id="1", description="outer"))
    await store.add_goal(trace.trace_id, Goal(id="2", description="inner", parent_id="1"))
    previous = None
    output = ("line of tool output with some path/to/file.py:42 and a number 12345\n" * 9)[:600]
    for step in range(messages):
        if step % 2 == 0:
            message = Message.create(
                trace_id=trace.trace_id, role="assistant", goal_id="2", parent_sequence=previous,
                content={"text": f"Step {step}: read the next file.", "tool_calls": [
                    {"id": f"call_{step}", "name": "read_file", "arguments": {"path": f"src/m_{step}.py"}}]},
                prompt_tokens=1200, completion_tokens=80, cost=0.0004,
            )
        else:
            message = Message.create(trace_id=trace.trace_id, role="tool", goal_id="2", parent_sequence=previous,
                                     tool_call_id=f"call_{step - 1}", tool_name="read_file", content=output)
        await store.add_message(message)
        previous = message.sequence
    await store.update_trace(trace.trace_id, status="completed")
    return trace.trace_id


def _fill_child(base: str, messages: int, parent: str) -> str:
    return asyncio.run(_fill_trace(Path(base), messages, parent))


def fill(base: Path, messages: int, traces: int = 10) -> str:
    """A root and `traces` sub-traces sharing `messages` messages, filled by parallel processes; return the root id."""
    root = asyncio.run(_fill_trace(base, 0, None))
    workers = max(1, min(traces, os.cpu_count() or 1))
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_fill_child, [str(base)] * traces, [messages // traces] * traces, [root] * traces))
    return root


def raw_read(base: Path) -> list[object]:
    """Read and json.loads every file to_frames reads into a list, the cyclic GC paused as to_frames does."""
    gc.disable()
    try:
        parsed: list[object] = []
        for directory in base.iterdir():
            _raw_read(directory, parsed)
        return parsed
    finally:
        gc.enable()


def _raw_read(directory: Path, parsed: list[object]) -> None:
    for name in ("meta.json", "goal.json"):
        with open(directory / name, "rb") as handle:
            parsed.append(json.loads(handle.read()))
    with os.scandir(directory / "messages") as entries:
        for entry in entries:
            with open(entry.path, "rb") as handle:
                parsed.append(json.loads(handle.read()))
    with open(directory / "events.jsonl", "rb") as handle:
        for line in handle.read().split(b"\n"):
            if line:
                parsed.append(json.loads(line))


def bench_frames(base: Path, trace_id: str, reps: int) -> dict[str, list[float]]:
    """Wall and CPU seconds of raw read+parse and of to_frames, run back to back, per rep."""
    out: dict[str, list[float]] = {"raw_wall": [], "frames_wall": [], "raw_cpu": [], "frames_cpu": []}
    for _ in range(reps):
        gc.collect()  # start each timed call from a clean heap: no collection owed by the previous one
        wall, cpu = time.perf_counter(), time.process_time()
        raw_read(base)
        wall_mid, cpu_mid = time.perf_counter(), time.process_time()
        gc.collect()
        wall_mid2, cpu_mid2 = time.perf_counter(), time.process_time()
        result = to_frames(base, trace_id)
        wall_end, cpu_end = time.perf_counter(), time.process_time()
        assert len(result.messages) > 0
        del result
        wall_end -= wall_mid2 - wall_mid
        cpu_end -= cpu_mid2 - cpu_mid
        out["raw_wall"].append(wall_mid - wall)
        out["frames_wall"].append(wall_end - wall_mid)
        out["raw_cpu"].append(cpu_mid - cpu)
        out["frames_cpu"].append(cpu_end - cpu_mid)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benches and print medians with verdicts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer reps, 10k messages instead of 100k")
    parser.add_argument("--messages", type=int, default=None, help="messages in the frames bench")
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    parser.add_argument("--dir", default=shm, help="parent directory of the temporary file store (default: /dev/shm "
                        "when writable: 100k files on a disk make the fill and the cleanup, not the code, dominate)")
    args = parser.parse_args(argv)
    tree_reps, frame_reps = (3, 2) if args.quick else (5, 2)
    messages = args.messages or (10_000 if args.quick else 100_000)

    print("== drawing 1,000-node trees (layout + artists; + PNG 80 dpi) ==")
    draw_tree(random_tree(50))  # warm up fonts and caches
    for name, graph in (("random recursive tree", random_tree(1000)), ("agent-shaped tree", agent_tree(1000))):
        draw, total = bench_draw(graph, tree_reps)
        verdict = "ok" if total < 1.0 else "SLOW"
        print(f"{name:<24} nodes={graph.number_of_nodes():>5}  draw={draw:.3f} s  draw+png={total:.3f} s  [{verdict}: < 1 s]")

    print(f"\n== frames of {messages:,} messages (11 traces) vs raw read+parse of the same files ==")
    with tempfile.TemporaryDirectory(prefix="cyber-agent-bench-", dir=args.dir) as tmp:
        base = Path(tmp)
        start = time.perf_counter()
        trace_id = fill(base, messages)
        print(f"filled through the store API in {time.perf_counter() - start:.1f} s")
        times = bench_frames(base, trace_id, frame_reps)
        for clock in ("wall", "cpu"):
            raw, frames = times[f"raw_{clock}"], times[f"frames_{clock}"]
            ratios = [f / r for f, r in zip(frames, raw)]
            ratio = statistics.median(ratios)
            verdict = "ok" if ratio <= 1.5 else "OVER"
            print(f"{clock:>4}: raw read+json.loads={statistics.median(raw):.2f} s  to_frames={statistics.median(frames):.2f} s  "
                  f"ratio={ratio:.2f}x (paired: {', '.join(f'{r:.2f}' for r in ratios)})  [{verdict}: <= 1.5x]")
        print("(other sessions share the cores: the CPU-time ratio is the steadier figure)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
