"""Count TraceStore calls and file writes per model call of the offline demo runs and a tree.

    python bench/store_calls.py                   # legacy demo, recursive demo, 20-agent tree; file and memory store
    python bench/store_calls.py --by-site         # also: which cyber_agent function made each call, per method
    python bench/store_calls.py --scenario recursive --store file --json /tmp/calls.json

Scenarios (shared with `recursive_writes.py` through `bench/scenarios.py`, all offline, zero
model latency):

- `legacy`: `cyber-agent demo --mode legacy` (DemoModel on data/sales.csv, legacy sub-agents);
- `recursive`: `cyber-agent demo` (recursive: root, region children, a validator rejection and
  revision, the root validator);
- `tree`: the `bench/recursive_tree.py` tree of `--agents` (20) agents, sequential children.

Each runs on a store wrapped by `CallCounter`, a proxy that counts every public method called on
the store, by name, whatever the store is: it only forwards attributes (`__getattr__`) and wraps
callables, so it needs no private attribute and no method list, and follows the TraceStore
protocol as it changes. Calls a store makes on itself internally are not counted: only what
the runner, tools and validators ask of it. On the file store two write figures are added:

- the write primitives that `recursive_writes.py` counts (`_write_trace`, `_write_goals`,
  `_write_message`, `_write_side_record`, `_append_event_line`; its `CountingStore`), and
- `write opens`: every open for writing of a path inside the store's directory, seen by a
  `sys.addaudithook` hook. It counts whatever API the store writes with, so it stays right if
  the primitives are renamed; today it equals the primitives' total.

Model calls = assistant messages recorded in every trace of the run (the root's usage record
`llm_calls` is shown next to it when there is one; the two agree on these scenarios). The
counts are deterministic: `--repeat` (default 2) checks that, and gives a median wall time.
No timing assertion. Writes bench/results/store_calls.json (or `--json PATH`).

Before [core-shape] (commit 9d19ec6, 2026-12-02, 2-vCPU AMD EPYC VM, 24 GiB, Python 3.11.7; the
counts are the same on the file and the memory store):

    scenario     model calls  traces  get_trace  update_trace  all store calls  file writes   per model call: get_trace / update_trace / file writes
    legacy demo           18       5         21            10              139          172   1.17 / 0.56 / 9.56
    recursive demo        52      16        255            82              960          765   4.90 / 1.58 / 14.71
    tree (20)             48      40        406           145             1189         1025   8.46 / 3.02 / 21.35

("file writes" = all writes: whole files written plus events.jsonl appends; whole files alone:
90, 502, 624.) The per-step overhead before, from bench/overhead.py, is in bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from recursive_writes import FILES, PRIMITIVES, CountingStore  # noqa: E402
from run_all import machine  # noqa: E402
from scenarios import call_site, prepare, run_demo, run_tree  # noqa: E402

from cyber_agent.trace import InMemoryTraceStore  # noqa: E402

SCENARIOS = ("legacy", "recursive", "tree")
STORES = ("file", "memory")
RESULTS = BENCH / "results" / "store_calls.json"
HEADLINE = ("get_trace", "update_trace", "add_message", "get_goal_tree", "update_goal", "append_event")
"""Methods always shown in the table (0 if never called), in this order; the others follow by count."""
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR


class CallCounter:
    """A proxy over any trace store that counts each public method call by name.

    Attribute reads are forwarded to the wrapped store; public callables come back wrapped
    (coroutine functions as coroutine functions, async generators as async generators) so each
    call adds one to `calls[name]` (and, with `by_site`, to `sites[(name, caller)]`).
    """

    def __init__(self, store: Any, *, by_site: bool = False) -> None:
        self.inner = store
        self.calls: Counter[str] = Counter()
        self.sites: Counter[tuple[str, str]] = Counter()
        self._by_site = by_site
        self._wrapped: dict[str, Callable[..., Any]] = {}

    def _count(self, name: str) -> None:
        self.calls[name] += 1
        if self._by_site:
            self.sites[(name, call_site())] += 1

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name.startswith("_") or not callable(attr):
            return attr
        if name in self._wrapped:
            return self._wrapped[name]
        count = self._count
        if inspect.iscoroutinefunction(attr):
            async def wrapped(*args: Any, **kwargs: Any) -> Any:
                count(name)
                return await attr(*args, **kwargs)
        elif inspect.isasyncgenfunction(attr):
            async def wrapped(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
                count(name)
                async for item in attr(*args, **kwargs):
                    yield item
        else:
            def wrapped(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
                count(name)
                return attr(*args, **kwargs)
        wrapped.__name__ = wrapped.__qualname__ = name
        wrapped.__doc__ = attr.__doc__
        self._wrapped[name] = wrapped
        return wrapped

    def __repr__(self) -> str:
        return f"CallCounter({self.inner!r})"


class WriteOpens:
    """Counts opens for writing of paths under `directory` while `active` (an audit hook cannot be removed)."""

    _instances: list[WriteOpens] = []
    _hooked = False

    def __init__(self, directory: str) -> None:
        self.prefix = os.path.realpath(directory).rstrip(os.sep) + os.sep
        self.count = 0
        self.active = False
        if not WriteOpens._hooked:
            sys.addaudithook(WriteOpens._hook)
            WriteOpens._hooked = True
        WriteOpens._instances.append(self)

    @staticmethod
    def _hook(event: str, args: tuple[Any, ...]) -> None:
        if event != "open" or not WriteOpens._instances:
            return
        path, _mode, flags = args
        if isinstance(path, int) or not flags & _WRITE_FLAGS:
            return
        where = os.path.realpath(os.path.dirname(os.fsdecode(path))) + os.sep
        for counter in WriteOpens._instances:
            if counter.active and where.startswith(counter.prefix):
                counter.count += 1

    def close(self) -> None:
        self.active = False
        WriteOpens._instances.remove(self)


async def _model_calls(store: Any, root_id: str) -> tuple[int, int, int | None]:
    """Traces, assistant messages over all traces, and the root usage record's llm_calls (None if no record)."""
    traces = await store.list_traces(limit=None)
    assistant = 0
    for trace in traces:
        assistant += sum(1 for m in await store.get_trace_messages(trace.trace_id) if m.role == "assistant")
    usage = await store.get_resource_usage(root_id)
    return len(traces), assistant, (usage.llm_calls if usage is not None else None)


async def run_one(scenario: str, store_kind: str, directory: str, agents: int, by_site: bool) -> dict[str, Any]:
    """One counted run of `scenario` on a fresh store; the counts as plain data."""
    inner: Any = CountingStore(directory) if store_kind == "file" else InMemoryTraceStore()
    opens = WriteOpens(directory) if store_kind == "file" else None
    store = CallCounter(inner, by_site=by_site)
    if opens:
        opens.active = True
    started = time.perf_counter()
    try:
        if scenario == "tree":
            root_id, status = await run_tree(store, agents, directory)
        else:
            root_id, status = await run_demo(store, scenario)
    finally:
        seconds = time.perf_counter() - started
        if opens:
            opens.close()
    if status != "completed":
        raise SystemExit(f"{scenario} ({store_kind} store): the root ended {status}")
    traces, model_calls, usage_calls = await _model_calls(inner, root_id)
    result: dict[str, Any] = {"scenario": scenario, "store": store_kind, "seconds": round(seconds, 4), "traces": traces,
                              "model_calls": model_calls, "usage_llm_calls": usage_calls,
                              "calls": dict(store.calls.most_common()), "total_calls": sum(store.calls.values())}
    if store_kind == "file":
        writes = {kind: inner.writes.get(kind, 0) for kind in PRIMITIVES}
        result["writes"] = writes
        result["file_writes"] = sum(writes[k] for k in FILES)
        result["all_writes"] = sum(writes.values())
        result["write_opens"] = opens.count if opens else None
    if by_site:
        total = store.calls
        result["sites"] = [{"method": m, "site": s, "calls": n} for (m, s), n in
                           sorted(store.sites.items(), key=lambda item: (-total[item[0][0]], item[0][0], -item[1]))]
    return result


def _fingerprint(run: dict[str, Any]) -> tuple[Any, ...]:
    return (run["model_calls"], tuple(sorted(run["calls"].items())), tuple(sorted(run.get("writes", {}).items())),
            run.get("write_opens"))


def summarize(scenario: str, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """One scenario's figures: the first run of each store, per-model-call ratios, the medians, consistency notes."""
    notes = []
    per_store = {}
    for kind, samples in runs.items():
        first = dict(samples[0])
        first["median_s"] = round(statistics.median(s["seconds"] for s in samples), 4)
        first["repeats"] = len(samples)
        first["seconds"] = [s["seconds"] for s in samples]
        calls = first["model_calls"] or 1
        first["per_model_call"] = {name: round(n / calls, 3) for name, n in first["calls"].items()}
        first["per_model_call"]["total_calls"] = round(first["total_calls"] / calls, 3)
        for key in ("file_writes", "all_writes", "write_opens"):
            if first.get(key) is not None:
                first["per_model_call"][key] = round(first[key] / calls, 3)
        if len({_fingerprint(s) for s in samples}) > 1:
            notes.append(f"{kind} store: counts differ between repeats")
        if first["usage_llm_calls"] is not None and first["usage_llm_calls"] != first["model_calls"]:
            notes.append(f"{kind} store: usage record says {first['usage_llm_calls']} model calls, "
                         f"{first['model_calls']} assistant messages recorded")
        if kind == "file" and first["write_opens"] != first["all_writes"]:
            notes.append(f"file store: {first['write_opens']} write opens vs {first['all_writes']} counted primitives "
                         "(primitives renamed or a new write path? trust write opens)")
        per_store[kind] = first
    if len(per_store) == 2:
        a, b = (per_store[k] for k in STORES)
        if a["calls"] != b["calls"] or a["model_calls"] != b["model_calls"]:
            notes.append("file and memory store calls differ")
    return {"scenario": scenario, "stores": per_store, "notes": notes}


def print_scenario(summary: dict[str, Any], agents: int) -> None:
    """The per-method table of one scenario: calls and calls per model call, per store."""
    stores = summary["stores"]
    first = next(iter(stores.values()))
    label = f"tree ({agents} agents)" if summary["scenario"] == "tree" else f"{summary['scenario']} demo"
    usage = f" (usage record: {first['usage_llm_calls']})" if first["usage_llm_calls"] is not None else ""
    times = ", ".join(f"{k} {v['median_s']:.3f}s" for k, v in stores.items())
    print(f"\n== {label}: {first['model_calls']} model calls{usage}, {first['traces']} traces; "
          f"median wall {times} over {first['repeats']} run(s)")
    names = list(HEADLINE) + sorted({n for s in stores.values() for n in s["calls"]} - set(HEADLINE),
                                    key=lambda n: (-max(s["calls"].get(n, 0) for s in stores.values()), n))
    head = f"  {'store call':24}" + "".join(f" {k + ' calls':>12} {'per call':>9}" for k in stores)
    print(head + "\n  " + "-" * (len(head) - 2))

    def line(label: str, values: list[int | None]) -> None:
        cells = "".join(f" {'-':>12} {'-':>9}" if v is None else f" {v:>12} {v / max(first['model_calls'], 1):>9.2f}"
                        for v in values)
        print(f"  {label:24}{cells}")

    for name in names:
        line(name, [s["calls"].get(name, 0) for s in stores.values()])
    line("all store calls", [s["total_calls"] for s in stores.values()])
    if "file" in stores:
        file = stores["file"]
        for kind in PRIMITIVES:
            line(f"{kind}", [file["writes"][kind] if k == "file" else None for k in stores])
        line("files (all but events)", [file["file_writes"] if k == "file" else None for k in stores])
        line("all writes", [file["all_writes"] if k == "file" else None for k in stores])
        line("write opens (audit)", [file["write_opens"] if k == "file" else None for k in stores])
    for note in summary["notes"]:
        print(f"  note: {note}")
    sites = first.get("sites")
    if sites:
        print(f"  {'calls':>7}  method        call site")
        for row in sites:
            print(f"  {row['calls']:>7}  {row['method']:13} {row['site']}")


def print_summary(summaries: list[dict[str, Any]], agents: int) -> None:
    """One line per scenario: the figures the [core-shape] closing note asks for."""
    print(f"\n{'scenario':16} {'model calls':>11} {'traces':>6} {'get_trace':>9} {'update_trace':>12} {'file writes':>11}"
          f"   per model call: get_trace / update_trace / all writes")
    for summary in summaries:
        stores = summary["stores"]
        s = stores.get("file") or stores["memory"]
        calls = max(s["model_calls"], 1)
        writes = s.get("all_writes")
        label = f"tree ({agents})" if summary["scenario"] == "tree" else summary["scenario"]
        print(f"{label:16} {s['model_calls']:>11} {s['traces']:>6} {s['calls'].get('get_trace', 0):>9} "
              f"{s['calls'].get('update_trace', 0):>12} {'-' if writes is None else writes:>11}"
              f"   {s['calls'].get('get_trace', 0) / calls:.2f} / {s['calls'].get('update_trace', 0) / calls:.2f} / "
              f"{'-' if writes is None else f'{writes / calls:.2f}'}")


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios, print the tables, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=",".join(SCENARIOS), help=f"comma-separated subset of {','.join(SCENARIOS)}")
    parser.add_argument("--store", choices=(*STORES, "both"), default="both")
    parser.add_argument("--agents", type=int, default=20, help="agents of the tree scenario (default 20)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each scenario and store (default 2)")
    parser.add_argument("--quick", action="store_true", help="one run of each (same counts, no repeat check)")
    parser.add_argument("--by-site", action="store_true", help="attribute each store call to its caller in cyber_agent")
    parser.add_argument("--dir", help="directory for the file stores (default: system temp)")
    parser.add_argument("--json", metavar="PATH", default=str(RESULTS),
                        help=f"where to write the results (default {RESULTS.relative_to(BENCH.parent)})")
    args = parser.parse_args(argv)
    scenarios = [s for s in args.scenario.split(",") if s]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(sorted(unknown))}; choose from {', '.join(SCENARIOS)}")
    stores = STORES if args.store == "both" else (args.store,)
    repeat = 1 if args.quick else max(args.repeat, 1)
    env = machine()
    prepare(max(args.agents, 50))
    started = time.perf_counter()
    summaries = []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-calls-") as tmp:
        for scenario in scenarios:
            runs: dict[str, list[dict[str, Any]]] = {}
            for kind in stores:
                runs[kind] = []
                for rep in range(repeat):
                    directory = os.path.join(tmp, f"{scenario}-{kind}-{rep}")
                    os.makedirs(directory)
                    runs[kind].append(asyncio.run(run_one(scenario, kind, directory, args.agents,
                                                          args.by_site and rep == 0)))
            summary = summarize(scenario, runs)
            summaries.append(summary)
            print_scenario(summary, args.agents)
    print_summary(summaries, args.agents)
    seconds = time.perf_counter() - started
    print(f"\n(bench took {seconds:.1f}s; commit {(env['git_commit'] or '?')[:10]}{' (dirty)' if env['git_dirty'] else ''}, "
          f"{env['nproc']} CPUs, load average {os.getloadavg()[0]:.2f})")
    payload = {"bench": "store_calls", "schema": 1, "environment": env,
               "config": {"scenarios": scenarios, "stores": list(stores), "agents": args.agents, "repeat": repeat},
               "seconds": round(seconds, 2), "scenarios": summaries}
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=1))
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
