"""Benchmark the trace stores: add_message throughput and main-path load time.

    python bench/store.py            # 2,000 adds x 5 reps, 10,000-message main path x 5 reps
    python bench/store.py --quick    # 300 adds x 3 reps, 2,000-message main path x 3 reps
    python bench/store.py --dir /dev/shm   # put the file store on tmpfs: code cost without disk cost

Prints medians over the repetitions. Every add is a realistic agent step: an assistant turn
with text and one tool call, or a tool result of ~600 characters, under a goal two levels deep
(so each add updates goal stats, totals, the head and appends a `message_added` event).
"Warm" loads the main path through the instance that wrote it (the runner continuing);
"cold" through a fresh instance (another process reading the trace; the OS page cache is warm
in both). The in-memory store has only one instance, so only "warm".
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cyber_agent.trace import (
    FileSystemTraceStore,
    Goal,
    InMemoryTraceStore,
    Message,
    Trace,
)
from cyber_agent.trace.store_base import BaseTraceStore

StoreMaker = Callable[[Path], BaseTraceStore]

_TOOL_OUTPUT = ("line of tool output with some path/to/file.py:42 and a number 12345\n" * 9)[:600]


def _message(trace_id: str, step: int, parent: int | None) -> Message:
    if step % 2 == 0:
        return Message.create(
            trace_id=trace_id, role="assistant", goal_id="2", parent_sequence=parent,
            content={"text": f"Step {step}: I will read the next file.", "tool_calls": [
                {"id": f"call_{step}", "name": "read_file", "arguments": {"path": f"src/module_{step}.py"}}]},
            prompt_tokens=1200 + step, completion_tokens=80, cost=0.0004,
        )
    return Message.create(trace_id=trace_id, role="tool", goal_id="2", parent_sequence=parent,
                          tool_call_id=f"call_{step - 1}", tool_name="read_file", content=_TOOL_OUTPUT)


async def _new_trace(store: BaseTraceStore) -> str:
    trace = Trace.create(task="benchmark")
    await store.create_trace(trace)
    await store.add_goal(trace.trace_id, Goal(id="1", description="outer"))
    await store.add_goal(trace.trace_id, Goal(id="2", description="inner", parent_id="1"))
    return trace.trace_id


async def _fill(store: BaseTraceStore, trace_id: str, count: int) -> float:
    """Add `count` chained messages; return the seconds spent inside add_message."""
    parent: int | None = None
    spent = 0.0
    for step in range(count):
        message = _message(trace_id, step, parent)
        start = time.perf_counter()
        await store.add_message(message)
        spent += time.perf_counter() - start
        parent = message.sequence
    return spent


async def _bench_adds(make: StoreMaker, directory: str | None, count: int, reps: int) -> list[float]:
    """Adds per second of `reps` fresh traces of `count` messages each."""
    rates = []
    for _ in range(reps):
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            store = make(Path(tmp))
            trace_id = await _new_trace(store)
            rates.append(count / await _fill(store, trace_id, count))
    return rates


async def _bench_main_path(make: StoreMaker, directory: str | None, count: int, reps: int,
                           reopen: bool) -> tuple[list[float], list[float]]:
    """Seconds to load the main path of a `count`-message trace: through its writer, and a fresh instance."""
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        writer = make(Path(tmp))
        trace_id = await _new_trace(writer)
        await _fill(writer, trace_id, count)
        head = (await writer.get_trace(trace_id)).head_sequence  # type: ignore[union-attr]
        warm, cold = [], []
        for _ in range(reps):
            for store, times in ((writer, warm), (make(Path(tmp)), cold))[: 2 if reopen else 1]:
                start = time.perf_counter()
                path = await store.get_main_path_messages(trace_id, head)
                times.append(time.perf_counter() - start)
                assert len(path) == count
        return warm, cold


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table of medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, fewer repetitions")
    parser.add_argument("--dir", help="directory for the file store's temporary traces (default: system temp)")
    args = parser.parse_args(argv)
    adds, path_len, reps = (300, 2000, 3) if args.quick else (2000, 10_000, 5)

    stores: dict[str, StoreMaker] = {
        "memory": lambda _tmp: InMemoryTraceStore(),
        "file": lambda tmp: FileSystemTraceStore(tmp),
    }
    print(f"add_message: {adds} adds x {reps} reps; main path: {path_len} messages x {reps} reps (medians)")
    print(f"{'store':8} {'adds/s':>8} {'us/add':>8} {'(min-max)':>15}  {'path warm ms':>12} {'us/msg':>7}  "
          f"{'path cold ms':>12} {'us/msg':>7}")
    for name, make in stores.items():
        rates = asyncio.run(_bench_adds(make, args.dir, adds, reps))
        warm, cold = asyncio.run(_bench_main_path(make, args.dir, path_len, reps, reopen=name != "memory"))
        rate, w, c = statistics.median(rates), statistics.median(warm), statistics.median(cold or [0.0])
        spread = f"({1e6 / max(rates):.0f}-{1e6 / min(rates):.0f})"
        cold_cells = f"{c * 1e3:12.1f} {c / path_len * 1e6:7.1f}" if name != "memory" else f"{'-':>12} {'-':>7}"
        print(f"{name:8} {rate:8.0f} {1e6 / rate:8.1f} {spread:>15}  {w * 1e3:12.1f} {w / path_len * 1e6:7.1f}  {cold_cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
