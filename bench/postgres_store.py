"""Benchmark the PostgreSQL store: add_message µs at 10k and 100k, frames of 100k vs pd.read_sql, the 8-worker budget race.

    python bench/postgres_store.py                     # a throw-away server (tests/pg_server.py), 10k and 100k
    python bench/postgres_store.py --quick             # sizes 1,000 and 10,000; frames of 10,000
    python bench/postgres_store.py --url postgresql://user@host/db?schema=bench   # your own server
    python bench/postgres_store.py --json out.json

- add_message: a trace of each size (the messages of `bench/store.py`: an assistant turn with a
  tool call, then a ~600-character tool result, under a goal two levels deep; filled through a
  memory store and imported), then chunks of 200 `add_message` taken round robin across the
  sizes; the median µs per add of each, so a cost that grew with the trace shows as more µs at
  100k than at 10k, and a burst of load from other processes hits both sizes alike.
- frames: `ato_frames` of that trace (messages and events, through `read_records`) against
  `pandas.read_sql` of the typed message columns of the same rows (the floor: one query, no JSON).
- budget race: 8 worker processes (`tests/reliability/store_workers.py budget`) race for one
  root's agents and calls, 25 rounds each; the limits held and the wall time (process start included).

The throw-away server runs with `fsync=off` (as the tests' does): the figures are the code's and
the protocol's cost, not a disk's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from store import _message, _new_trace  # noqa: E402  (bench/store.py: the same messages)

from cyber_agent.core.resource_budget import ResourceBudgetController  # noqa: E402
from cyber_agent.notebook.frames import ato_frames  # noqa: E402
from cyber_agent.trace import InMemoryTraceStore, Trace  # noqa: E402
from cyber_agent.trace.budget_limits import ResourceBudget  # noqa: E402
from cyber_agent.trace.postgres_store import PostgresTraceStore  # noqa: E402
from cyber_agent.trace.sqlite_schema import MESSAGE_COLUMNS  # noqa: E402

CHUNK = 200


async def _filled(store: PostgresTraceStore, size: int) -> str:
    """A trace of `size` messages: written by add_message into a memory store, then imported (one transaction)."""
    memory = InMemoryTraceStore()
    trace_id = await _new_trace(memory)
    parent = None
    for step in range(size):
        message = _message(trace_id, step, parent)
        await memory.add_message(message)
        parent = message.sequence
    await store.import_records(await memory.read_records([trace_id]))
    return trace_id


async def bench_adds(store: PostgresTraceStore, sizes: list[int], chunks: int) -> tuple[str, dict[int, float]]:
    """µs per add_message on traces of each size, chunks of 200 adds taken round robin across the sizes
    (so a change of machine load hits every size alike)."""
    traces = {size: await _filled(store, size) for size in sizes}
    heads = {size: size for size in sizes}
    times: dict[int, list[float]] = {size: [] for size in sizes}
    for round_ in range(chunks):
        for size, trace_id in sorted(traces.items(), reverse=bool(round_ % 2)):  # neither size always goes first
            start = time.perf_counter()
            for _ in range(CHUNK):
                message = _message(trace_id, heads[size], heads[size])
                await store.add_message(message)
                heads[size] = message.sequence
            times[size].append((time.perf_counter() - start) / CHUNK * 1e6)
    out = {size: statistics.median(samples) for size, samples in times.items()}
    for size in sizes:
        print(f"add_message on a trace of {size:>7,} messages: {out[size]:7.0f} µs/add "
              f"(median of {chunks} chunks of {CHUNK})", flush=True)
    return traces[max(sizes)], out


async def bench_frames(store: PostgresTraceStore, trace_id: str, reps: int) -> dict[str, float]:
    import pandas as pd

    names = [name for name, _ in MESSAGE_COLUMNS]
    sql = f"SELECT trace_id, sequence, {', '.join(names)} FROM messages"
    frames_s, read_sql_s = [], []
    rows = 0
    for _ in range(reps):
        start = time.perf_counter()
        frames = await ato_frames(store, [trace_id])
        frames_s.append(time.perf_counter() - start)
        rows = len(frames.messages)
        with store.connection() as conn, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # pandas names SQLAlchemy; a DBAPI connection works
            start = time.perf_counter()
            raw = pd.read_sql(f"{sql} WHERE trace_id = %(t)s ORDER BY sequence", conn, params={"t": trace_id})
            read_sql_s.append(time.perf_counter() - start)
        assert len(raw) == rows, (len(raw), rows)
    out = {"rows": rows, "to_frames_s": statistics.median(frames_s), "read_sql_s": statistics.median(read_sql_s)}
    print(f"frames of {rows:,} messages: ato_frames {out['to_frames_s']:.2f} s, pd.read_sql {out['read_sql_s']:.2f} s "
          f"({out['to_frames_s'] / out['read_sql_s']:.1f}x; columns: {', '.join(names)})", flush=True)
    return out


async def bench_race(url: str, workers: int, rounds: int) -> dict[str, Any]:
    store = PostgresTraceStore(url)
    root = Trace.create(task="budget race")
    await store.create_trace(root)
    limits = ResourceBudget(max_total_agents=20, max_llm_calls=61, reserved_final_calls=1, max_total_tokens=10**9)
    await ResourceBudgetController(store=store, root_trace_id=root.trace_id, budget=limits,
                                   lock=asyncio.Lock()).initialize()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    worker = ROOT / "tests" / "reliability" / "store_workers.py"
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, str(worker), "budget", url, root.trace_id, f"w{i}", str(rounds)],
                              stdout=subprocess.PIPE, cwd=ROOT, env=env) for i in range(workers)]
    lines = [json.loads(line) for proc in procs for line in proc.communicate(timeout=600)[0].splitlines() if line]
    elapsed = time.perf_counter() - start
    record = await store.get_resource_usage(root.trace_id)
    usage = record.model_dump() if record is not None else {}
    granted = {name: sum(1 for line in lines if line.get("granted") == name) for name in ("agents", "llm_calls")}
    held = granted == {"agents": 9, "llm_calls": 60} and usage.get("agents") == 19 and usage.get("llm_calls") == 60
    stamps = [line["at"] for line in lines if "at" in line]
    race = max(stamps) - min(stamps)
    out = {"workers": workers, "attempts": 2 * workers * rounds, "granted": granted, "limits_held": held,
           "seconds": elapsed, "race_seconds": race}
    print(f"budget race: {workers} workers x {rounds} rounds, granted {granted} (limits 9 reservations, 60 calls): "
          f"{'held' if held else 'EXCEEDED'}; {race:.2f} s from the first step to the last "
          f"({elapsed:.2f} s wall with process start)", flush=True)
    return out


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a postgresql:// URL (default: a throw-away server from tests/pg_server.py)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", default=None, help="comma-separated trace sizes (default 10000,100000)")
    parser.add_argument("--chunks", type=int, default=10, help="timed chunks of 200 adds per size")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sizes = [int(s) for s in (args.sizes or ("1000,10000" if args.quick else "10000,100000")).split(",")]
    url = args.url
    if url is None:
        from tests import pg_server

        url = pg_server.server().schema_url(f"bench_{os.getpid()}")
    store = PostgresTraceStore(url)
    trace_id, adds = await bench_adds(store, sizes, args.chunks)
    frames = await bench_frames(store, trace_id, 1 if args.quick else args.reps)
    race = await bench_race(url, 8, 25)
    if args.json:
        args.json.write_text(json.dumps({"add_message_us": adds, "frames": frames, "race": race}, indent=2))
    return 0 if race["limits_held"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
