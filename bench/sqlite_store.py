"""Benchmark the SQLite store (issue 16): frames vs pd.read_sql, add_message at 10k/100k, the budget race.

    .venv/bin/python bench/sqlite_store.py                 # frames of 100k messages, adds to 100k, race (~3 min)
    .venv/bin/python bench/sqlite_store.py --quick         # 10k messages, adds to 10k, race (~30 s)
    .venv/bin/python bench/sqlite_store.py --big           # also 1,000,000 messages in 1,000 traces (~10 min)
    .venv/bin/python bench/sqlite_store.py --json out.json

- frames: `to_frames` of a store holding N messages (a root and ten sub-traces; an assistant turn
  with one tool call, then a ~600-character result) on SQLite, beside `pd.read_sql` of the same
  message and event rows and beside `to_frames` of the same tree in a file store; the three run
  round robin, medians of `--reps`. Target: SQLite frames <= 2x read_sql.
- adds: `add_message` through the TraceStore API into one trace, median microseconds per add over
  the 1,000 adds before 10k and before 100k messages (flat: the 100k figure within 1.5x of 10k).
- race: 4 processes reserve agents and calls of one root's budget 100 times each (the
  reliability test's workload); limits held, wall time.
- big: 1,000,000 messages in 1,000 traces: `to_frames` time and peak RSS (in a child process),
  and a per-agent cost aggregate in SQL vs pandas over the frames.
Stores are filled through `import_records` from generated records (the write path is the adds
case's), in `--dir` (default: a temporary directory on disk).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from cyber_agent.core.resource_budget import ResourceBudgetController  # noqa: E402
from cyber_agent.errors import BudgetExceededError  # noqa: E402
from cyber_agent.notebook import to_frames  # noqa: E402
from cyber_agent.trace import FileSystemTraceStore, Message, SQLiteTraceStore, Trace  # noqa: E402
from cyber_agent.trace.budget_limits import ResourceBudget  # noqa: E402
from cyber_agent.trace.records import TraceRecord  # noqa: E402

OUTPUT = ("line of tool output with some path/to/file.py:42 and a number 12345\n" * 9)[:600]


def tree_records(messages: int, traces: int) -> list[TraceRecord]:
    """A root and `traces` sub-traces sharing `messages` messages, as records an export would hold."""
    root = Trace.create(task="benchmark", agent_type="main")
    records = [_record(root, 0)]
    for _ in range(traces):
        child = Trace.create(task="benchmark", parent_trace_id=root.trace_id, agent_type="explore")
        records.append(_record(child, messages // traces))
    return records


def _record(trace: Trace, n: int) -> TraceRecord:
    tid = trace.trace_id
    messages, events = [], []
    tokens = cost = 0.0
    for step in range(n):
        if step % 2 == 0:
            message = Message.create(
                trace_id=tid, role="assistant", goal_id="1", parent_sequence=step or None,
                content={"text": f"Step {step}: read the next file.", "tool_calls": [
                    {"id": f"call_{step}", "name": "read_file", "arguments": {"path": f"src/m_{step}.py"}}]},
                prompt_tokens=1200, completion_tokens=80, cost=0.0004)
        else:
            message = Message.create(trace_id=tid, role="tool", goal_id="1", parent_sequence=step,
                                     tool_call_id=f"call_{step - 1}", tool_name="read_file", content=OUTPUT)
        message.assign(step + 1)
        data = message.model_dump(mode="json")
        tokens += message.prompt_tokens + message.completion_tokens
        cost += message.cost
        messages.append(data)
        events.append({"event_id": step + 1, "trace_id": tid, "type": "message_added",
                       "payload": {"message": data, "affected_goals": []}, "created_at": data["created_at"]})
    meta = trace.model_copy(update={"total_messages": n, "head_sequence": n, "total_tokens": int(tokens),
                                    "total_cost": cost, "status": "completed"}).model_dump(mode="json")
    return TraceRecord(trace=meta, goal_tree={"mission": "benchmark", "goals": []}, messages=messages, events=events,
                       resource_usage=None, tool_approvals=None)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def bench_frames(base: Path, messages: int, reps: int) -> dict[str, Any]:
    records = tree_records(messages, 10)
    sqlite = SQLiteTraceStore(base / "frames.db")
    files = FileSystemTraceStore(base / "frames-files")
    started = time.perf_counter()
    asyncio.run(sqlite.import_records(records))
    fill_sqlite = time.perf_counter() - started
    asyncio.run(files.import_records(records))
    del records
    times: dict[str, list[float]] = {"sqlite_to_frames": [], "read_sql": [], "file_to_frames": []}
    for _ in range(reps):  # round robin: a burst of load hits all three alike
        t = time.perf_counter()
        frames = to_frames(sqlite)
        times["sqlite_to_frames"].append(time.perf_counter() - t)
        t = time.perf_counter()
        raw = [pd.read_sql(f"SELECT * FROM {table}", sqlite.connection()) for table in ("messages", "events")]
        times["read_sql"].append(time.perf_counter() - t)
        t = time.perf_counter()
        to_frames(files)
        times["file_to_frames"].append(time.perf_counter() - t)
    assert len(frames.messages) == len(raw[0]) == messages
    medians = {k: _median(v) for k, v in times.items()}
    return {"messages": messages, "reps": reps, "fill_sqlite_s": fill_sqlite, **{f"{k}_s": v for k, v in medians.items()},
            "sqlite_over_read_sql": medians["sqlite_to_frames"] / medians["read_sql"],
            "file_over_sqlite": medians["file_to_frames"] / medians["sqlite_to_frames"], "samples": times}


async def _grow(store: SQLiteTraceStore, sizes: list[int], window: int) -> dict[int, float]:
    trace = Trace.create(task="adds")
    await store.create_trace(trace)
    out: dict[int, float] = {}
    previous = None
    chunk: list[float] = []
    for step in range(1, max(sizes) + 1):
        message = Message.create(trace_id=trace.trace_id, role="tool" if step % 2 else "assistant", parent_sequence=previous,
                                 content=OUTPUT if step % 2 else {"text": "next", "tool_calls": [
                                     {"id": f"c{step}", "name": "read_file", "arguments": {"path": "a.py"}}]},
                                 prompt_tokens=10, completion_tokens=2)
        t = time.perf_counter()
        await store.add_message(message)
        if step > max(sizes) - window or any(s - window < step <= s for s in sizes):
            chunk.append(time.perf_counter() - t)
        previous = message.sequence
        if step in sizes:
            out[step] = _median(chunk) * 1e6
            chunk = []
    return out


def bench_adds(base: Path, sizes: list[int]) -> dict[str, Any]:
    us = asyncio.run(_grow(SQLiteTraceStore(base / "adds.db"), sizes, 1000))
    low, high = min(sizes), max(sizes)
    return {"median_us_per_add": us, "high_over_low": us[high] / us[low] if low != high else 1.0}


def _racer(url_path: str, root_id: str) -> tuple[int, int]:
    async def run() -> tuple[int, int]:
        store = SQLiteTraceStore(url_path)
        limits = ResourceBudget(max_total_agents=20, max_llm_calls=61, reserved_final_calls=1, max_total_tokens=10**9)
        controller = ResourceBudgetController(store=store, root_trace_id=root_id, budget=limits, lock=asyncio.Lock())
        granted = refused = 0
        for _ in range(25):
            for step in (controller.reserve_agents(2), controller.reserve_llm_call()):
                try:
                    await step
                    granted += 1
                except BudgetExceededError:
                    refused += 1
            await controller.book_llm_usage(prompt_tokens=3, completion_tokens=2, cost_usd=0.0)
        return granted, refused

    return asyncio.run(run())


def bench_race(base: Path) -> dict[str, Any]:
    path = base / "race.db"
    store = SQLiteTraceStore(path)
    root = Trace.create(task="race")
    asyncio.run(store.create_trace(root))
    limits = ResourceBudget(max_total_agents=20, max_llm_calls=61, reserved_final_calls=1, max_total_tokens=10**9)
    asyncio.run(ResourceBudgetController(store=store, root_trace_id=root.trace_id, budget=limits,
                                         lock=asyncio.Lock()).initialize())
    started = time.perf_counter()
    with ProcessPoolExecutor(4) as pool:
        results = list(pool.map(_racer, [str(path)] * 4, [root.trace_id] * 4))
    seconds = time.perf_counter() - started
    record = asyncio.run(store.get_resource_usage(root.trace_id))
    usage = record.model_dump() if record is not None else {}
    held = usage.get("agents", 99) <= 20 and usage.get("llm_calls", 99) <= 60
    return {"processes": 4, "attempts": 200, "granted": sum(g for g, _ in results), "seconds": seconds,
            "agents": usage.get("agents"), "llm_calls": usage.get("llm_calls"), "limits_held": held}


_BIG_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from cyber_agent.notebook import to_frames
from cyber_agent.trace import SQLiteTraceStore
store = SQLiteTraceStore(sys.argv[1])
t = time.perf_counter(); frames = to_frames(store); frames_s = time.perf_counter() - t
t = time.perf_counter(); pandas_cost = frames.messages.groupby("trace_id")["cost"].sum(); pandas_s = time.perf_counter() - t
t = time.perf_counter()
sql_cost = store.connection().execute("SELECT trace_id, sum(cost) FROM messages GROUP BY trace_id").fetchall()
sql_s = time.perf_counter() - t
assert len(sql_cost) == len(pandas_cost)
print(json.dumps({"messages": len(frames.messages), "frames_s": frames_s, "cost_by_agent_pandas_s": pandas_s,
                  "cost_by_agent_sql_s": sql_s, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def bench_big(base: Path) -> dict[str, Any]:
    store = SQLiteTraceStore(base / "big.db")
    started = time.perf_counter()
    for batch in range(10):  # 100 traces of 1,000 messages per batch keeps the generator's memory small
        records = tree_records(100_000, 100)
        asyncio.run(store.import_records(records if batch == 0 else records[1:]))
    fill = time.perf_counter() - started
    out = subprocess.run([sys.executable, "-c", _BIG_CHILD, str(base / "big.db"), str(Path(__file__).resolve().parents[1])],
                         capture_output=True, text=True, check=True)
    return {"fill_s": fill, **json.loads(out.stdout)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--big", action="store_true")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="sqlite-bench-", dir=args.dir))
    load = os.getloadavg()[0]
    report: dict[str, Any] = {"load_before": load, "cpus": os.cpu_count()}
    report["frames"] = bench_frames(base, 10_000 if args.quick else 100_000, args.reps)
    f = report["frames"]
    print(f"frames of {f['messages']:,} messages: sqlite to_frames {f['sqlite_to_frames_s']:.2f} s, "
          f"pd.read_sql {f['read_sql_s']:.2f} s -> {f['sqlite_over_read_sql']:.2f}x (target <= 2x); "
          f"file store to_frames {f['file_to_frames_s']:.2f} s")
    report["adds"] = bench_adds(base, [10_000] if args.quick else [10_000, 100_000])
    a = report["adds"]
    print("add_message median us: " + ", ".join(f"{k:,}: {v:.0f}" for k, v in a["median_us_per_add"].items())
          + f" (largest/smallest {a['high_over_low']:.2f}, target <= 1.5)")
    report["race"] = bench_race(base)
    r = report["race"]
    print(f"budget race: {r['processes']} processes, 100 reservations of each kind, limits held: {r['limits_held']} "
          f"(agents {r['agents']}/20, calls {r['llm_calls']}/60), {r['seconds']:.2f} s")
    if args.big:
        report["big"] = bench_big(base)
        b = report["big"]
        print(f"1M messages / 1,000 traces: fill {b['fill_s']:.0f} s, to_frames {b['frames_s']:.1f} s, "
              f"peak RSS {b['peak_rss_mb']:.0f} MB; cost by agent: SQL {b['cost_by_agent_sql_s']:.2f} s, "
              f"pandas {b['cost_by_agent_pandas_s']:.2f} s")
    report["load_after"] = os.getloadavg()[0]
    print(f"load average before/after: {load:.1f} / {report['load_after']:.1f} on {os.cpu_count()} cores")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return 0 if report["race"]["limits_held"] else 1


if __name__ == "__main__":
    sys.exit(main())
