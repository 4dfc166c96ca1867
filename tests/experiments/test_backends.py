"""The process pool and Ray give the asyncio engine's frame for the same grid and seeds; the store coordinates."""

from __future__ import annotations

import asyncio

import pytest
from sweep_helpers import REPO, TASKS, VOLATILE, small_sweep

from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments import CallableScorer, Sweep, run_sweep
from cyber_agent.trace import InMemoryTraceStore, open_store
from tests import pg_server

POSTGRES = pg_server.available() or pg_server.required()


def postgres_url(tmp_path) -> str:
    return pg_server.server().schema_url(pg_server.schema_for(str(tmp_path)))


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


def start_ray(ray) -> None:
    """`ray.init(num_cpus=2)`, tried three times: on a loaded machine the raylet can miss Ray's fixed 30 s start window."""
    for attempt in range(3):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            return
        except Exception as exc:  # Ray raises a bare Exception for a start-up timeout
            ray.shutdown()
            if attempt == 2 or "timed out during startup" not in str(exc):
                raise


@pytest.mark.skipif(not POSTGRES, reason="PostgreSQL 15 binaries or psycopg not installed (CI installs them)")
async def test_the_process_pool_on_postgresql_gives_the_asyncio_frame(tmp_path, reference):
    report = await run_sweep(small_sweep(tasks=4, repeats=1), open_store(postgres_url(tmp_path)), backend="process", workers=2)
    assert report.progress.done == 16 and report.frame().drop(columns=VOLATILE).equals(reference)


async def test_ray_gives_the_asyncio_frame_on_sqlite_and_postgresql(tmp_path, reference, monkeypatch):
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'cyber-agent[ray]')")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    urls = [f"sqlite:///{tmp_path / 'sweep.db'}"] + ([postgres_url(tmp_path)] if POSTGRES else [])
    start_ray(ray)
    try:
        for url in urls:  # one machine here; PostgreSQL is the store of workers on several
            report = await run_sweep(small_sweep(tasks=4, repeats=1), open_store(url), backend="ray", workers=2)
            assert report.progress.done == 16 and report.frame().drop(columns=VOLATILE).equals(reference), url
        # More workers than the 2 CPUs: each actor asks for a share of a CPU, so all start (a whole CPU each would
        # leave the third waiting for one forever).
        report = await asyncio.wait_for(run_sweep(small_sweep(tasks=4, repeats=1), open_store(
            f"sqlite:///{tmp_path / 'three.db'}"), backend="ray", workers=3), 300)
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
