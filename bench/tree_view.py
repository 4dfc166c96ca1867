"""Benchmark the tree view's first paint: 1k and 10k traces, and a 100k-trace forest, in the kernel and in Chromium.

    .venv/bin/python bench/tree_view.py                 # 1k, 10k, 100k forest; 3 reps (several minutes)
    .venv/bin/python bench/tree_view.py --quick         # 1k and 10k only, 1 rep
    .venv/bin/python bench/tree_view.py --no-browser    # kernel side only
    .venv/bin/python bench/tree_view.py --no-forest     # 1k and 10k, 3 reps
    .venv/bin/python bench/tree_view.py --json out.json
    .venv/bin/python bench/tree_view.py --before main --no-forest   # same-run pair against the code at a ref

Trees come from `cyber_agent/notebook/sample_tree.py:awrite_sample_tree` (seeded) in an
in-memory store. A size the sampler cannot reach in one root (it stops at 8,252 traces under
its quota) gets more roots until the count is reached; the forest is `--roots` trees of ~9,100
traces (what one recursive root can reach). Per size, medians of:
- `read`: `store.read_records(roots, messages=False, events=False, goals=False, fields=VIEW_FIELDS)` (the
  store's share; `cyber_agent/notebook/tree_view.py:_read`, what `atree_view` reads);
- `view`: the node columns (paths, titles, verdicts, totals) from those records;
- `pages`: the first `page_limit` (`PAGE_LIMIT`, 200) pages, breadth first: their whole records and their last
  20 messages read (`TreeView._afill_pages`), then built;
- `html`: `to_html()` (column-wise JSON, pages, static outline, script): what the kernel sends;
- `kernel` = read + view + pages + html: from the store to the HTML payload ready (the target);
- `chromium`: the HTML written as a page (`to_document`), opened from file:// in headless Debian
  Chromium (playwright), time from navigation start to the script's first paint of the rows
  (`window.__caTreePaint`, set by `cyber_agent/notebook/tree_view_js.py`), median of the reps;
- `export`: `export_html` (every page, every node's last 20 messages), one run;
and the peak Python memory of `TreeView(store, roots).to_html()` (tracemalloc, a pass of its own)
and the HTML's size. Targets (printed as verdicts, never asserted in tests): 10k traces < 1 s,
100k forest < 3 s, for `kernel` (and `chromium` shown beside it).

`--before REF`: a same-run pair. Two worker processes, one importing `cyber_agent` as it is at
REF (`bench/targets.py:before_tree`), one this checkout, each write the same seeded store, then
take turns rep by rep (the order alternating), so a machine's load falls on both alike; each
reports its stage medians and its peak memory. The stages are the ones the code at REF has (a
ref without `TreeView._afill_pages` reads whole records and builds pages as it did).
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
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, os.environ.get("TREE_BENCH_TREE") or str(Path(__file__).resolve().parents[1]))  # --before's worker

from cyber_agent.notebook.sample_tree import awrite_sample_tree  # noqa: E402
from cyber_agent.notebook import tree_view as tv  # noqa: E402
from cyber_agent.notebook.tree_view import TreeView, export_html  # noqa: E402
from cyber_agent.trace.bulk import gc_paused  # noqa: E402
from cyber_agent.trace import InMemoryTraceStore  # noqa: E402

TARGETS = {1_000: 1.0, 10_000: 1.0, 100_000: 3.0}
CHROMIUM = Path("/usr/bin/chromium")


async def _store(traces: int, roots: int) -> tuple[InMemoryTraceStore, list[str]]:
    """`traces` traces in at least `roots` trees (more when the sampler stops short of a tree's share)."""
    store = InMemoryTraceStore()
    ids: list[str] = []
    left, seed = traces, 7
    while left > 0:
        share = -(-left // max(1, roots - len(ids)))
        sample = await awrite_sample_tree(store, traces=share, seed=seed)
        ids.append(sample.root_trace_id)
        left -= sample.traces
        seed += 1
    return store, ids


def _chromium_paint(documents: list[Path]) -> list[float]:
    """Seconds from navigation start to the view's first paint, per document (headless Chromium, offline)."""
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        for doc in documents:
            context = browser.new_context(offline=True)
            page = context.new_page()
            page.goto(doc.as_uri(), timeout=120_000)
            page.wait_for_function("() => window.__caTreePaint && window.__caTreePaint.length > 0", timeout=120_000)
            out.append(float(page.evaluate("() => window.__caTreePaint[0]")) / 1000.0)
            context.close()
        browser.close()
    return out


def _stages(store: InMemoryTraceStore, ids: list[str]) -> tuple[dict[str, float], TreeView, str]:
    """One rep: the stages of `atree_view` (what `TreeView(store, roots)` does), timed one by one."""
    times = {}
    started = time.perf_counter()
    new = hasattr(TreeView, "_afill_pages")  # the code at a `--before` ref may predate the selective read
    records = asyncio.run(tv._read(store, ids) if new else store.read_records(ids, messages=False, events=False))
    times["read"] = time.perf_counter() - started
    started = time.perf_counter()
    with gc_paused():
        view = TreeView(records, ids, _pages_later=True)
    view._store = store
    if new:
        view._projected = True  # as atree_view sets it
    times["view"] = time.perf_counter() - started
    started = time.perf_counter()
    if new:
        asyncio.run(view._afill_pages())
    else:
        chosen = view._page_ids()
        read = asyncio.run(tv._read_messages(store, chosen))
        with gc_paused():
            view._pages.update(view._build_pages(chosen, read))
    times["pages"] = time.perf_counter() - started
    started = time.perf_counter()
    text = view.to_html()
    times["html"] = time.perf_counter() - started
    del records  # held by the view too (as in atree_view): freed with it, after the first paint
    return times, view, text


def _peak(store: InMemoryTraceStore, ids: list[str]) -> float:
    """Peak Python memory (MB) of `TreeView(store, ids).to_html()` (tracemalloc: a pass of its own, it slows Python)."""
    tracemalloc.start()
    TreeView(store, ids).to_html()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return round(peak / 2**20, 1)


def measure(traces: int, roots: int, reps: int, browser: bool) -> dict[str, Any]:
    store, ids = asyncio.run(_store(traces, roots))
    times: dict[str, list[float]] = {"read": [], "view": [], "pages": [], "html": []}
    size = count = 0
    text = ""
    for _ in range(reps):
        rep, view, text = _stages(store, ids)
        for stage, seconds in rep.items():
            times[stage].append(seconds)
        size, count = len(text.encode()), len(view)
    med = {k: statistics.median(v) for k, v in times.items()}
    kernel = med["read"] + med["view"] + med["pages"] + med["html"]
    row: dict[str, Any] = {"traces": count, "roots": len(ids), **{f"{k}_s": round(v, 3) for k, v in med.items()},
                           "kernel_s": round(kernel, 3)}
    with tempfile.TemporaryDirectory() as folder:
        if browser and CHROMIUM.exists():
            doc = Path(folder) / "view.html"
            doc.write_text(view.to_document(), encoding="utf-8")
            row["chromium_s"] = round(statistics.median(_chromium_paint([doc] * reps)), 3)
        started = time.perf_counter()
        exported = export_html(store, ids, Path(folder) / "export.html")
        row["export_s"] = round(time.perf_counter() - started, 3)
        row["export_mb"] = round(exported.stat().st_size / 2**20, 2)
    del view, text
    target = TARGETS.get(traces)
    row.update({"peak_mb": _peak(store, ids), "html_mb": round(size / 2**20, 2), "target_s": target,
                "meets": kernel < (target or float("inf"))})
    return row


def _worker(traces: int, roots: int) -> int:
    """`--before`'s worker: write the store, then answer `rep` (a JSON line of stage seconds) and `peak` on stdin."""
    store, ids = asyncio.run(_store(traces, roots))
    print(json.dumps({"ready": True, "traces": sum(1 for _ in store._records)}), flush=True)
    for line in sys.stdin:
        if line.strip() == "rep":
            times, view, _ = _stages(store, ids)
            del view
            print(json.dumps(times), flush=True)
        elif line.strip() == "peak":
            print(json.dumps({"peak_mb": _peak(store, ids)}), flush=True)
    return 0


def pair(traces: int, roots: int, reps: int, ref: str) -> dict[str, Any]:
    """Kernel stage medians of the code at `ref` and of this checkout, rep by rep in turns (see the docstring)."""
    from targets import before_tree, env_for

    commit = subprocess.run(["git", "rev-parse", ref], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    trees = {"before": before_tree(commit), "after": None}
    workers = {}
    for side, tree in trees.items():
        env = {**env_for(tree), **({"TREE_BENCH_TREE": str(tree)} if tree is not None else {})}
        workers[side] = subprocess.Popen([sys.executable, __file__, "--worker", str(traces), str(roots)], env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        for worker in workers.values():
            assert worker.stdout is not None
            json.loads(worker.stdout.readline())
        times: dict[str, dict[str, list[float]]] = {side: {} for side in workers}
        for rep in range(reps):
            for side in (["after", "before"] if rep % 2 == 0 else ["before", "after"]):
                worker = workers[side]
                assert worker.stdin is not None and worker.stdout is not None
                worker.stdin.write("rep\n")
                worker.stdin.flush()
                for stage, seconds in json.loads(worker.stdout.readline()).items():
                    times[side].setdefault(stage, []).append(seconds)
        peaks = {}
        for side, worker in workers.items():
            assert worker.stdin is not None and worker.stdout is not None
            worker.stdin.write("peak\n")
            worker.stdin.flush()
            peaks[side] = json.loads(worker.stdout.readline())["peak_mb"]
    finally:
        for worker in workers.values():
            if worker.stdin is not None:
                worker.stdin.close()
            worker.wait()
    row: dict[str, Any] = {"traces": traces, "roots": roots, "ref": commit[:12], "reps": reps}
    for side, stages in times.items():
        med = {stage: statistics.median(values) for stage, values in stages.items()}
        row[side] = {**{f"{k}_s": round(v, 3) for k, v in med.items()}, "kernel_s": round(sum(med.values()), 3),
                     "peak_mb": peaks[side]}
    row["ratio"] = round(row["before"]["kernel_s"] / row["after"]["kernel_s"], 2)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--roots", type=int, default=11, help="roots of the 100k forest")
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium first paint")
    parser.add_argument("--no-forest", action="store_true", help="skip the 100k forest (its store takes minutes to write)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--before", metavar="REF", help="a same-run pair against the code at REF (kernel stages only)")
    parser.add_argument("--worker", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(*args.worker)
    reps = 1 if args.quick else args.reps
    sizes = [(1_000, 1), (10_000, 1)] + ([] if args.quick or args.no_forest else [(100_000, args.roots)])
    results = []
    if args.before:
        for traces, roots in sizes:
            row = pair(traces, roots, reps, args.before)
            results.append(row)
            b, a = row["before"], row["after"]
            print(f"{traces:>7,} traces in {roots:>2} root(s), {reps} reps in turns: before ({row['ref']}) kernel "
                  f"{b['kernel_s']:.3f} s (read {b['read_s']:.3f} + view {b['view_s']:.3f} + pages {b['pages_s']:.3f} + html "
                  f"{b['html_s']:.3f}), peak {b['peak_mb']} MB · after {a['kernel_s']:.3f} s (read {a['read_s']:.3f} + view "
                  f"{a['view_s']:.3f} + pages {a['pages_s']:.3f} + html {a['html_s']:.3f}), peak {a['peak_mb']} MB · "
                  f"{row['ratio']}x", flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1) + "\n")
        return 0
    for traces, roots in sizes:
        row = measure(traces, roots, reps, not args.no_browser)
        results.append(row)
        chromium = f" · chromium paint {row['chromium_s']:.3f} s" if "chromium_s" in row else ""
        print(f"{row['traces']:>7,} traces in {row['roots']:>2} root(s): read {row['read_s']:.3f} s + view {row['view_s']:.3f} s"
              f" + pages {row['pages_s']:.3f} s + html {row['html_s']:.3f} s = kernel {row['kernel_s']:.3f} s (target < {row['target_s']} s: "
              f"{'ok' if row['meets'] else 'MISSED'}){chromium} · peak {row['peak_mb']} MB · html {row['html_mb']} MB"
              f" · export_html {row['export_s']:.3f} s, {row['export_mb']} MB", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
