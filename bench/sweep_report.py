"""Benchmark the "does delegation pay" report of a 1,000-cell sweep (target < 2 s).

    python bench/sweep_report.py                  # 1,000 cells (10 tasks × 2 models × 2 modes × 25 repeats), 5 reps
    python bench/sweep_report.py --quick          # 200 cells, 3 reps
    python bench/sweep_report.py --json out.json

The sweep runs once, offline, on the fallible model into an in-memory store (not timed). Then,
median over `--reps`, side by side in one run:
- `frame`: `sweep_frame(store, grid)` — the ledger read, one row per cell;
- `shape`: `with_shape(frame, store)` — every cell's tree read in one `read_records` call and
  its delegation shape;
- `report`: `delegation_report(frame)` — per mode × model: success with its Wilson interval,
  cost, tokens, calls, agents, shape means and rates;
- `chart`: `plot_success_vs_cost(report)` rendered to PNG;
- `total`: the four in a row — the figure the target is about.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cyber_agent.experiments import (  # noqa: E402
    Sweep,
    delegation_report,
    load_tasks,
    plot_success_vs_cost,
    run_sweep,
    sweep_frame,
    with_shape,
)
from cyber_agent.trace import InMemoryTraceStore  # noqa: E402

TARGET_S = 2.0


async def measure(cells: int, reps: int) -> dict[str, Any]:
    tasks = load_tasks(ROOT / "data" / "tasks" / "tasks.jsonl")
    chosen = tasks[:5] + tasks[8:13]  # 5 arithmetic, 5 lookups
    repeats = max(1, cells // (len(chosen) * 4))
    grid = Sweep(name="bench-report", tasks=chosen, models=["fallible:0.1", "fallible:0.3"],
                 modes=["legacy", "recursive"], repeats=repeats, workspace=str(ROOT))
    store = InMemoryTraceStore()
    started = time.perf_counter()
    await run_sweep(grid, store, concurrency=16)
    setup = time.perf_counter() - started
    timings: dict[str, list[float]] = {k: [] for k in ("frame", "shape", "report", "chart", "total")}
    report = None
    for _ in range(reps):
        t0 = time.perf_counter()
        frame = await sweep_frame(store, grid)
        t1 = time.perf_counter()
        frame = await with_shape(frame, store)
        t2 = time.perf_counter()
        report = delegation_report(frame)
        t3 = time.perf_counter()
        plot_success_vs_cost(report).savefig(io.BytesIO(), format="png")
        t4 = time.perf_counter()
        for key, value in zip(timings, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
            timings[key].append(value)
    assert report is not None
    columns = ["mode", "model", "runs", "success_rate", "ci_low", "ci_high", "cost_mean", "nodes_mean", "overcommitted_rate"]
    return {"cells": len(grid.cells()), "setup_s": round(setup, 1), "reps": reps,
            "median_s": {k: round(statistics.median(v), 4) for k, v in timings.items()},
            "target_s": TARGET_S, "met": statistics.median(timings["total"]) < TARGET_S,
            "report": report[columns].round(4).to_dict(orient="records")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="200 cells, 3 reps")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cells, reps = (200, 3) if args.quick else (args.cells, args.reps)
    result = asyncio.run(measure(cells, reps))
    m = result["median_s"]
    print(f"sweep report of {result['cells']} cells (sweep itself {result['setup_s']} s, not timed), median of {reps}:")
    print(f"  frame={m['frame']:.3f} s  shape={m['shape']:.3f} s  report={m['report']:.3f} s  chart={m['chart']:.3f} s  "
          f"total={m['total']:.3f} s  (target < {TARGET_S} s: {'met' if result['met'] else 'NOT met'})")
    for row in result["report"]:
        print(f"  {row['mode']:<9} {row['model']:<13} runs={row['runs']:<4} success={row['success_rate']:.3f} "
              f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}] cost={row['cost_mean']:.6f} nodes={row['nodes_mean']:.2f} "
              f"overcommitted={row['overcommitted_rate']:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
