"""The process pool and Ray give the asyncio engine's frame for the same grid and seeds; the store coordinates."""

from __future__ import annotations

import asyncio

import pytest
from sweep_helpers import REPO, TASKS, VOLATILE, small_sweep

from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments import CallableScorer, Sweep, run_sweep
from cyber_agent.trace import InMemoryTraceStore, open_store


@pytest.fixture(scope="module")
def reference():
    """The asyncio engine's frame of the grid every backend runs."""
    report = asyncio.run(run_sweep(small_sweep(tasks=4, repeats=1), InMemoryTraceStore()))
    return report.frame().drop(columns=VOLATILE)


async def test_the_process_pool_gives_the_asyncio_frame_and_shares_the_ledger(tmp_path, reference):
    store = open_store(f"sqlite:///{tmp_path / 'sweep.db'}")
    first = Sweep(name="resume", tasks=small_sweep(tasks=4).tasks[:2], models=small_sweep().entries, modes=["legacy", "recursive"],
                  workspace=str(REPO))
    await run_sweep(first, store)  # a part of the grid on asyncio...
    report = await run_sweep(small_sweep(tasks=4, repeats=1), store, backend="process", workers=2)  # ...the rest on processes
    assert (report.progress.skipped, report.progress.done, report.progress.failed) == (8, 8, 0)
    assert report.frame().drop(columns=VOLATILE).equals(reference)
    again = await run_sweep(small_sweep(tasks=4, repeats=1), store, backend="process", workers=2)
    assert again.progress.skipped == 16 and again.progress.done == 0


async def test_ray_gives_the_asyncio_frame(tmp_path, reference):
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'cyber-agent[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        store = open_store(f"sqlite:///{tmp_path / 'sweep.db'}")
        report = await run_sweep(small_sweep(tasks=4, repeats=1), store, backend="ray", workers=2)
        assert report.progress.done == 16 and report.frame().drop(columns=VOLATILE).equals(reference)
    finally:
        ray.shutdown()


async def test_other_processes_need_a_store_they_can_open():
    with pytest.raises(ConfigurationError, match="sqlite:///sweep.db"):
        await run_sweep(small_sweep(tasks=2), InMemoryTraceStore(), backend="process")


async def test_a_grid_that_cannot_be_pickled_is_refused_before_any_worker_starts(tmp_path):
    grid = Sweep(name="lambda", tasks=TASKS[:1], models=["fallible"], scorer=CallableScorer(lambda task, answer: True),
                 workspace=str(REPO))
    with pytest.raises(ConfigurationError, match="module level"):
        await run_sweep(grid, open_store(f"sqlite:///{tmp_path / 's.db'}"), backend="process")
