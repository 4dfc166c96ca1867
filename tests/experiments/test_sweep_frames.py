"""Frames, summaries, charts and progress of a sweep."""

from __future__ import annotations

import io
import warnings

import pandas as pd
import pytest
from sweep_helpers import REPO, TASKS

from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments import (
    FRAME_COLUMNS,
    Sweep,
    SweepProgress,
    TextProgressBar,
    plot_metric,
    plot_score_vs_cost,
    run_sweep,
    summarize,
    sweep_frame,
    sweep_roots,
)
from cyber_agent.trace import InMemoryTraceStore


def grid() -> Sweep:
    return Sweep(name="frames", tasks=TASKS[:2] + TASKS[8:10], models=["fallible:0.2", "fallible:0.6"],
                 modes=["legacy", "recursive"], repeats=2, workspace=str(REPO))


async def test_a_store_without_runs_gives_one_pending_row_per_cell():
    frame = await sweep_frame(InMemoryTraceStore(), grid())
    assert list(frame.columns) == list(FRAME_COLUMNS)
    assert len(frame) == 32 and set(frame["status"]) == {"pending"} and frame["score"].isna().all()
    assert frame["trace_id"].isna().all()


async def test_the_frame_has_one_row_per_cell_with_its_numbers():
    store = InMemoryTraceStore()
    report = await run_sweep(grid(), store)
    frame = await sweep_frame(store, grid())
    assert frame.equals(report.frame())
    assert set(frame["status"]) <= {"completed", "failed", "stopped"} and frame["score"].notna().all()
    assert (frame["tokens"] > 0).all() and (frame["cost"] > 0).all() and (frame["llm_calls"] > 0).all()
    recursive, legacy = frame[frame["mode"] == "recursive"], frame[frame["mode"] == "legacy"]
    assert (legacy["agents"] == 1).all() and (recursive[recursive["task_type"] == "lookup"]["agents"] >= 2).all()
    assert recursive["llm_calls"].mean() > legacy["llm_calls"].mean()
    root = await store.get_trace(frame.iloc[0]["trace_id"])
    assert root.sweep_cell.key == frame.iloc[0]["key"] and root.sweep_cell.answer == frame.iloc[0]["answer"]
    roots = await sweep_roots(store, grid())
    assert roots == list(frame["trace_id"])


def synthetic() -> pd.DataFrame:
    rows = []
    for mode, scores in (("legacy", [[1, 0], [0, 0]]), ("recursive", [[1, 1], [1, 0]])):
        for repeat, pair in enumerate(scores):
            for task, score in enumerate(pair):
                rows.append({"mode": mode, "model": "m", "repeat": repeat, "task": f"t{task}", "status": "completed",
                             "score": float(score), "cost": 1.0 if mode == "legacy" else 3.0 + repeat, "tokens": 10,
                             "llm_calls": 2})
    rows.append({"mode": "legacy", "model": "m", "repeat": 0, "task": "t9", "status": "pending", "score": None,
                 "cost": 0.0, "tokens": 0, "llm_calls": 0})
    return pd.DataFrame(rows)


def test_summaries_take_each_repeats_mean_as_one_sample():
    summary = summarize(synthetic()).set_index("mode")
    assert summary.loc["legacy", "score_mean"] == pytest.approx(0.25)  # repeat means 0.5 and 0.0
    assert summary.loc["legacy", "score_std"] == pytest.approx(0.3535, abs=1e-3)
    assert summary.loc["recursive", "score_mean"] == pytest.approx(0.75)
    assert summary.loc["recursive", "cost_mean"] == pytest.approx(3.5) and summary.loc["recursive", "cost_std"] > 0
    assert (summary.loc["legacy", "cells"], summary.loc["legacy", "unfinished"], summary.loc["legacy", "repeats"]) == (4, 1, 2)


def test_charts_draw_one_point_or_bar_per_group_with_error_bars():
    frame = synthetic()
    figure = plot_score_vs_cost(frame)
    axes = figure.axes[0]
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["legacy · m", "recursive · m"]
    assert len(axes.containers) == 2 and all(c.has_xerr and c.has_yerr for c in axes.containers)
    bars = plot_metric(frame, "cost", by="mode", hue="model").axes[0]
    assert [round(p.get_height(), 3) for p in bars.patches] == [1.0, 3.5]
    with pytest.raises(ConfigurationError, match="unknown metric"):
        plot_metric(frame, "speed")


def snapshot(**changes) -> SweepProgress:
    values = {"sweep": "s", "total": 4, "skipped": 1, "done": 1, "running": 1, "failed": 0, "errors": 0, "cost": 0.5,
              "tokens": 100, "elapsed": 2.0}
    return SweepProgress(**{**values, **changes})


def test_the_text_bar_prints_at_most_one_line_per_interval_and_always_the_last():
    now = [0.0]
    out = io.StringIO()
    bar = TextProgressBar(out, every=1.0, clock=lambda: now[0])
    bar(snapshot())
    bar(snapshot(done=2, running=0))  # within the interval: not printed (pending 1 left)
    now[0] = 5.0
    bar(snapshot(done=3, running=0))  # final: printed
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[-1].startswith("s [") and "4/4" in lines[-1] and "$0.5000" in lines[-1]
    assert snapshot().pending == 1 and snapshot().rate == 0.5


async def test_an_observer_that_raises_is_dropped_and_the_sweep_goes_on():
    seen: list[SweepProgress] = []

    def broken(progress: SweepProgress) -> None:
        seen.append(progress)
        raise RuntimeError("display gone")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = await run_sweep(Sweep(name="o", tasks=TASKS[:2], models=["fallible"], workspace=str(REPO)),
                                 InMemoryTraceStore(), on_progress=broken)
    assert report.progress.done == 2 and len(seen) == 1
    assert len([w for w in caught if "display gone" in str(w.message)]) == 1
