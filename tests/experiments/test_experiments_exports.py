"""The package's `__all__` is sorted, resolves, and lists every public name its modules export (httpx's rule)."""

from __future__ import annotations

import importlib
from pathlib import Path

import cyber_agent.experiments as experiments

PACKAGE = Path(experiments.__file__).parent
# Public in their module, deliberately not lifted: the engine's and the workers' plumbing.
INTERNAL = {
    "engine": {"cell_slots", "default_workers", "run_attempts"},
    "cell_run": {"CellModel", "build_model", "run_cell", "score_record"},
    "ledger": {"blank_record"},
    "limiter": {"LimitedLLM", "RateLimitTransport", "merge_states"},
    "pool": {"CellJob", "CellOutcome", "PRELOAD", "WorkerSetup", "run_elsewhere", "shares", "worker_context"},
    "progress": {"ProgressObserver", "safe_observer"},
    "frame": {"frame_of"},
}


def test_all_is_sorted_and_every_name_exists():
    assert experiments.__all__ == sorted(experiments.__all__)
    assert all(hasattr(experiments, name) for name in experiments.__all__)


def test_every_public_module_name_is_reexported_or_listed_as_internal():
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem == "__init__":
            continue
        module = importlib.import_module(f"cyber_agent.experiments.{path.stem}")
        assert module.__all__ == sorted(module.__all__), path.name
        missing = set(module.__all__) - set(experiments.__all__) - INTERNAL.get(path.stem, set())
        assert not missing, f"{path.name} exports {sorted(missing)} but cyber_agent.experiments does not"
