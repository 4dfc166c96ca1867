"""The small offline sweep the resume tests run in-process and in a killed subprocess (`sweep_driver.py`)."""

from __future__ import annotations

from pathlib import Path

from cyber_agent.experiments import Sweep, load_tasks

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
