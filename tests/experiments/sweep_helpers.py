"""The small offline sweep the resume tests run in-process and in a killed subprocess (`sweep_driver.py`)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from cyber_agent.experiments import ModelEntry, Sweep, SweepTask, load_tasks
from cyber_agent.trace.sweep_records import SweepCellRecord

REPO = Path(__file__).resolve().parents[2]
TASKS = load_tasks(REPO / "data" / "tasks" / "tasks.jsonl")
VOLATILE = ["duration_s", "trace_id"]
"""Frame columns that belong to the attempt that ran (wall time, attempt id), not to the cell."""


def small_sweep(latency: float = 0.0, *, tasks: int = 6, repeats: int = 2, name: str = "resume") -> Sweep:
    """Legacy and recursive, two error rates, on the first `tasks` tasks (arithmetic and lookups)."""
    chosen = TASKS[: tasks // 2] + TASKS[8 : 8 + tasks - tasks // 2]
    models = [f"fallible:rate=0.2,latency={latency}", f"fallible:rate=0.5,latency={latency}"]
    return Sweep(name=name, tasks=chosen, models=models, modes=["legacy", "recursive"], repeats=repeats,
                 workspace=str(REPO))


class PidModel:
    """A model that answers with the id of the process it runs in, after `latency` seconds (which worker ran a cell).

    Module-level, so a grid using it can be sent to worker processes. `exit_code` makes the
    worker process exit on its first call instead (a worker that dies mid-sweep).
    """

    def __init__(self, latency: float = 0.0, exit_code: int | None = None) -> None:
        self.latency = latency
        self.exit_code = exit_code

    async def __call__(self, messages: list[dict[str, Any]], model: str, tools: list[dict[str, Any]] | None = None,
                       temperature: float | None = None, *, on_delta: Any = None) -> dict[str, Any]:
        if self.exit_code is not None:
            os._exit(self.exit_code)
        await asyncio.sleep(self.latency)
        return {"content": f"pid {os.getpid()}", "prompt_tokens": 10, "completion_tokens": 2}


def pid_sweep(cells: int, latency: float, *, exit_code: int | None = None, name: str = "pids") -> Sweep:
    """`cells` one-call legacy cells answered by `PidModel`."""
    tasks = [SweepTask(id=f"p{i:03d}", prompt=f"Which process are you ({i})?") for i in range(cells)]
    entry = ModelEntry(spec="pid", label="pid", factory=PidModel, options={"latency": latency, "exit_code": exit_code})
    return Sweep(name=name, tasks=tasks, models=[entry], workspace=str(REPO))


def most_at_once(records: list[SweepCellRecord]) -> int:
    """The most cells whose runs overlapped in time (from each record's end and duration)."""
    edges = []
    for record in records:
        assert record.finished_at is not None and record.duration_s is not None
        end = record.finished_at.timestamp()
        edges += [(end - record.duration_s, 1), (end, -1)]
    running = most = 0
    for _, step in sorted(edges):
        running += step
        most = max(most, running)
    return most


class EnvModel:
    """A model that answers with one environment variable and the working folder of the process it runs in."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def __call__(self, messages: list[dict[str, Any]], model: str, tools: list[dict[str, Any]] | None = None,
                       temperature: float | None = None, *, on_delta: Any = None) -> dict[str, Any]:
        return {"content": f"{os.environ.get(self.name)} @ {os.getcwd()}", "prompt_tokens": 10, "completion_tokens": 2}


def env_sweep(cells: int, name: str) -> Sweep:
    """`cells` one-call legacy cells answered by `EnvModel(name)`."""
    tasks = [SweepTask(id=f"e{i:03d}", prompt=f"What is set ({i})?") for i in range(cells)]
    entry = ModelEntry(spec="env", label="env", factory=EnvModel, options={"name": name})
    return Sweep(name="env", tasks=tasks, models=[entry], workspace=str(REPO))
