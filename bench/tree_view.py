"""Benchmark the tree view's first paint in the kernel: 1k and 10k traces, and a 100k-trace forest.

    .venv/bin/python bench/tree_view.py                 # 1k, 10k, 100k forest; 3 reps (several minutes)
    .venv/bin/python bench/tree_view.py --quick         # 1k and 10k only, 1 rep
    .venv/bin/python bench/tree_view.py --json out.json

Trees come from `cyber_agent/notebook/sample_tree.py:awrite_sample_tree` (seeded) in an
in-memory store; the forest is `--roots` such trees of ~9,300 traces (what one recursive root
can reach). Per size, medians of:
- `frames`: `to_frames(store, roots, messages=False, events=False)` (the read);
- `view`: `TreeView(frames, roots)` (nodes, subtree totals, the first `page_limit` pages);
- `html`: `to_html()` (JSON, static outline, script): what the kernel sends;
- `paint` = view + html, the kernel's share of the first paint (the browser then draws only the
  rows on screen); and the peak Python memory of view + html (tracemalloc) and the HTML's size.
Targets (printed as verdicts, never asserted in tests): 10k traces < 1 s, 100k forest < 3 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cyber_agent.notebook.frames import ato_frames  # noqa: E402
from cyber_agent.notebook.sample_tree import awrite_sample_tree  # noqa: E402
from cyber_agent.notebook.tree_view import TreeView  # noqa: E402
from cyber_agent.trace import InMemoryTraceStore  # noqa: E402

TARGETS = {1_000: 1.0, 10_000: 1.0, 100_000: 3.0}


async def _store(traces: int, roots: int) -> tuple[InMemoryTraceStore, list[str]]:
    store = InMemoryTraceStore()
    ids = []
    for seed in range(roots):
        sample = await awrite_sample_tree(store, traces=traces // roots, seed=7 + seed)
        ids.append(sample.root_trace_id)
    return store, ids


def measure(traces: int, roots: int, reps: int) -> dict[str, Any]:
    store, ids = asyncio.run(_store(traces, roots))
    times: dict[str, list[float]] = {"frames": [], "view": [], "html": []}
    size = count = 0
    for _ in range(reps):
        started = time.perf_counter()
        frames = asyncio.run(ato_frames(store, ids, messages=False, events=False))
        times["frames"].append(time.perf_counter() - started)
        started = time.perf_counter()
        view = TreeView(frames, ids)
        times["view"].append(time.perf_counter() - started)
        started = time.perf_counter()
        text = view.to_html()
        times["html"].append(time.perf_counter() - started)
        size, count = len(text.encode()), len(view.nodes)
    tracemalloc.start()  # memory in a pass of its own: tracing slows Python several times
    TreeView(frames, ids).to_html()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    med = {k: statistics.median(v) for k, v in times.items()}
    paint = med["view"] + med["html"]
    return {"traces": count, "roots": roots, **{f"{k}_s": round(v, 3) for k, v in med.items()},
            "paint_s": round(paint, 3), "peak_mb": round(peak / 2**20, 1), "html_mb": round(size / 2**20, 2),
            "target_s": TARGETS.get(traces), "meets": paint < TARGETS.get(traces, float("inf"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--roots", type=int, default=11, help="roots of the 100k forest")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    reps = 1 if args.quick else args.reps
    sizes = [(1_000, 1), (10_000, 1)] + ([] if args.quick else [(100_000, args.roots)])
    results = []
    for traces, roots in sizes:
        row = measure(traces, roots, reps)
        results.append(row)
        print(f"{row['traces']:>7,} traces in {roots:>2} root(s): frames {row['frames_s']:.3f} s · view {row['view_s']:.3f} s"
              f" · html {row['html_s']:.3f} s · paint {row['paint_s']:.3f} s (target < {row['target_s']} s: "
              f"{'ok' if row['meets'] else 'MISSED'}) · peak {row['peak_mb']} MB · html {row['html_mb']} MB", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
