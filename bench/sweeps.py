"""Sweep throughput per backend, before (#34) and after side by side, and the sweep's overhead per cell.

    .venv/bin/python bench/sweeps.py                 # 200 cells, 50 ms per cell, concurrency 64: before and after
    .venv/bin/python bench/sweeps.py --quick         # 200 cells, without the 64-worker pool of before
    .venv/bin/python bench/sweeps.py --only asyncio,process --sides after
    .venv/bin/python bench/sweeps.py --quick --dir /dev/shm   # stores on tmpfs: the code's cost, not the disk's
    .venv/bin/python bench/sweeps.py --only inspect --inspect-python /path/to/venv/bin/python   # Inspect AI

Every cell is one legacy run of one model call: the fallible model (`fallible:latency=0.05`)
answering a task it does not know with one text reply after 50 ms, as a provider would. The
grid: 200 distinct tasks x 1 model x legacy x 1 repeat, no scorer. Each scenario runs in its own
child process, once on this checkout (`after`) and once on the code before #34 (`before`:
`bench/targets.py:BEFORE_REF`, or the ref given by `--before REF`, extracted into a temporary folder and put first on the child's
`PYTHONPATH`), alternating, so load hits both alike. The same `run_sweep` call runs on both:

- `asyncio` at concurrency 64 on a memory store and on SQLite (the store the other backends need);
- `process` at concurrency 64 with 2 workers (one per core) on SQLite, and with the default
  workers (before: `workers` = `concurrency` = 64 processes; after: the cores) — not in `--quick`;
- `ray` at concurrency 64 with 2 workers on SQLite (`ray.init(num_cpus=2)` in the child, timed apart);
- `asyncio` and `process` (2 workers) on a file store: no database lock shared by the workers.

Per scenario: `total_s` (the whole `run_sweep` call: ledger read, workers' start, cells, final
ledger read), `start_s` (until the first cell started: the ledger read and, off-process, the
workers' spawn and imports), `cells_per_s` = cells / (last cell finished - first cell
started), from the progress observer: the rate of warm workers, the figure the #34 targets bound;
and `cpu_s`, the CPU seconds the child and its worker processes used (not for Ray, whose actors
are the raylet's children): CPU per cell does not move with the machine's load the way rates do.
The ideal is 1,000 cells/s (4 waves of 64 cells of 50 ms); one core's CPU caps the in-process path.

Also, after only: `inspect` (Inspect AI's `eval_set` over 200 samples whose solver waits 50 ms,
`mockllm/model`, `max_samples` 8 and 32, when inspect-ai can be imported here or by
`--inspect-python`; `one_sample_s` is its fixed cost) and `overhead` (200 cells at 0 ms, sweep at
concurrency 1 vs the same runs as bare `AgentRunner.run_result` calls, per cell).

Numbers move with machine load (other sessions share the cores): the load average is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from targets import BEFORE_REF, before_tree, env_for, target  # noqa: E402

LATENCY = 0.05
CONCURRENCY = 64
SCENARIOS: dict[str, dict[str, Any]] = {
    "asyncio memory": {"backend": "asyncio", "store": "memory", "workers": None},
    "asyncio sqlite": {"backend": "asyncio", "store": "sqlite", "workers": None},
    "process 2 workers": {"backend": "process", "store": "sqlite", "workers": 2},
    "process default workers": {"backend": "process", "store": "sqlite", "workers": None},
    "ray 2 workers": {"backend": "ray", "store": "sqlite", "workers": 2},
    "asyncio file": {"backend": "asyncio", "store": "file", "workers": None},
    "process 2 workers file": {"backend": "process", "store": "file", "workers": 2},
}


# ---- one scenario, in a child process that imports cyber_agent from the tree it was given ------------------------
def grid(cells: int, latency: float, name: str) -> Any:
    """`cells` one-call cells: distinct tasks the offline model answers with one reply."""
    from cyber_agent.experiments import Sweep, SweepTask

    tasks = [SweepTask(id=f"t{i:04d}", prompt=f"Write a haiku about sample {i}.") for i in range(cells)]
    return Sweep(name=name, tasks=tasks, models=[f"fallible:latency={latency}"], workspace=str(REPO))


async def timed_sweep(cells: int, latency: float, *, store_url: str, backend: str = "asyncio",
                      concurrency: int = CONCURRENCY, workers: int | None = None) -> dict[str, Any]:
    """Run one sweep; its total time, time to the first cell, and the cells' rate from first start to last end."""
    from cyber_agent.experiments import run_sweep
    from cyber_agent.trace import open_store

    store = open_store(store_url)
    marks: dict[str, float] = {}

    def observe(progress: Any) -> None:
        now = time.perf_counter()
        if progress.running and "first" not in marks:
            marks["first"] = now
        if progress.done + progress.failed == cells:
            marks.setdefault("last", now)

    cpu_before = _cpu()
    started = time.perf_counter()
    report = await run_sweep(grid(cells, latency, f"bench-{backend}-{concurrency}"), store, concurrency=concurrency,
                             backend=backend, workers=workers, on_progress=observe)  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    _stop_fork_server()
    cpu = _cpu() - cpu_before
    assert report.progress.done == cells, report.progress
    return {"total_s": seconds, "start_s": marks["first"] - started,
            "cells_per_s": cells / (marks["last"] - marks["first"]),
            "cpu_s": None if backend == "ray" else cpu}  # Ray's actors are the raylet's children, not ours


def _stop_fork_server() -> None:
    """Stop multiprocessing's fork server (after's workers fork from it, so they are its children, not ours): once it
    is reaped, its CPU and that of the workers it reaped count among this process's children."""
    from multiprocessing import forkserver

    stop = getattr(forkserver._forkserver, "_stop", None)  # private, but the only way to end it early
    if stop is not None:
        stop()


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the pool's workers once joined)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def start_ray() -> float:
    """`ray.init(num_cpus=2)`, retried (on a loaded machine the raylet can miss Ray's 30 s start window); its seconds."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    started = time.perf_counter()
    for attempt in range(3):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            return time.perf_counter() - started
        except Exception as exc:  # Ray raises several types on a slow start
            ray.shutdown()
            if attempt == 2 or "timed out during startup" not in str(exc):
                raise
    raise AssertionError("unreachable")


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the scenario `spec` (backend, store, workers, cells, concurrency) here; its figures."""
    with tempfile.TemporaryDirectory(prefix="bench-sweeps-", dir=spec.get("dir")) as tmp:
        url = {"memory": "memory:", "sqlite": f"sqlite:///{Path(tmp) / 'sweep.db'}",
               "file": f"file:{Path(tmp) / 'traces'}"}[spec["store"]]
        extra: dict[str, Any] = {}
        if spec["backend"] == "ray":
            try:
                import ray  # noqa: F401
            except ImportError:
                return {"skipped": "ray is not installed (pip install 'cyber-agent[ray]')"}
            extra["ray_init_s"] = start_ray()
        try:
            result = asyncio.run(timed_sweep(spec["cells"], LATENCY, store_url=url, backend=spec["backend"],
                                             concurrency=spec["concurrency"], workers=spec["workers"]))
        finally:
            if spec["backend"] == "ray":
                import ray

                ray.shutdown()
    return {**result, **extra}


def run_child(spec: dict[str, Any], tree: Path | None, timeout: float) -> dict[str, Any]:
    """Run one scenario in a fresh interpreter importing cyber_agent from `tree` (None: this checkout)."""
    try:
        # Not cwd=REPO: Ray puts the driver's working directory first on its workers' path, which would
        # import this checkout's cyber_agent on the `before` side.
        ran = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env_for(tree),
                             cwd=tempfile.gettempdir(),
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"skipped": f"timed out after {timeout:.0f} s"}
    if ran.returncode != 0:
        return {"skipped": f"failed: {ran.stderr.strip()[-300:]}"}
    result: dict[str, Any] = json.loads(ran.stdout.strip().splitlines()[-1])
    return result


def ideal_rate(cells: int, concurrency: int, latency: float) -> float:
    """Cells per second if only the model's latency counted: full waves of `concurrency` cells."""
    return cells / (math.ceil(cells / concurrency) * latency)


INSPECT = """
import asyncio, json, sys, tempfile, time
from inspect_ai import Task, eval_set
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.solver import Generate, TaskState, solver


@solver
def wait_then_generate(latency):
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        await asyncio.sleep(latency)  # the provider's latency, as the fallible model sleeps before answering
        return await generate(state)
    return solve


def timed(n, latency, max_samples):
    outputs = []
    for _ in range(n):  # usage given, so mockllm needs no tokenizer download
        output = ModelOutput.from_content(model="mockllm", content="a haiku")
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        outputs.append(output)
    task = Task(dataset=[Sample(input=f"Write a haiku about sample {i}.", target="x") for i in range(n)],
                solver=wait_then_generate(latency))
    started = time.perf_counter()
    ok, logs = eval_set(task, log_dir=tempfile.mkdtemp(prefix="inspect-bench-"),
                        model=get_model("mockllm/model", custom_outputs=outputs), max_samples=max_samples,
                        display="none", log_level="error")
    assert ok and all(log.status == "success" for log in logs), [str(log.error)[:300] for log in logs]
    return time.perf_counter() - started


cells, latency, max_samples = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
one = timed(1, latency, max_samples)  # eval_set's fixed cost (task set-up, log files), paid once per call
print(json.dumps({"one": one, "seconds": timed(cells, latency, max_samples)}))
"""


def bench_inspect(cells: int, python: str | None) -> list[dict[str, object]]:
    python = python or sys.executable
    probe = subprocess.run([python, "-c", "import inspect_ai"], capture_output=True, text=True)
    if probe.returncode != 0:
        return [{"backend": "inspect", "skipped": f"inspect-ai cannot be imported by {python}"}]
    rows: list[dict[str, object]] = []
    for max_samples in (8, 32):
        ran = subprocess.run([python, "-c", textwrap.dedent(INSPECT), str(cells), str(LATENCY), str(max_samples)],
                             capture_output=True, text=True, timeout=900)
        if ran.returncode != 0:
            rows.append({"backend": "inspect", "skipped": f"eval_set failed: {ran.stderr.strip()[-300:]}"})
            continue
        result = json.loads(ran.stdout.strip().splitlines()[-1])
        rows.append({"backend": "inspect eval_set", "store": "log dir", "concurrency": max_samples,
                     "seconds": result["seconds"], "cells_per_s": cells / result["seconds"],
                     "one_sample_s": result["one"]})
    return rows


async def _bare(cells: int) -> float:
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner, default_registry
    from cyber_agent.llm import FallibleModel
    from cyber_agent.trace import InMemoryTraceStore

    store, registry = InMemoryTraceStore(), default_registry()
    started = time.perf_counter()
    for i in range(cells):
        runner = AgentRunner(trace_store=store, llm_call=FallibleModel(), workspace=REPO, tool_registry=registry)
        await runner.run_result([{"role": "user", "content": f"Write a haiku about sample {i}."}],
                                RunConfig(model="fallible", agent_mode="legacy", workspace=str(REPO)))
    return time.perf_counter() - started


def bench_overhead(cells: int) -> list[dict[str, object]]:
    bare = asyncio.run(_bare(cells))
    swept = asyncio.run(timed_sweep(cells, 0.0, store_url="memory:", concurrency=1))["total_s"]
    assert isinstance(swept, float)
    return [{"backend": "overhead", "bare_ms_per_cell": 1000 * bare / cells, "sweep_ms_per_cell": 1000 * swept / cells,
             "overhead_ms_per_cell": 1000 * (swept - bare) / cells}]


def targets(rows: list[dict[str, Any]], cells: int) -> list[dict[str, Any]]:
    """The #34 sweep targets from the scenario rows (bench/targets.py rows for run_all.py)."""
    rate = {(r["scenario"], r["side"]): r.get("cells_per_s") for r in rows}
    ideal = ideal_rate(cells, CONCURRENCY, LATENCY)
    out = []

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a / b

    pool, pool_before = rate.get(("process 2 workers", "after")), rate.get(("process 2 workers", "before"))
    if pool is not None:
        out.append(target("34.sweeps.process_64", after=pool, before=pool_before, floor=ideal, floor_name="ideal",
                          unit="cells/s", limit=">= 500 cells/s", met=pool >= 500))
    local, local_before = rate.get(("asyncio sqlite", "after")), rate.get(("asyncio sqlite", "before"))
    if pool is not None and local is not None:
        now, then = ratio(pool, local), ratio(pool_before, local_before)
        out.append(target("34.sweeps.process_vs_asyncio", after=pool, before=pool_before, unit="cells/s", ratio=now,
                          ratio_of="process pool / asyncio (SQLite, concurrency 64)", limit=">= 1.5x",
                          met=now is not None and now >= 1.5,
                          note=f"before: {then:.2f}x" if then is not None else ""))
    ray_rate, ray_before = rate.get(("ray 2 workers", "after")), rate.get(("ray 2 workers", "before"))
    if ray_rate is not None and pool is not None:
        now, then = ratio(ray_rate, pool), ratio(ray_before, pool_before)
        out.append(target("34.sweeps.ray_vs_process", after=ray_rate, before=ray_before, unit="cells/s", ratio=now,
                          ratio_of="Ray / process pool (2 workers)", limit=">= 1.0x", met=now is not None and now >= 1.0,
                          note=f"before: {then:.2f}x" if then is not None else ""))
    memory, memory_before = rate.get(("asyncio memory", "after")), rate.get(("asyncio memory", "before"))
    if memory is not None:
        out.append(target("34.sweeps.asyncio_64", after=memory, before=memory_before, floor=ideal, floor_name="ideal",
                          unit="cells/s", ratio=ratio(memory, memory_before), ratio_of="after / before", limit="reported",
                          met=None))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="skip the 64-worker pool of before")
    parser.add_argument("--only", default="asyncio,process,ray,inspect,overhead")
    parser.add_argument("--sides", default="before,after", help="before, after or both")
    parser.add_argument("--before", default=None, metavar="REF",
                        help="the git ref `before` runs (default: bench/targets.py:BEFORE_REF, main before #34)")
    parser.add_argument("--inspect-python", default=None, help="a python that can import inspect_ai")
    parser.add_argument("--json", default=None, help="write the rows here")
    parser.add_argument("--dir", default=None, help="where the stores go (e.g. /dev/shm: the code's cost without a shared disk)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    cells, only, sides = args.cells, set(args.only.split(",")), args.sides.split(",")
    before_ref = args.before or BEFORE_REF
    trees = {"before": before_tree(before_ref) if "before" in sides else None, "after": None}
    rows: list[dict[str, Any]] = []
    for scenario, config in SCENARIOS.items():
        if config["backend"] not in only or (args.quick and scenario == "process default workers"):
            continue
        for side in sides:
            spec = {**config, "cells": cells, "concurrency": CONCURRENCY, "dir": args.dir}
            result = run_child(spec, trees[side], timeout=900)
            row = {"scenario": scenario, "side": side, **config, "concurrency": CONCURRENCY, **result}
            rows.append(row)
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    extra: list[dict[str, Any]] = []
    if "inspect" in only:
        extra += bench_inspect(cells, args.inspect_python)
    if "overhead" in only:
        extra += bench_overhead(cells)
    print(f"\n{cells} cells, {LATENCY * 1000:.0f} ms per cell, concurrency {CONCURRENCY}, stores in {args.dir or tempfile.gettempdir()} (ideal "
          f"{ideal_rate(cells, CONCURRENCY, LATENCY):.0f} cells/s); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'scenario':<26} {'side':<7} {'total s':>8} {'start s':>8} {'cells/s':>8} {'CPU ms/cell':>12}")
    for row in rows:
        if "cells_per_s" in row:
            ray_init = f"  (ray.init {row['ray_init_s']:.1f} s apart)" if "ray_init_s" in row else ""
            cpu = "-" if row.get("cpu_s") is None else f"{1000 * row['cpu_s'] / cells:.1f}"
            print(f"{row['scenario']:<26} {row['side']:<7} {row['total_s']:>8.2f} {row['start_s']:>8.2f} "
                  f"{row['cells_per_s']:>8.1f} {cpu:>12}{ray_init}")
        else:
            print(f"{row['scenario']:<26} {row['side']:<7} skipped: {row['skipped']}")
    for row in extra:
        if "cells_per_s" in row:
            print(f"{row['backend']:<26} {'after':<7} {row['seconds']:>8.2f} {'-':>8} {row['cells_per_s']:>8.1f}")
        elif "overhead_ms_per_cell" in row:
            print(f"overhead per cell: sweep {row['sweep_ms_per_cell']:.1f} ms vs bare runner {row['bare_ms_per_cell']:.1f} ms "
                  f"= {row['overhead_ms_per_cell']:.1f} ms")
        else:
            print(f"{row['backend']:<26} skipped: {row['skipped']}")
    found = targets(rows, cells)
    for t in found:
        shown = f"{t['ratio']:.2f}x" if t["ratio"] is not None else f"{t['after']:.0f} {t['unit']}"
        then = f"; {t['note']}" if t.get("note") else ""
        print(f"target {t['id']}: {shown} ({t['limit']}{then}): {'MET' if t['met'] else 'NOT MET' if t['met'] is False else '-'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"bench": "sweeps", "cells": cells, "latency_s": LATENCY, "dir": args.dir,
                                               "concurrency": CONCURRENCY, "load": os.getloadavg()[0], "rows": rows,
                                               "extra": extra, "issue_targets": found}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
