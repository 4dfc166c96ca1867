"""Sweep throughput per backend, and the sweep's overhead per cell over a bare runner call.

    .venv/bin/python bench/sweeps.py                 # 200 cells, 50 ms per cell: asyncio 1/8/32, process pool, Ray, Inspect AI
    .venv/bin/python bench/sweeps.py --quick         # 40 cells
    .venv/bin/python bench/sweeps.py --only asyncio,overhead
    .venv/bin/python bench/sweeps.py --inspect-python /path/to/venv/bin/python   # Inspect AI from another venv

Every cell is one legacy run of one model call: the fallible model (`fallible:latency=0.05`)
answering a task it does not know with one text reply after 50 ms, as a provider would. The
grid: 200 distinct tasks × 1 model × legacy × 1 repeat, no scorer. Rows:

- `asyncio` at concurrency 1, 8 and 32 on a memory store, and at 8 on SQLite (the store the
  other backends need);
- `process`: a `ProcessPoolExecutor` of 2 workers (one per core) and of 8 on SQLite, the workers'
  start (spawn, imports) included;
- `ray`: Ray with `num_cpus=2`, 2 workers, on SQLite; `ray.init` is timed apart;
- `inspect`: Inspect AI's `eval_set` over 200 samples whose solver waits 50 ms and whose model
  is `mockllm/model`, `max_samples` 8 and 32, when inspect-ai can be imported (here or by
  `--inspect-python`); otherwise the row says why it was skipped. `one_sample_s` is the same
  call over one sample: its fixed cost;
- `overhead`: 200 cells at 0 ms latency, sweep (concurrency 1) vs the same runs as bare
  `AgentRunner.run_result` calls, per cell.

Numbers move with machine load (other sessions share the cores): the load average is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cyber_agent.core.config import RunConfig  # noqa: E402
from cyber_agent.core.runner import AgentRunner, default_registry  # noqa: E402
from cyber_agent.experiments import Sweep, SweepTask, run_sweep  # noqa: E402
from cyber_agent.llm import FallibleModel  # noqa: E402
from cyber_agent.trace import InMemoryTraceStore, open_store  # noqa: E402

LATENCY = 0.05


def grid(cells: int, latency: float, name: str) -> Sweep:
    """`cells` one-call cells: distinct tasks the offline model answers with one reply."""
    tasks = [SweepTask(id=f"t{i:04d}", prompt=f"Write a haiku about sample {i}.") for i in range(cells)]
    return Sweep(name=name, tasks=tasks, models=[f"fallible:latency={latency}"], workspace=str(REPO))


async def _timed_sweep(cells: int, latency: float, *, store_url: str, backend: str = "asyncio", concurrency: int = 8,
                       workers: int | None = None) -> dict[str, object]:
    store = open_store(store_url)
    started = time.perf_counter()
    report = await run_sweep(grid(cells, latency, f"bench-{backend}-{concurrency}"), store, concurrency=concurrency,
                             backend=backend, workers=workers)  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    assert report.progress.done == cells, report.progress
    return {"seconds": seconds, "cells_per_s": cells / seconds}


def bench_asyncio(cells: int, work: Path) -> list[dict[str, object]]:
    rows = []
    for concurrency in (1, 8, 32):
        result = asyncio.run(_timed_sweep(cells, LATENCY, store_url="memory:", concurrency=concurrency))
        rows.append({"backend": "asyncio", "store": "memory", "concurrency": concurrency, **result})
    result = asyncio.run(_timed_sweep(cells, LATENCY, store_url=f"sqlite:///{work / 'asyncio.db'}", concurrency=8))
    rows.append({"backend": "asyncio", "store": "sqlite", "concurrency": 8, **result})
    return rows


def bench_process(cells: int, work: Path) -> list[dict[str, object]]:
    rows = []
    for workers in (2, 8):  # one per core, and more than cores: a cell mostly waits on its model
        result = asyncio.run(_timed_sweep(cells, LATENCY, store_url=f"sqlite:///{work / f'process{workers}.db'}",
                                          backend="process", concurrency=workers, workers=workers))
        rows.append({"backend": "process", "store": "sqlite", "concurrency": workers, **result})
    return rows


def bench_ray(cells: int, work: Path) -> list[dict[str, object]]:
    try:
        import ray
    except ImportError:
        return [{"backend": "ray", "skipped": "ray is not installed (pip install 'cyber-agent[ray]')"}]
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    started = time.perf_counter()
    for attempt in range(3):  # on a loaded machine the raylet can miss Ray's fixed 30 s start window
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            break
        except Exception as exc:  # noqa: BLE001 - Ray raises several types on a slow start; retried below
            ray.shutdown()
            if attempt == 2 or "timed out during startup" not in str(exc):
                return [{"backend": "ray", "skipped": f"ray.init failed: {exc}"}]
    init = time.perf_counter() - started
    try:
        result = asyncio.run(_timed_sweep(cells, LATENCY, store_url=f"sqlite:///{work / 'ray.db'}", backend="ray",
                                          concurrency=2, workers=2))
    finally:
        ray.shutdown()
    return [{"backend": "ray", "store": "sqlite", "concurrency": 2, "ray_init_s": init, **result}]


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
    store, registry = InMemoryTraceStore(), default_registry()
    started = time.perf_counter()
    for i in range(cells):
        runner = AgentRunner(trace_store=store, llm_call=FallibleModel(), workspace=REPO, tool_registry=registry)
        await runner.run_result([{"role": "user", "content": f"Write a haiku about sample {i}."}],
                                RunConfig(model="fallible", agent_mode="legacy", workspace=str(REPO)))
    return time.perf_counter() - started


def bench_overhead(cells: int) -> list[dict[str, object]]:
    bare = asyncio.run(_bare(cells))
    swept = asyncio.run(_timed_sweep(cells, 0.0, store_url="memory:", concurrency=1))["seconds"]
    assert isinstance(swept, float)
    return [{"backend": "overhead", "bare_ms_per_cell": 1000 * bare / cells, "sweep_ms_per_cell": 1000 * swept / cells,
             "overhead_ms_per_cell": 1000 * (swept - bare) / cells}]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="40 cells")
    parser.add_argument("--only", default="asyncio,process,ray,inspect,overhead")
    parser.add_argument("--inspect-python", default=None, help="a python that can import inspect_ai")
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args(argv)
    cells = 40 if args.quick else args.cells
    only = set(args.only.split(","))
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-sweeps-") as tmp:
        work = Path(tmp)
        for name, run in (("asyncio", lambda: bench_asyncio(cells, work)), ("process", lambda: bench_process(cells, work)),
                          ("ray", lambda: bench_ray(cells, work)), ("inspect", lambda: bench_inspect(cells, args.inspect_python)),
                          ("overhead", lambda: bench_overhead(cells))):
            if name in only:
                for row in run():
                    rows.append(row)
                    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    print(f"\n{cells} cells, {LATENCY * 1000:.0f} ms per cell; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'backend':<18} {'store':<8} {'conc.':>5} {'seconds':>8} {'cells/s':>8}")
    for row in rows:
        if "cells_per_s" in row:
            print(f"{row['backend']:<18} {row['store']:<8} {row['concurrency']:>5} {row['seconds']:>8.2f} {row['cells_per_s']:>8.1f}")
        elif "overhead_ms_per_cell" in row:
            print(f"overhead per cell: sweep {row['sweep_ms_per_cell']:.1f} ms vs bare runner {row['bare_ms_per_cell']:.1f} ms "
                  f"= {row['overhead_ms_per_cell']:.1f} ms")
        else:
            print(f"{row['backend']:<18} skipped: {row['skipped']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"cells": cells, "latency_s": LATENCY, "load": os.getloadavg()[0], "rows": rows},
                                              indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
