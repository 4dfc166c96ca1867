"""Benchmark `to_frames` from every store against the floor of each (issue #34, columnar path).

    .venv/bin/python bench/frames.py                     # 100k messages: SQLite, file, memory (~2 min)
    .venv/bin/python bench/frames.py --quick             # 10k messages (~20 s)
    .venv/bin/python bench/frames.py --big               # also 1,000,000 messages over 1,000 traces (SQLite)
    .venv/bin/python bench/frames.py --postgres          # also PostgreSQL (a throw-away server, tests/pg_server.py)
    .venv/bin/python bench/frames.py --keep /tmp/fb      # keep (and reuse) the filled stores (--before fills its own, same records)
    .venv/bin/python bench/frames.py --before            # also the code before issue #34, same records, same run
    .venv/bin/python bench/frames.py --before --before-ref main   # ... or the code of another commit
    .venv/bin/python bench/frames.py --json out.json     # with the issue #34 target rows (`issue_targets`)

The data: a root and ten sub-traces sharing N messages (an assistant turn with one tool call, then a
~600-character result; one `message_added` event each), the records of `bench/sqlite_store.py:tree_records`,
imported into each store. Each figure is the median of `--reps`, the measured call and its floor
run round robin in one process (a burst of load hits both alike):

- SQLite / PostgreSQL: `to_frames(store)` against `pd.read_sql` of the same rows (every typed message
  column and the event rows: `trace_id, event_id, type, sequence, shared, data`). Targets: SQLite
  100k messages <= 0.5 s; PostgreSQL <= 1.5x its own read_sql.
- file store: `to_frames(directory)` against reading and `json.loads`-ing its files
  (`raw_read` below). Target: <= 1.2x.
- memory store: `to_frames(store)` (no floor: the records are already Python objects).
- big (SQLite, 1,000,000 messages over 1,000 traces): `to_frames` and `pd.read_sql` each in a fresh
  child process, wall time and peak RSS. Target: <= 5 s and <= 2 GB.

Peak memory of the 100k SQLite read is also taken in a child process. Never asserted by tests.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# `--before` runs this script again on the code before issue #34 (bench/targets.py:before_tree): cyber_agent from there.
TREE = Path(os.environ.get("FRAMES_BENCH_TREE") or ROOT)
sys.path.insert(0, str(TREE))

import pandas as pd  # noqa: E402

from cyber_agent.notebook import to_frames  # noqa: E402  (imported before bench/sqlite_store.py puts ROOT first)
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore, SQLiteTraceStore  # noqa: E402
from cyber_agent.trace.sqlite_schema import MESSAGE_COLUMNS  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from sqlite_store import tree_records  # noqa: E402  (bench/sqlite_store.py: the same records)

_MESSAGE_SQL = f"SELECT trace_id, sequence, {', '.join(n for n, _ in MESSAGE_COLUMNS)} FROM messages"
_EVENT_SQL = "SELECT trace_id, event_id, type, sequence, shared, data FROM events"


def raw_read(base: Path) -> list[object]:
    """Read and `json.loads` every file `to_frames` reads (as `bench/notebook.py:raw_read`; a trace without
    events has no events.jsonl), the cyclic GC paused as `to_frames` does."""
    gc.disable()
    try:
        parsed: list[object] = []
        for directory in base.iterdir():
            for name in ("meta.json", "goal.json"):
                with open(directory / name, "rb") as handle:
                    parsed.append(json.loads(handle.read()))
            with os.scandir(directory / "messages") as entries:
                for entry in entries:
                    with open(entry.path, "rb") as handle:
                        parsed.append(json.loads(handle.read()))
            if (directory / "events.jsonl").exists():
                with open(directory / "events.jsonl", "rb") as handle:
                    parsed.extend(json.loads(line) for line in handle.read().split(b"\n") if line)
        return parsed
    finally:
        gc.enable()


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _round_robin(reps: int, **calls: Callable[[], object]) -> dict[str, float]:
    """Median wall seconds of each call (`name`) and median CPU seconds of this process (`name_cpu`: the steadier
    figure when other processes share the cores), the calls run round robin."""
    times: dict[str, list[float]] = {key: [] for name in calls for key in (name, f"{name}_cpu")}
    for rep in range(reps):
        for name, call in (calls.items() if rep % 2 == 0 else reversed(list(calls.items()))):  # neither always first
            gc.collect()
            start, cpu = time.perf_counter(), time.process_time()
            call()
            times[name].append(time.perf_counter() - start)
            times[f"{name}_cpu"].append(time.process_time() - cpu)
    return {name: _median(values) for name, values in times.items()}


def _read_sql(connection: Any) -> list[pd.DataFrame]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # pandas names SQLAlchemy; a DBAPI connection works
        return [pd.read_sql(sql, connection) for sql in (_MESSAGE_SQL, _EVENT_SQL)]


def _fill(base: Path, messages: int) -> dict[str, Path]:
    """The SQLite database and file store of `messages` messages (reused when `base` already holds them)."""
    paths = {"sqlite": base / f"frames-{messages}.db", "files": base / f"frames-{messages}-files"}
    if not (paths["sqlite"].exists() and paths["files"].exists()):
        records = tree_records(messages, 10)
        asyncio.run(SQLiteTraceStore(paths["sqlite"]).import_records(records))
        asyncio.run(FileSystemTraceStore(paths["files"]).import_records(records))
    return paths


def bench_small(base: Path, messages: int, reps: int) -> dict[str, Any]:
    paths = _fill(base, messages)
    sqlite = SQLiteTraceStore(paths["sqlite"])
    rows = len(to_frames(sqlite).messages)  # warm: imports, page cache
    assert rows == messages, rows
    out: dict[str, Any] = {"messages": messages}
    out["sqlite"] = _round_robin(reps, to_frames=lambda: to_frames(sqlite), read_sql=lambda: _read_sql(sqlite.connection()))
    to_frames(paths["files"])
    out["files"] = _round_robin(reps, to_frames=lambda: to_frames(paths["files"]), raw_read=lambda: raw_read(paths["files"]))
    memory = InMemoryTraceStore()
    asyncio.run(memory.import_records(asyncio.run(sqlite.read_records(None))))
    out["memory"] = _round_robin(reps, to_frames=lambda: to_frames(memory))
    out["sqlite_peak"] = _child(paths["sqlite"], "frames")
    out["read_sql_peak"] = _child(paths["sqlite"], "read_sql")
    return out


_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[3] + "/bench"); sys.path.insert(0, sys.argv[4])
from cyber_agent.notebook import to_frames
from cyber_agent.trace import SQLiteTraceStore
from frames import _read_sql
store = SQLiteTraceStore(sys.argv[1])
start, cpu = time.perf_counter(), time.process_time()
if sys.argv[2] == "frames":
    rows = len(to_frames(store).messages)
else:
    rows = len(_read_sql(store.connection())[0])
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the forking parent (the bench itself)
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"rows": rows, "seconds": seconds, "cpu_seconds": cpu, "peak_rss_mb": peak / 1024}))
"""


def _child(db: Path, what: str) -> dict[str, Any]:
    """Time and peak RSS of one read in a fresh interpreter (imports excluded from the time, included in the RSS)."""
    done = subprocess.run([sys.executable, "-c", _CHILD, str(db), what, str(ROOT), str(TREE)], capture_output=True,
                          text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def bench_big(base: Path, reps: int) -> dict[str, Any]:
    db = base / "frames-1m.db"
    if not db.exists():
        store = SQLiteTraceStore(base / "frames-1m.partial.db")
        for batch in range(10):  # 100 traces of 1,000 messages per batch keeps the generator's memory small
            records = tree_records(100_000, 100)
            asyncio.run(store.import_records(records if batch == 0 else records[1:]))
        del store
        os.replace(base / "frames-1m.partial.db", db)
    frames, floor = [], []
    for _ in range(reps):
        frames.append(_child(db, "frames"))
        floor.append(_child(db, "read_sql"))
    pick = lambda runs, key: _median([r[key] for r in runs])  # noqa: E731
    return {"messages": frames[0]["rows"], "to_frames_s": pick(frames, "seconds"), "to_frames_peak_mb": pick(frames, "peak_rss_mb"),
            "to_frames_cpu_s": pick(frames, "cpu_seconds"), "read_sql_cpu_s": pick(floor, "cpu_seconds"),
            "read_sql_s": pick(floor, "seconds"), "read_sql_peak_mb": pick(floor, "peak_rss_mb")}


def _postgres_available() -> bool:
    sys.path.insert(0, str(ROOT))
    from tests import pg_server

    return bool(pg_server.available())


def bench_postgres(base: Path, messages: int, reps: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from tests import pg_server

    from cyber_agent.trace.postgres_store import PostgresTraceStore

    url = pg_server.server().schema_url(pg_server.schema_for(f"bench-frames-{messages}"))
    store = PostgresTraceStore(url)
    asyncio.run(store.import_records(asyncio.run(SQLiteTraceStore(_fill(base, messages)["sqlite"]).read_records(None))))
    to_frames(store)

    def read_sql() -> None:
        with store.connection() as conn:
            _read_sql(conn)

    return {"messages": messages, **_round_robin(reps, to_frames=lambda: to_frames(store), read_sql=read_sql)}


def _before(args: argparse.Namespace, base: Path) -> dict[str, Any] | None:
    """This bench's report on the code before issue #34, or at `--before-ref` (a child process; the same records,
    in stores of its own under `base`: an older schema cannot open a store this code has upgraded)."""
    from targets import BEFORE_REF, before_tree, env_for

    ref = BEFORE_REF if args.before_ref is None else subprocess.run(  # a commit: `main` moves, its extracted tree would not
        ["git", "-C", str(ROOT), "rev-parse", args.before_ref], capture_output=True, text=True, check=True).stdout.strip()
    tree = before_tree(ref)
    keep = base / f"before-{ref[:12]}"
    out = keep / "before.json"
    keep.mkdir(parents=True, exist_ok=True)
    flags = [*(["--quick"] if args.quick else []), *(["--big"] if args.big else []),
             *(["--postgres"] if args.postgres else []), "--reps", str(args.reps)]
    env = {**env_for(tree), "FRAMES_BENCH_TREE": str(tree)}
    print(f"-- the code at {ref}:", flush=True)
    done = subprocess.run([sys.executable, __file__, *flags, "--keep", str(keep), "--json", str(out)], env=env)
    if done.returncode != 0 or not out.exists():
        return None
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def issue_targets(report: dict[str, Any], before: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The rows of issue #34's frame targets (`bench/targets.py:ISSUE_34`) this run measured."""
    from targets import target

    def old(*keys: str) -> float | None:
        value: Any = before
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return value if isinstance(value, int | float) else None

    small, rows = report["small"], []
    n, s, f = small["messages"], small["sqlite"], small["files"]
    if n >= 100_000:
        rows.append(target("34.frames.sqlite_100k", after=s["to_frames"], before=old("small", "sqlite", "to_frames"),
                           floor=s["read_sql"], floor_name="pd.read_sql", unit="s", limit="<= 0.5 s",
                           met=s["to_frames"] <= 0.5, note=f"CPU {s['to_frames_cpu']:.2f} s vs read_sql {s['read_sql_cpu']:.2f} s"))
    rows.append(target("34.frames.sqlite_100k_vs_read_sql", after=s["to_frames"], before=old("small", "sqlite", "to_frames"),
                       floor=s["read_sql"], floor_name="pd.read_sql", unit="s", ratio=s["to_frames"] / s["read_sql"],
                       ratio_of="to_frames / read_sql", limit="ratio reported", met=None, note=f"{n:,} messages"))
    rows.append(target("34.frames.file_vs_parse", after=f["to_frames"], before=old("small", "files", "to_frames"),
                       floor=f["raw_read"], floor_name="read + json.loads of the files", unit="s",
                       ratio=f["to_frames"] / f["raw_read"], ratio_of="to_frames / read+parse", limit="<= 1.2x",
                       met=f["to_frames"] <= 1.2 * f["raw_read"], note=f"{n:,} messages"))
    if "postgres" in report:
        p = report["postgres"]
        rows.append(target("34.frames.postgres_vs_read_sql", after=p["to_frames"], before=old("postgres", "to_frames"),
                           floor=p["read_sql"], floor_name="pd.read_sql", unit="s", ratio=p["to_frames"] / p["read_sql"],
                           ratio_of="to_frames / read_sql", limit="<= 1.5x", met=p["to_frames"] <= 1.5 * p["read_sql"]))
    if "big" in report:
        b = report["big"]
        rows.append(target("34.frames.sqlite_1m", after=b["to_frames_s"], before=old("big", "to_frames_s"),
                           floor=b["read_sql_s"], floor_name="pd.read_sql", unit="s", ratio=b["to_frames_s"] / b["read_sql_s"],
                           ratio_of="to_frames / read_sql", limit="<= 5 s", met=b["to_frames_s"] <= 5,
                           note=f"CPU {b['to_frames_cpu_s']:.1f} s vs read_sql {b['read_sql_cpu_s']:.1f} s"))
        rows.append(target("34.frames.sqlite_1m_memory", after=b["to_frames_peak_mb"], before=old("big", "to_frames_peak_mb"),
                           floor=b["read_sql_peak_mb"], floor_name="pd.read_sql peak", unit="MB", limit="<= 2 GB",
                           met=b["to_frames_peak_mb"] <= 2048))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10k messages instead of 100k")
    parser.add_argument("--big", action="store_true", help="also 1M messages over 1,000 traces (SQLite)")
    parser.add_argument("--postgres", action="store_true", help="also PostgreSQL (needs its server binaries)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--keep", default=None, help="directory to keep the filled stores in (reused when present)")
    parser.add_argument("--dir", default=None, help="parent directory of the temporary stores (without --keep)")
    parser.add_argument("--before", action="store_true",
                        help="also measure the code before issue #34 (bench/targets.py:BEFORE_REF), same data, same run")
    parser.add_argument("--before-ref", default=None,
                        help="with --before: the commit to measure instead of BEFORE_REF (e.g. main)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    messages = 10_000 if args.quick else 100_000
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="frames-bench-", dir=args.dir))
    base.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    report: dict[str, Any] = {"load_before": load, "cpus": os.cpu_count()}
    small = report["small"] = bench_small(base, messages, args.reps)
    s, f, m = small["sqlite"], small["files"], small["memory"]
    print(f"sqlite  {messages:>9,} msgs: to_frames {s['to_frames']:.3f} s  read_sql {s['read_sql']:.3f} s  "
          f"ratio {s['to_frames'] / s['read_sql']:.2f}x  [target <= 0.5 s at 100k: "
          f"{'met' if s['to_frames'] <= 0.5 else 'MISSED'}]  cpu: {s['to_frames_cpu']:.3f} s vs {s['read_sql_cpu']:.3f} s "
          f"({s['to_frames_cpu'] / s['read_sql_cpu']:.2f}x)")
    print(f"sqlite  {messages:>9,} msgs, fresh process: to_frames {small['sqlite_peak']['seconds']:.3f} s, "
          f"peak {small['sqlite_peak']['peak_rss_mb']:.0f} MB; read_sql {small['read_sql_peak']['seconds']:.3f} s, "
          f"peak {small['read_sql_peak']['peak_rss_mb']:.0f} MB")
    print(f"files   {messages:>9,} msgs: to_frames {f['to_frames']:.3f} s  raw read+parse {f['raw_read']:.3f} s  "
          f"ratio {f['to_frames'] / f['raw_read']:.2f}x  [target <= 1.2x: "
          f"{'met' if f['to_frames'] <= 1.2 * f['raw_read'] else 'MISSED'}]  cpu: {f['to_frames_cpu']:.3f} s vs "
          f"{f['raw_read_cpu']:.3f} s ({f['to_frames_cpu'] / f['raw_read_cpu']:.2f}x)")
    print(f"memory  {messages:>9,} msgs: to_frames {m['to_frames']:.3f} s  cpu {m['to_frames_cpu']:.3f} s")
    if args.postgres and not _postgres_available():
        print("postgres: skipped (no PostgreSQL 15 server binaries here: tests/pg_server.py)")
    elif args.postgres:
        p = report["postgres"] = bench_postgres(base, messages, args.reps)
        print(f"postgres {messages:>8,} msgs: to_frames {p['to_frames']:.3f} s  read_sql {p['read_sql']:.3f} s  "
              f"ratio {p['to_frames'] / p['read_sql']:.2f}x  [target <= 1.5x: "
              f"{'met' if p['to_frames'] <= 1.5 * p['read_sql'] else 'MISSED'}]  cpu (this process; the server's "
              f"not counted): {p['to_frames_cpu']:.3f} s vs {p['read_sql_cpu']:.3f} s")
    if args.big:
        b = report["big"] = bench_big(base, max(1, args.reps // 2))
        met = b["to_frames_s"] <= 5 and b["to_frames_peak_mb"] <= 2048
        print(f"sqlite  {b['messages']:>9,} msgs / 1,000 traces: to_frames {b['to_frames_s']:.2f} s, peak "
              f"{b['to_frames_peak_mb']:.0f} MB; read_sql {b['read_sql_s']:.2f} s, peak {b['read_sql_peak_mb']:.0f} MB; "
              f"ratio {b['to_frames_s'] / b['read_sql_s']:.2f}x  [target <= 5 s and <= 2 GB: {'met' if met else 'MISSED'}]  "
              f"cpu: {b['to_frames_cpu_s']:.2f} s vs {b['read_sql_cpu_s']:.2f} s")
    before = _before(args, base) if args.before else None
    report["issue_targets"] = issue_targets(report, before)
    report["load_after"] = os.getloadavg()[0]
    print(f"load average before/after: {load:.1f} / {report['load_after']:.1f} on {os.cpu_count()} cores")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
