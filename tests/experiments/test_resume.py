"""A sweep resumes from its store: finished cells never run again, errored ones are retried up to a limit,
and a sweep killed mid-run and re-run gives the frame of an uninterrupted sweep."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_helpers import REPO, TASKS, VOLATILE, small_sweep

from cyber_agent.experiments import ModelEntry, Sweep, read_ledger, run_sweep, sweep_frame
from cyber_agent.llm import DemoModel
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore

DRIVER = Path(__file__).with_name("sweep_driver.py")


class Flaky:
    """A demo model whose first `failures` calls (counted per process, per task) raise."""

    calls: dict[str, int] = {}

    def __init__(self, failures: int = 1) -> None:
        self.failures = failures
        self.demo = DemoModel()

    async def __call__(self, messages, model, tools=None, temperature=None, *, on_delta=None):
        task = str(messages[-1]["content"]) if messages else ""
        first = next(str(m["content"]) for m in messages if m["role"] == "user")
        count = Flaky.calls[first] = Flaky.calls.get(first, 0) + 1
        if count <= self.failures:
            raise ConnectionError(f"provider down ({task[:20]})")
        return await self.demo(messages, model, tools, temperature)


def flaky(failures: int = 1) -> Flaky:
    return Flaky(failures)


async def test_a_rerun_skips_every_finished_cell_and_changes_nothing():
    store = InMemoryTraceStore()
    grid = small_sweep(tasks=4, repeats=1)
    first = await run_sweep(grid, store)
    assert first.progress.done == len(grid.cells()) and first.progress.skipped == 0
    traces_before = {t.trace_id: t.updated_at for t in await store.list_traces(limit=None)}
    again = await run_sweep(grid, store)
    assert again.progress.skipped == len(grid.cells()) and again.progress.done == 0
    assert {t.trace_id: t.updated_at for t in await store.list_traces(limit=None)} == traces_before
    assert again.frame().equals(first.frame())


async def test_a_grid_that_grows_runs_only_its_new_cells():
    store = InMemoryTraceStore()
    small = Sweep(name="grow", tasks=TASKS[:2], models=["fallible:0.3"], workspace=str(REPO))
    await run_sweep(small, store)
    bigger = Sweep(name="grow-more", tasks=TASKS[:3], models=["fallible:0.3"], repeats=2, workspace=str(REPO))
    report = await run_sweep(bigger, store)
    assert (report.progress.skipped, report.progress.done) == (2, 4)  # repeat 0 of the two old tasks is the same cell


async def test_a_cell_whose_run_raises_is_retried_and_its_errors_are_counted():
    Flaky.calls.clear()
    store = InMemoryTraceStore()
    grid = Sweep(name="flaky", tasks=TASKS[:2], models=[ModelEntry(spec="flaky", factory=flaky, options={"failures": 2})],
                 workspace=str(REPO), max_retries=2)
    report = await run_sweep(grid, store)
    frame = report.frame()
    assert list(frame["status"]) == ["completed", "completed"] and list(frame["errors"]) == [2, 2]
    assert report.progress.errors == 4 and report.progress.failed == 0
    errored = [t.sweep_cell for t in await store.list_traces(limit=None) if t.sweep_cell and t.sweep_cell.state == "error"]
    assert len(errored) == 4 and all("ConnectionError: provider down" in (r.error or "") for r in errored)


async def test_retries_stop_at_the_limit_and_a_rerun_does_not_exceed_it():
    Flaky.calls.clear()
    store = InMemoryTraceStore()
    grid = Sweep(name="down", tasks=TASKS[:1], models=[ModelEntry(spec="down", factory=flaky, options={"failures": 99})],
                 workspace=str(REPO), max_retries=1)
    report = await run_sweep(grid, store)
    row = report.frame().iloc[0]
    assert (row["status"], row["errors"], report.progress.failed) == ("error", 2, 1)
    assert "provider down" in row["explanation"]
    calls = sum(Flaky.calls.values())
    again = await run_sweep(grid, store)
    assert sum(Flaky.calls.values()) == calls and again.progress.failed == 1  # nothing ran
    more = Sweep(name="down", tasks=TASKS[:1], models=[ModelEntry(spec="down", factory=flaky, options={"failures": 99})],
                 workspace=str(REPO), max_retries=2)
    assert (await run_sweep(more, store)).frame().iloc[0]["errors"] == 3  # a higher limit allows one more attempt


async def test_an_attempt_cut_off_mid_run_is_marked_and_run_again():
    store = InMemoryTraceStore()
    grid = Sweep(name="cut", tasks=TASKS[:1], models=["fallible"], workspace=str(REPO))
    cell = grid.cells()[0]
    from cyber_agent.trace import Trace

    await store.create_trace(Trace.create(trace_id=cell.trace_id(0), task=cell.task.prompt))  # a run whose process died
    report = await run_sweep(grid, store)
    cut = await store.get_trace(cell.trace_id(0))
    assert cut.status == "stopped" and cut.sweep_cell.state == "interrupted"
    row = report.frame().iloc[0]
    assert row["status"] == "completed" and row["errors"] == 0 and row["trace_id"] == cell.trace_id(1)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
async def test_kill_mid_run_and_rerun_gives_the_uninterrupted_frame(tmp_path):
    grid = small_sweep(0.02, tasks=4, repeats=1)
    total = len(grid.cells())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env = {k: v for k, v in env.items() if not k.startswith("AGENT_")}
    process = subprocess.Popen([sys.executable, str(DRIVER), str(tmp_path), "0.02", "4", "4", "1"], env=env, cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while True:
            assert process.poll() is None, f"the sweep ended before it was killed: {process.communicate()}"
            assert time.monotonic() < deadline, "the sweep made no progress"
            statuses = await read_ledger(FileSystemTraceStore(tmp_path), grid)
            if sum(s.done for s in statuses) >= total // 4:
                break
            await asyncio.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    before = {s.cell.key: s.record for s in await read_ledger(FileSystemTraceStore(tmp_path), grid) if s.done}
    assert 0 < len(before) < total, "the kill did not land mid-run"

    store = FileSystemTraceStore(tmp_path)
    resumed = await run_sweep(grid, store, concurrency=4)
    assert resumed.progress.skipped == len(before) and resumed.progress.done == total - len(before)
    after = {s.cell.key: s for s in resumed.statuses}
    for key, record in before.items():  # no finished cell ran again
        assert after[key].record == record and after[key].next_attempt == record.attempt + 1
    interrupted = [t for t in await store.list_traces(limit=None) if t.sweep_cell and t.sweep_cell.state == "interrupted"]
    assert interrupted, "no attempt was in flight when the sweep was killed"
    assert all(s.done for s in resumed.statuses)  # no cell lost

    uninterrupted = await run_sweep(grid, InMemoryTraceStore(), concurrency=4)
    expected, got = uninterrupted.frame().drop(columns=VOLATILE), resumed.frame().drop(columns=VOLATILE)
    assert got.equals(expected), got.compare(expected)
    assert (await sweep_frame(store, grid)).drop(columns=VOLATILE).equals(expected)
