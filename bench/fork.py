"""Replay and fork of the recursive demo from the exchanges recorded with its traces: calls and wall time.

    python bench/fork.py                    # 5 repetitions, demo model at 50 ms per call (~1-2 min)
    python bench/fork.py --quick            # 2 repetitions
    python bench/fork.py --latency 0        # the code's own cost: a zero-latency demo model
    python bench/fork.py --json out.json

For each store (memory, SQLite, file) the recursive demo (`cyber-agent demo`: root, delegate,
four explorers, their validators; 52 model calls) is recorded, then rebuilt four ways. Every row
counts the calls that reached the (counting) demo model and times the whole run; medians:

- `record`: the original run (recording on, the default), and `record off` with
  `RunConfig(record_exchanges=False)`: what recording costs a run.
- `exact replay`: `replay(store, root)`: zero calls, an equal tree.
- `fork at a child`: `fork(..., at=explore-002, change=Brief(constraints))`: that child's subtree
  and the parent turns that read its new report go live.
- `fork of a fork`: the fork above, forked again at explore-004.

Storage: the bytes the recordings add per model call in each store (the exchange records as
stored, and for SQLite and the file store the growth of the database / folder against a run with
recording off), beside a `RecordingLLM` JSONL file of the same run (whole requests every line).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic_core import to_json  # noqa: E402

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK  # noqa: E402
from cyber_agent.core.config import RunConfig  # noqa: E402
from cyber_agent.core.fork import Brief, fork, replay  # noqa: E402
from cyber_agent.core.runner import AgentRunner  # noqa: E402
from cyber_agent.llm import RecordingLLM  # noqa: E402
from cyber_agent.llm.call_site import tree_position  # noqa: E402
from cyber_agent.llm.demo import DemoModel  # noqa: E402
from cyber_agent.llm.types import LLMResponse  # noqa: E402
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore  # noqa: E402
from cyber_agent.trace.sqlite_store import SQLiteTraceStore  # noqa: E402
from cyber_agent.trace.store_base import BaseTraceStore  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TASK = [{"role": "user", "content": DEMO_TASK}]


class Counting:
    """The demo model, counting the calls that reach it."""

    def __init__(self, latency: float) -> None:
        self.inner = DemoModel(latency=latency)
        self.calls = 0

    async def __call__(self, messages: Any, model: str, tools: Any = None, temperature: Any = None, *,
                       on_delta: Any = None) -> LLMResponse:
        self.calls += 1
        return await self.inner(messages, model, tools, temperature, on_delta=on_delta)


def _config(record: bool = True) -> RunConfig:
    return RunConfig(model="demo", workspace=str(REPO), agent_mode="recursive", root_task_anchor=DEMO_ANCHOR,
                     record_exchanges=record)


async def _position(store: BaseTraceStore, root: str, position: str) -> str:
    for record in await store.read_records([root], messages=False, events=False):
        if tree_position(record.trace["trace_id"]) == position:
            return str(record.trace["trace_id"])
    raise SystemExit(f"no {position} in {root}: the demo tree changed")


async def _timed(make: Callable[[Counting], Any], latency: float) -> tuple[float, int, Any]:
    model = Counting(latency)
    started = time.perf_counter()
    result = await make(model)
    return time.perf_counter() - started, model.calls, result


def _check(status: str, what: str) -> None:
    if status != "completed":
        raise SystemExit(f"{what} ended {status}: cyber_agent misbehaved")


async def one_round(store: BaseTraceStore, latency: float) -> dict[str, tuple[float, int, int]]:
    """Record, replay, fork and fork the fork once; (seconds, provider calls, replayed calls) per row."""
    rows: dict[str, tuple[float, int, int]] = {}
    t, calls, off = await _timed(lambda m: AgentRunner(trace_store=store, llm_call=m).run_result(TASK, _config(False)), latency)
    _check(off.trace.status, "record off")
    rows["record off"] = (t, calls, 0)
    t, calls, original = await _timed(lambda m: AgentRunner(trace_store=store, llm_call=m).run_result(TASK, _config()), latency)
    _check(original.trace.status, "record")
    rows["record"] = (t, calls, 0)
    root = original.trace.trace_id
    t, calls, exact = await _timed(lambda m: replay(store, root), latency)
    _check(exact.trace.status, "exact replay")
    rows["exact replay"] = (t, calls + exact.live, exact.replayed)
    child = await _position(store, root, "root/delegate-001/explore-002")
    change = Brief(fields={"constraints": ["numbers come only from data/sales.csv", "show the rows summed"]})
    t, calls, first = await _timed(lambda m: fork(store, root, at=child, change=change, llm=m), latency)
    _check(first.trace.status, "fork at a child")
    rows["fork at a child"] = (t, calls, first.replayed)
    grandchild = await _position(store, first.trace.trace_id, "root/delegate-001/explore-004")
    t, calls, second = await _timed(lambda m: fork(store, first.trace.trace_id, at=grandchild, change=change, llm=m), latency)
    _check(second.trace.status, "fork of a fork")
    rows["fork of a fork"] = (t, calls, second.replayed)
    return rows


def _tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


async def storage(tmp: Path) -> list[tuple[str, int, int, float, float | None]]:
    """(store, model calls, exchange bytes, bytes per call, growth per call against recording off)."""
    out: list[tuple[str, int, int, float, float | None]] = []
    for name in ("memory", "sqlite", "file"):
        sizes: dict[bool, int] = {}
        for record in (False, True):
            where = tmp / f"storage-{name}-{record}"
            store: BaseTraceStore = (InMemoryTraceStore() if name == "memory" else
                                     SQLiteTraceStore(where / "runs.db") if name == "sqlite" else FileSystemTraceStore(where))
            model = Counting(0.0)
            result = await AgentRunner(trace_store=store, llm_call=model).run_result(TASK, _config(record))
            _check(result.trace.status, f"storage run on {name}")
            if record:
                stored = 0
                for rec in await store.read_records([result.trace.trace_id], messages=False, events=False):
                    stored += sum(len(to_json(r)) + 1 for r in await store.get_exchanges(rec.trace["trace_id"]))
                calls = model.calls
            if name == "sqlite":
                store.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")  # type: ignore[attr-defined]
            sizes[record] = _tree_bytes(where) if name != "memory" else 0
        growth = (sizes[True] - sizes[False]) / calls if name != "memory" else None
        out.append((name, calls, stored, stored / calls, growth))
    path = tmp / "cassette.jsonl"
    model = Counting(0.0)
    await AgentRunner(trace_store=InMemoryTraceStore(), llm_call=RecordingLLM(model, path)).run_result(TASK, _config(False))
    out.append(("RecordingLLM file (whole requests)", model.calls, path.stat().st_size, path.stat().st_size / model.calls, None))
    return out


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per demo-model call (default 0.05)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    repeat = args.repeat or (2 if args.quick else 5)
    report: dict[str, Any] = {"latency": args.latency, "repeat": repeat, "rows": [], "storage": []}
    with tempfile.TemporaryDirectory(prefix="bench-fork-") as tmp:
        stores: dict[str, Callable[[int], BaseTraceStore]] = {
            "memory": lambda i: InMemoryTraceStore(),
            "sqlite": lambda i: SQLiteTraceStore(Path(tmp) / f"r{i}.db"),
            "file": lambda i: FileSystemTraceStore(Path(tmp) / f"f{i}"),
        }
        samples: dict[tuple[str, str], list[tuple[float, int, int]]] = {}
        for i in range(repeat):  # round robin: machine load hits every store alike
            for name, factory in stores.items():
                for row, value in (await one_round(factory(i), args.latency)).items():
                    samples.setdefault((name, row), []).append(value)
        print(f"recursive demo, demo model at {args.latency * 1000:.0f} ms per call, {repeat} repetitions (medians)\n")
        print(f"{'store':8} {'run':18} {'wall s':>8} {'provider calls':>15} {'replayed':>9} {'vs record':>10}")
        for (name, row), values in samples.items():
            wall = statistics.median(v[0] for v in values)
            base = statistics.median(v[0] for v in samples[(name, "record")])
            calls, replayed = values[-1][1], values[-1][2]
            print(f"{name:8} {row:18} {wall:8.3f} {calls:15d} {replayed:9d} {wall / base:9.2f}x")
            report["rows"].append({"store": name, "run": row, "wall_s": wall, "provider_calls": calls,
                                   "replayed": replayed, "samples": values})
        print("\nstorage the recordings add")
        print(f"{'store':36} {'calls':>6} {'exchange bytes':>15} {'bytes/call':>11} {'on-disk growth/call':>20}")
        for name, calls, stored, per_call, growth in await storage(Path(tmp)):
            grown = f"{growth:20.0f}" if growth is not None else f"{'-':>20}"
            print(f"{name:36} {calls:6d} {stored:15d} {per_call:11.0f} {grown}")
            report["storage"].append({"store": name, "calls": calls, "bytes": stored, "bytes_per_call": per_call,
                                      "growth_per_call": growth})
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("CYBER_AGENT_STORE", "memory:")
    sys.exit(asyncio.run(main()))
