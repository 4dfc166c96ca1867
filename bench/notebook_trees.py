"""Benchmark big trees in the notebook: figure sizes and draw times, and the explorer's open time.

    .venv/bin/python bench/notebook_trees.py            # 25 / 100 / 1,000 traces and ~1,000 goals, 5 reps (~1.5 min)
    .venv/bin/python bench/notebook_trees.py --quick    # 3 reps
    .venv/bin/python bench/notebook_trees.py --json out.json --dir /dev/shm

Trees come from `cyber_agent/notebook/sample_tree.py:write_sample_tree` (seeded; an in-memory store
for the drawings, a file store too for the explorer). Per tree, medians of:
- `graph`: `trace_graph` / `goal_graph` from the store (frames without messages + names);
- `draw`: `draw_trace_tree` / `draw_goal_tree` of that graph (fold, layout, artists: the Figure);
- `png`: rendering that Figure as PNG at 100 dpi, as the inline backend does;
and the figure's size in inches and pixels, nodes drawn, labels drawn.
Targets (printed as verdicts, never asserted in tests): a 1,000-trace and a 1,000-goal tree draw
(graph + draw) in < 0.5 s into a figure of at most 10 × 26 inches; the explorer opens a 1,000-trace
tree in < 1 s. Also timed: the explorer's first display (its HTML: the tree view and the selected page)
and the report stepper (open, HTML) on the same tree. Rendering is reported beside them: text is the cost (~5–10 ms a label), which is
why a fitted drawing shows at most 60 nodes by default.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import io
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ipywidgets  # noqa: E402,F401  (imported before timing: a notebook has it loaded already)
from matplotlib.collections import PathCollection  # noqa: E402

from cyber_agent.notebook import (  # noqa: E402
    ReportStepper,
    TraceExplorer,
    draw_goal_tree,
    draw_trace_tree,
    goal_graph,
    plot_usage_by_agent,
    trace_graph,
)
from cyber_agent.notebook.sample_tree import awrite_sample_tree  # noqa: E402
from cyber_agent.notebook.tree_fit import MAX_HEIGHT, MAX_WIDTH  # noqa: E402
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore  # noqa: E402

DPI = 100
DRAW_TARGET = 0.5
OPEN_TARGET = 1.0


def _median(fn: Callable[[], Any], reps: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(reps):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def _figure_facts(fig: Any) -> dict[str, Any]:
    width, height = (float(v) for v in fig.get_size_inches())
    points = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    return {"inches": [round(width, 2), round(height, 2)], "pixels": [round(width * DPI), round(height * DPI)],
            "nodes_drawn": len(points[0].get_offsets()) if points else 0, "labels": len(fig.axes[0].texts)}


def _png(fig: Any) -> None:
    fig.savefig(io.BytesIO(), format="png", dpi=DPI)


def bench_tree(name: str, store: Any, root: str, reps: int, *, goals: bool = False) -> dict[str, Any]:
    """Medians of graph, draw and PNG for one tree, and the figure's facts."""
    build = (lambda: goal_graph(store, root, sub_traces=True)) if goals else (lambda: trace_graph(store, root))
    graph_s, graph = _median(build, reps)
    draw = (lambda: draw_goal_tree(graph)) if goals else (lambda: draw_trace_tree(graph))
    draw_s, fig = _median(draw, reps)
    png_s, _ = _median(lambda: _png(fig), reps)
    kinds = [d.get("kind", "trace") for _, d in graph.nodes(data=True)]
    facts = _figure_facts(fig)
    return {"tree": name, "traces": kinds.count("trace") if goals else graph.number_of_nodes(),
            "goals": kinds.count("goal") if goals else None, "graph_s": round(graph_s, 4), "draw_s": round(draw_s, 4),
            "png_s": round(png_s, 4), "graph_draw_s": round(graph_s + draw_s, 4), **facts,
            "within_caps": facts["inches"][0] <= MAX_WIDTH and facts["inches"][1] <= MAX_HEIGHT}


def bench_explorer(name: str, source: Any, root: str, reps: int) -> dict[str, Any]:
    """Medians of opening the explorer, expanding everything, and selecting a deep trace (its page and messages)."""
    open_s, explorer = _median(lambda: TraceExplorer(source, root), reps)
    expand_s, _ = _median(lambda: (explorer.collapse_all(), explorer.expand_all(root)), reps)
    deepest = max(explorer.visible, key=lambda t: explorer.texts[t].path.count("."))
    select_s, _ = _median(lambda: (explorer.select(root), explorer.select(deepest)), reps)
    display_s, html = _median(lambda: TraceExplorer(source, root).to_html(), reps)
    return {"store": name, "traces": len(explorer.frames.traces), "open_s": round(open_s, 4),
            "rows_at_open": 1 + len(explorer.children(root)), "expand_all_s": round(expand_s, 4),
            "select_s": round(select_s, 4), "open_and_display_s": round(display_s, 4), "html_mb": round(len(html) / 1e6, 2)}


def bench_stepper(name: str, source: Any, root: str, reps: int) -> dict[str, Any]:
    """Medians of opening the report stepper (every protocol step of the tree) and of its HTML."""
    open_s, stepper = _median(lambda: ReportStepper(source, root), reps)
    html_s, html = _median(stepper.to_html, reps)
    return {"store": name, "steps": len(stepper.items), "open_s": round(open_s, 4), "html_s": round(html_s, 4),
            "html_mb": round(len(html) / 1e6, 2)}


async def _sample(store: Any, traces: int) -> str:
    return (await awrite_sample_tree(store, traces=traces, seed=7)).root_trace_id


def main(argv: list[str] | None = None) -> int:
    """Run the benches, print the figures with verdicts, optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 reps instead of 5")
    parser.add_argument("--json", help="write the results to this file")
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    parser.add_argument("--dir", default=shm, help="parent directory of the temporary file store (default: /dev/shm if writable)")
    args = parser.parse_args(argv)
    reps = 3 if args.quick else 5
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; medians of {reps}; PNG at {DPI} dpi")
    draw_trace_tree(trace_graph(_memory(25)[0], _memory(25)[1]))  # warm up fonts and caches

    trees = []
    for size in (25, 100, 1000):
        store, root = _memory(size)
        trees.append(bench_tree(f"{size} traces", store, root, reps))
    store, root = _memory(540)  # ~255 agents of 4 goals each: a goal tree of ~1,000 goals with its sub-agents
    trees.append(bench_tree("~1,000 goals", store, root, reps, goals=True))
    print("\n== drawings ==")
    print(f"{'tree':<14} {'traces':>6} {'goals':>6} {'graph':>7} {'draw':>7} {'png':>7}  {'inches':>13} {'pixels':>11} "
          f"{'drawn':>5}  verdict")
    for t in trees:
        big = (t["goals"] or t["traces"]) >= 1000
        ok = t["graph_draw_s"] < DRAW_TARGET and t["within_caps"]
        verdict = ("met" if ok else "NOT MET") + f" (graph+draw < {DRAW_TARGET} s, within caps)" if big else "-"
        print(f"{t['tree']:<14} {t['traces']:>6} {t['goals'] or '':>6} {t['graph_s']:>6.3f}s {t['draw_s']:>6.3f}s "
              f"{t['png_s']:>6.3f}s  {t['inches'][0]:>5.1f} × {t['inches'][1]:<5.1f} {t['pixels'][0]:>5}×{t['pixels'][1]:<5} "
              f"{t['nodes_drawn']:>5}  {verdict}")
    usage_store, usage_root = _memory(1000)
    usage = plot_usage_by_agent(usage_store, usage_root)
    usage_facts = _figure_facts(usage) | {"rows": len(usage.axes[0].get_yticklabels())}
    print(f"plot_usage_by_agent, 1,000 traces: {usage_facts['rows']} rows, {usage_facts['inches'][0]} × "
          f"{usage_facts['inches'][1]} in ({usage_facts['pixels'][0]}×{usage_facts['pixels'][1]} px)")

    explorers = []
    store, root = _memory(1000)
    explorers.append(bench_explorer("memory", store, root, reps))
    with tempfile.TemporaryDirectory(prefix="cyber-agent-bench-trees-", dir=args.dir) as tmp:
        started = time.perf_counter()
        file_root = asyncio.run(_sample(FileSystemTraceStore(tmp), 1000))
        fill_s = time.perf_counter() - started
        explorers.append(bench_explorer("file", tmp, file_root, reps))
    print(f"\n== explorer on 1,000 traces (file store filled in {fill_s:.1f} s) ==")
    for e in explorers:
        verdict = "met" if e["open_s"] < OPEN_TARGET else "NOT MET"
        print(f"{e['store']:<7} open={e['open_s']:.3f} s ({e['rows_at_open']} rows)  expand all={e['expand_all_s']:.3f} s  "
              f"select a deep trace={e['select_s']:.3f} s  [{verdict}: open < {OPEN_TARGET} s]")
        print(f"        open + first display (HTML, {e['html_mb']} MB) = {e['open_and_display_s']:.3f} s")
    stepper = bench_stepper("memory", store, root, reps)
    print(f"\n== report stepper on 1,000 traces ==\n{stepper['steps']} steps: open={stepper['open_s']:.3f} s  "
          f"html={stepper['html_s']:.3f} s ({stepper['html_mb']} MB)")
    print("(other sessions share the cores: run when the load average is low)")
    if args.json:
        Path(args.json).write_text(json.dumps({"bench": "notebook_trees", "reps": reps, "dpi": DPI, "trees": trees,
                                               "usage_by_agent": usage_facts, "explorer": explorers, "stepper": stepper,
                                               "file_fill_s": round(fill_s, 2), "load_average": os.getloadavg()[0]},
                                              indent=1))
    return 0


@functools.cache
def _memory(traces: int) -> tuple[InMemoryTraceStore, str]:
    """An in-memory store holding a sample tree of `traces` traces (built once per size)."""
    store = InMemoryTraceStore()
    return store, asyncio.run(_sample(store, traces))


if __name__ == "__main__":
    sys.exit(main())
