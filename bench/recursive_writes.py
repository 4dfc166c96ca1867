"""Count the file writes of recursive runs, per kind and per model call.

    python bench/recursive_writes.py                 # the offline demo run + a 20-agent tree, 3 runs each
    python bench/recursive_writes.py --by-site       # also attribute each write to its call site in cyber_agent
    python bench/recursive_writes.py --agents 50 --repeat 1 --dir /dev/shm

Two workloads, both offline and with zero model latency, on a `FileSystemTraceStore` whose
write primitives are counted:

- `demo`: the `cyber-agent demo` recursive run (DemoModel on data/sales.csv: root, region
  children, grandchildren, a validator rejection and revision, the root validator);
- `tree`: the `bench/recursive_tree.py` tree (`--agents` agents, fanout 6, sequential).

For each it prints the writes per primitive (`_write_trace` = meta.json, `_write_goals` =
goal.json, `_write_message` = one message file, `_write_side_record` = resource_usage.json or
tool_approvals.json, `_append_event_line` = one events.jsonl append), the public store calls
that caused them, the model calls (the root's usage record: agents and validators), writes per
model call and the median wall time. No timing assertion: numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT_DIR))
sys.path.insert(0, str(ROOT_DIR / "bench"))

from scenarios import call_site, prepare, run_demo, run_tree  # noqa: E402 - after the sys.path setup

from cyber_agent.trace import FileSystemTraceStore  # noqa: E402

PRIMITIVES = ("_write_trace", "_write_goals", "_write_message", "_write_side_record", "_append_event_line")
PUBLIC = ("create_trace", "update_trace", "update_goal", "update_goal_tree", "add_goal", "add_message",
          "update_message", "append_event", "replace_resource_usage", "replace_tool_approvals", "flush")
FILES = ("_write_trace", "_write_goals", "_write_message", "_write_side_record")
"""Primitives that write a whole file (temp file + rename); `_append_event_line` appends."""


class CountingStore(FileSystemTraceStore):
    """A file store that counts its write primitives, the public calls and (optionally) the call sites."""

    def __init__(self, *args: Any, by_site: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writes: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.sites: Counter[tuple[str, str]] = Counter()
        self.by_site = by_site

    def _count(self, kind: str) -> None:
        self.writes[kind] += 1
        if self.by_site:
            self.sites[(kind, call_site(skip=("/cyber_agent/trace/",)))] += 1


def _counted(name: str):
    def method(self: CountingStore, *args: Any, **kwargs: Any) -> Any:
        self._count(name)
        return getattr(FileSystemTraceStore, name)(self, *args, **kwargs)
    return method


def _counted_public(name: str):
    async def method(self: CountingStore, *args: Any, **kwargs: Any) -> Any:
        self.calls[name] += 1
        return await getattr(FileSystemTraceStore, name)(self, *args, **kwargs)
    return method


for _name in PRIMITIVES:
    setattr(CountingStore, _name, _counted(_name))
for _name in PUBLIC:
    setattr(CountingStore, _name, _counted_public(_name))


async def _one(workload: str, directory: str, agents: int, by_site: bool) -> dict[str, Any]:
    store = CountingStore(directory, by_site=by_site)
    started = time.perf_counter()
    root_id, status = await (run_demo(store) if workload == "demo" else run_tree(store, agents, directory))
    seconds = time.perf_counter() - started
    if status != "completed":
        raise SystemExit(f"{workload}: the root ended {status}")
    record = await store.get_resource_usage(root_id)
    usage = record.model_dump() if record is not None else {}
    traces = await store.list_traces(limit=None)
    return {"seconds": seconds, "llm_calls": int(usage.get("llm_calls", 0)), "traces": len(traces),
            "writes": dict(store.writes), "calls": dict(store.calls), "sites": store.sites}


def _report(workload: str, runs: list[dict[str, Any]], by_site: bool) -> None:
    first = runs[0]
    calls = first["llm_calls"]
    files = sum(first["writes"].get(k, 0) for k in FILES)
    total = files + first["writes"].get("_append_event_line", 0)
    print(f"\n== {workload}: {first['traces']} traces, {calls} model calls, "
          f"median {statistics.median(r['seconds'] for r in runs):.3f}s over {len(runs)} run(s) "
          f"(min {min(r['seconds'] for r in runs):.3f}s)")
    print(f"  {'primitive':22} {'writes':>7} {'per call':>9}")
    for kind in PRIMITIVES:
        n = first["writes"].get(kind, 0)
        print(f"  {kind:22} {n:>7} {n / calls:>9.2f}")
    print(f"  {'files (all but events)':22} {files:>7} {files / calls:>9.2f}")
    print(f"  {'all writes':22} {total:>7} {total / calls:>9.2f}")
    print("  public calls: " + ", ".join(f"{k}={v}" for k, v in sorted(first["calls"].items())))
    if len({(r['llm_calls'], tuple(sorted(r['writes'].items()))) for r in runs}) > 1:
        print("  note: counts differ between runs: " + "; ".join(str(r["writes"]) for r in runs))
    if by_site:
        print(f"  {'primitive':22} {'writes':>7}  call site")
        for (kind, site), n in sorted(first["sites"].items(), key=lambda item: (-item[1], item[0])):
            print(f"  {kind:22} {n:>7}  {site}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("demo", "tree", "both"), default="both")
    parser.add_argument("--agents", type=int, default=20, help="agents of the tree workload (default 20)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each workload (default 3)")
    parser.add_argument("--by-site", action="store_true", help="attribute each write to its caller in cyber_agent")
    parser.add_argument("--dir", help="directory for the temporary stores (default: system temp)")
    args = parser.parse_args(argv)
    prepare(max(args.agents, 50))
    workloads = ("demo", "tree") if args.workload == "both" else (args.workload,)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-writes-") as tmp:
        for workload in workloads:
            runs = []
            for rep in range(args.repeat):
                directory = os.path.join(tmp, f"{workload}-{rep}")
                runs.append(asyncio.run(_one(workload, directory, args.agents, args.by_site and rep == 0)))
            _report(workload, runs, args.by_site)
    return 0


if __name__ == "__main__":
    sys.exit(main())
