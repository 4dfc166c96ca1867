"""Where a sweep worker's time goes: warm pool workers on one store, without the driver (#34).

    .venv/bin/python bench/pool_workers.py                      # 2 workers, SQLite on /dev/shm, 4 runs
    .venv/bin/python bench/pool_workers.py --workers 1 --store file
    .venv/bin/python bench/pool_workers.py --before 65ecacc     # the same on the code of REF, in turns
    .venv/bin/python bench/pool_workers.py --profile            # cProfile of worker 0 too

`--workers` processes are forked from this one and each builds the pool's own worker
(`cyber_agent/experiments/pool.py:_CellWorker`), runs one warm-up cell, waits for the others,
then runs its `--cells` cells `--in-flight` at a time: 200 × 50 ms one-call cells of
`bench/sweeps.py`'s grid, split by index. Per worker: its wall for those cells, CPU per cell,
SQLite transactions per cell, and the time its thread was blocked in the store's lock sleeps
(`sqlite_store.py:SQLiteTraceStore._polled`), the figures that moved least with machine load
while the sweep rates of `bench/sweeps.py` swung twice over.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import multiprocessing
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from targets import before_tree, env_for  # noqa: E402


def _instrument(stats: dict[str, float]) -> None:
    """Count the SQLite store's transactions and the seconds its lock waits slept."""
    import types

    from cyber_agent.trace import sqlite_store

    real = sqlite_store.time

    def sleep(seconds: float) -> None:
        started = time.perf_counter()
        real.sleep(seconds)
        stats["blocked_s"] += time.perf_counter() - started

    sqlite_store.time = types.SimpleNamespace(monotonic=real.monotonic, sleep=sleep)  # type: ignore[assignment]
    begin = sqlite_store.SQLiteTraceStore._begin

    def counted(self: Any, conn: Any, what: str) -> None:
        stats["transactions"] += 1
        begin(self, conn, what)

    sqlite_store.SQLiteTraceStore._begin = counted  # type: ignore[method-assign]


def _worker(number: int, args: argparse.Namespace, url: str, start: Any, out: Any) -> None:
    from sweeps import grid

    from cyber_agent.experiments import pool
    from cyber_agent.experiments.limiter import LimitPolicy

    stats = {"transactions": 0.0, "blocked_s": 0.0}
    _instrument(stats)

    async def main() -> dict[str, Any]:
        sweep = grid(200 + args.workers, 0.05, "pool-workers")
        worker = pool._CellWorker(pool.WorkerSetup(store_url=url, sweep=sweep, cells_in_flight=args.in_flight,
                                                   default=LimitPolicy().divided(args.workers), per_provider={}))
        mine = [c for c in worker.cells[:200] if c.index % args.workers == number][:args.cells]
        await worker.run(pool.CellJob(index=200 + number, next_attempt=0, errors=0))  # warm: first-call costs
        stats.update(transactions=0.0, blocked_s=0.0)
        gate = asyncio.Semaphore(args.in_flight)

        async def one(index: int) -> None:
            async with gate:
                await worker.run(pool.CellJob(index=index, next_attempt=0, errors=0))

        start.wait()
        profile = cProfile.Profile() if args.profile and number == 0 else None
        cpu, wall = time.process_time(), time.perf_counter()
        if profile is not None:
            profile.enable()
        await asyncio.gather(*(one(c.index) for c in mine))
        if profile is not None:
            profile.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        text = io.StringIO()
        if profile is not None:
            pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
        row = {"worker": number, "cells": len(mine), "wall_ms": 1000 * wall, "cpu_ms_per_cell": 1000 * cpu / len(mine),
               "transactions_per_cell": stats["transactions"] / len(mine), "blocked_ms": 1000 * stats["blocked_s"],
               "profile": text.getvalue()}
        await worker.close()  # its flush writes each hot trace once more: after the cells, as in the pool
        return row

    out.put(asyncio.run(main()))


def run_here(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One run of `args.workers` workers in this interpreter's cyber_agent."""
    from cyber_agent.trace.store_url import open_store

    folder = tempfile.mkdtemp(prefix="bench-pool-workers-", dir=args.dir)
    url = f"sqlite:///{folder}/sweep.db" if args.store == "sqlite" else f"file:{folder}/traces"
    store = open_store(url)  # created once here: workers opening a new database at once would race for it
    getattr(store, "close", lambda: None)()
    context = multiprocessing.get_context("fork")  # this script holds no threads or loop: forking is safe
    start, out = context.Barrier(args.workers), context.Queue()
    procs = [context.Process(target=_worker, args=(i, args, url, start, out)) for i in range(args.workers)]
    for proc in procs:
        proc.start()
    rows = sorted((out.get(timeout=120) for _ in procs), key=lambda r: r["worker"])
    for proc in procs:
        proc.join()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cells", type=int, default=100, help="cells per worker (at most 200 / workers)")
    parser.add_argument("--in-flight", type=int, default=32, help="cells in flight per worker")
    parser.add_argument("--store", choices=("sqlite", "file"), default="sqlite")
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--before", default=None, metavar="REF", help="also run the code of REF, in turns")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_here(args)))
        return 0
    sides = {"after": None, **({"before": before_tree(args.before)} if args.before else {})}
    child = [sys.executable, __file__, "--child", "--workers", str(args.workers), "--cells", str(args.cells),
             "--in-flight", str(args.in_flight), "--store", args.store] + (["--dir", args.dir] if args.dir else []) + (
             ["--profile"] if args.profile else [])
    print(f"{args.workers} worker(s) x {args.cells} cells, {args.in_flight} in flight each, {args.store} store")
    for run in range(args.runs):
        for side, tree in sides.items():
            done = subprocess.run(child, env=env_for(tree), cwd=tempfile.gettempdir(), capture_output=True, text=True,
                                  timeout=300)
            if done.returncode != 0:
                print(f"{side}: failed: {done.stderr.strip()[-300:]}")
                continue
            rows = json.loads(done.stdout.strip().splitlines()[-1])
            shown = " | ".join(f"w{r['worker']} wall {r['wall_ms']:.0f} ms, cpu {r['cpu_ms_per_cell']:.2f} ms/cell, "
                               f"{r['transactions_per_cell']:.1f} tx/cell, blocked {r['blocked_ms']:.0f} ms" for r in rows)
            print(f"run {run + 1} {side:<6} {shown}  (load {os.getloadavg()[0]:.1f})")
            if args.profile and run == 0:
                print(rows[0]["profile"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
