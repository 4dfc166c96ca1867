"""Benchmark the trace stores at scale: add_message throughput and main-path load at 10k and 100k messages.

    python bench/store_scale.py                  # memory and file store up to 100,000 messages (~2-5 min, disk-bound)
    python bench/store_scale.py --quick          # memory store up to 100k, file store up to 10k
    python bench/store_scale.py --dir /dev/shm   # the file store on tmpfs: code cost without disk cost
    python bench/store_scale.py --json out.json

`bench/store.py` measures small traces; this one grows one trace per store to each size in
`--sizes` through `add_message` (the messages of `bench/store.py`: an assistant turn with one
tool call, then a ~600-character tool result, under a goal two levels deep) and, at each size:

- throughput: the median, over chunks of 200 adds, of the time per add in the last `--window`
  adds before the size is reached, so a per-add cost that grew with the trace would show as a
  lower rate at 100k than at 10k (and a burst of load from another process would not);
- main-path load: `get_main_path_messages` of the whole chain, through the writer ("warm") and
  through a fresh instance ("cold", another process reading the trace; page cache warm).

A store whose fill does not reach a size within `--budget` seconds stops there and reports the
sizes it reached (a slow shared disk gives fewer sizes, not a longer bench). The check printed
is the file store's own claim (docs/trace.md: "its cost does not grow with the trace"): the add
rate at the largest size is at least 1/1.5 of the rate at the smallest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from store import StoreMaker, _message, _new_trace  # noqa: E402  (bench/store.py: the same messages)

from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore  # noqa: E402
from cyber_agent.trace.store_base import BaseTraceStore  # noqa: E402

FLATNESS_LIMIT = 1.5
CHUNK = 200
"""Adds per chunk; the rate reported is the median over the chunks of the window."""
STORES: dict[str, StoreMaker] = {
    "memory": lambda _tmp: InMemoryTraceStore(),
    "file": lambda tmp: FileSystemTraceStore(tmp),
}


async def _loads(make: StoreMaker, tmp: Path, writer: BaseTraceStore, trace_id: str, count: int,
                 reps: int, cold: bool) -> tuple[list[float], list[float]]:
    warm_s, cold_s = [], []
    head = (await writer.get_trace(trace_id)).head_sequence  # type: ignore[union-attr]
    for _ in range(reps):
        for store, times in ((writer, warm_s), (make(tmp), cold_s))[: 2 if cold else 1]:
            start = time.perf_counter()
            path = await store.get_main_path_messages(trace_id, head)
            times.append(time.perf_counter() - start)
            if len(path) != count:
                raise AssertionError(f"main path holds {len(path)} messages, expected {count}")
    return warm_s, cold_s


async def grow(name: str, sizes: list[int], window: int, reps: int, budget: float, directory: str | None) -> dict[str, Any]:
    """Grow one trace through every size (or until the budget ends); measure at each size reached."""
    make = STORES[name]
    out: dict[str, Any] = {"store": name, "sizes": {}, "stopped_at": None}
    with tempfile.TemporaryDirectory(dir=directory, prefix=f"bench-scale-{name}-") as tmp_name:
        tmp = Path(tmp_name)
        store = make(tmp)
        trace_id = await _new_trace(store)
        parent: int | None = None
        count, started = 0, time.perf_counter()
        for size in sorted(sizes):
            window_start = size - min(window, size)
            timed: list[float] = []
            while count < size:
                if time.perf_counter() - started > budget:
                    out["stopped_at"] = count
                    return out
                message = _message(trace_id, count, parent)
                begin = time.perf_counter()
                await store.add_message(message)
                if count >= window_start:
                    timed.append(time.perf_counter() - begin)
                parent = message.sequence
                count += 1
            if isinstance(store, FileSystemTraceStore):
                await store.flush()  # what the fresh reader sees is then the writer's checkpoint
            warm, cold = await _loads(make, tmp, store, trace_id, count, reps, cold=name != "memory")
            # Median over chunks of CHUNK adds: a burst of load from another process moves a
            # chunk or two, not the figure (the shared disk and cores swing by 3x within minutes).
            chunks = [sum(timed[i:i + CHUNK]) / len(timed[i:i + CHUNK]) for i in range(0, len(timed), CHUNK)]
            us_per_add = statistics.median(chunks) * 1e6 if chunks else None
            out["sizes"][str(size)] = {
                "messages": count, "window": len(timed),
                "adds_per_s": 1e6 / us_per_add if us_per_add else None, "us_per_add": us_per_add,
                "us_per_add_mean": sum(timed) / len(timed) * 1e6 if timed else None,
                "path_warm_s": statistics.median(warm), "path_cold_s": statistics.median(cold) if cold else None,
                "path_warm_samples": warm, "path_cold_samples": cold,
                "fill_elapsed_s": time.perf_counter() - started,
            }
    return out


def _check(result: dict[str, Any]) -> dict[str, Any]:
    rows = result["sizes"]
    sizes = sorted(rows, key=int)
    if len(sizes) < 2:
        return {"name": f"{result['store']} store flatness (needs two sizes; reached {', '.join(sizes) or 'none'})",
                "value": None, "limit": FLATNESS_LIMIT, "met": None}
    first, last = rows[sizes[0]]["us_per_add"], rows[sizes[-1]]["us_per_add"]
    value = last / first if first and last else None
    return {"name": f"{result['store']} store flatness: us/add at {int(sizes[-1]):,} / at {int(sizes[0]):,}",
            "value": value, "limit": FLATNESS_LIMIT, "met": None if value is None else value <= FLATNESS_LIMIT}


def print_report(results: list[dict[str, Any]], targets: list[dict[str, Any]]) -> None:
    """Print one row per store and size, then the checks."""
    print(f"\n{'store':7} {'messages':>9} {'adds/s':>8} {'us/add':>8}  {'path warm s':>11} {'us/msg':>7}  "
          f"{'path cold s':>11} {'us/msg':>7}")
    for result in results:
        for size, row in sorted(result["sizes"].items(), key=lambda kv: int(kv[0])):
            n = row["messages"]
            cold = (f"{row['path_cold_s']:11.2f} {row['path_cold_s'] / n * 1e6:7.1f}" if row["path_cold_s"] is not None
                    else f"{'-':>11} {'-':>7}")
            print(f"{result['store']:7} {n:>9,} {row['adds_per_s']:8.0f} {row['us_per_add']:8.1f}  "
                  f"{row['path_warm_s']:11.2f} {row['path_warm_s'] / n * 1e6:7.1f}  {cold}")
        if result["stopped_at"] is not None:
            print(f"{result['store']:7} stopped at {result['stopped_at']:,} messages: the fill budget ran out")
    print("(us/add: median over 200-add chunks of the last adds before each size; "
          "path = get_main_path_messages of the whole chain)")
    for target in targets:
        verdict = {True: "MET", False: "NOT MET", None: "not evaluated"}[target["met"]]
        value = "-" if target["value"] is None else f"{target['value']:.2f}"
        print(f"  {target['name']}: {value} (limit {target['limit']}) {verdict}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the report, optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="file store only up to 10k, one load per size")
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated trace sizes (default 10000,100000)")
    parser.add_argument("--stores", default="memory,file", help="comma-separated stores (default memory,file)")
    parser.add_argument("--window", type=int, default=2000, help="adds timed before each size (default 2000)")
    parser.add_argument("--repeat", type=int, help="main-path loads per size (default 2; --quick 1)")
    parser.add_argument("--budget", type=float, help="seconds a store's fill may take (default 240; --quick 60)")
    parser.add_argument("--dir", help="directory for the file store's trace (default: system temp)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    args = parser.parse_args(argv)
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    reps = args.repeat or (1 if args.quick else 2)
    budget = args.budget or (60.0 if args.quick else 240.0)
    started = time.perf_counter()
    results = []
    for name in args.stores.split(","):
        store_sizes = [s for s in sizes if s <= 10_000] if args.quick and name == "file" else sizes
        print(f"{name} store: growing one trace to {', '.join(f'{s:,}' for s in store_sizes)} messages "
              f"(budget {budget:.0f}s)", flush=True)
        results.append(asyncio.run(grow(name, store_sizes or sizes[:1], min(args.window, min(sizes)), reps, budget,
                                        args.dir)))
    targets = [_check(r) for r in results]
    print_report(results, targets)
    print(f"\n(bench took {time.perf_counter() - started:.0f}s; load average now {os.getloadavg()[0]:.2f})")
    if args.json:
        payload = {"bench": "store_scale", "schema": 1,
                   "config": {"sizes": sizes, "window": args.window, "repeat": reps, "budget_s": budget,
                              "dir": args.dir, "quick": args.quick},
                   "results": results, "targets": targets}
        Path(args.json).write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
