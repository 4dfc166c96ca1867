"""Does delegation pay: shape columns in the sweep frame, the per-group report, imported runs grouped by a column."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from sweep_helpers import REPO, TASKS

from cyber_agent.analysis.shape import delegation_shape
from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments import FRAME_COLUMNS, Sweep, run_sweep, sweep_frame
from cyber_agent.experiments.delegation import (
    REPORT_COLUMNS,
    RUN_COLUMNS,
    delegation_report,
    plot_success_vs_cost,
    runs_frame,
    wilson_interval,
)
from cyber_agent.experiments.frame import SHAPE_FRAME_COLUMNS, with_shape
from cyber_agent.importers import import_runs
from cyber_agent.trace import InMemoryTraceStore

REDEL = Path(__file__).resolve().parents[1] / "data" / "redel"


def grid() -> Sweep:
    return Sweep(name="pays", tasks=TASKS[:2] + TASKS[8:10], models=["fallible:0.3"], modes=["legacy", "recursive"],
                 repeats=2, workspace=str(REPO))


@pytest.fixture
async def swept() -> tuple[InMemoryTraceStore, pd.DataFrame]:
    store = InMemoryTraceStore()
    await run_sweep(grid(), store)
    return store, await sweep_frame(store, grid(), shape=True)


async def test_the_sweep_frame_gets_the_shape_of_each_cells_tree(swept):
    store, frame = swept
    assert list(frame.columns) == [*FRAME_COLUMNS, *SHAPE_FRAME_COLUMNS] and len(frame) == 16
    direct = (await delegation_shape(store, list(frame["trace_id"]))).set_index("trace_id")
    for row in frame.itertuples(index=False):
        for name in SHAPE_FRAME_COLUMNS:
            expected, got = direct.loc[row.trace_id, name], getattr(row, name)
            assert (math.isnan(expected) and pd.isna(got)) if isinstance(expected, float) and math.isnan(expected) \
                else got == expected, (row.trace_id, name)
    assert (frame["nodes"] == frame["agents"]).all()  # validators are left out of both
    legacy, recursive = frame[frame["mode"] == "legacy"], frame[frame["mode"] == "recursive"]
    lookups = recursive[recursive["task_type"] == "lookup"]
    assert lookups["nodes"].min() >= 2 and (lookups["max_depth"] >= 1).all()
    arithmetic = legacy[legacy["task_type"] == "arithmetic"]
    assert (arithmetic["nodes"] == 1).all() and arithmetic["overcommitted"].all() and arithmetic["root_did_the_work"].all()


async def test_shape_thresholds_are_parameters_and_checked(swept):
    store, frame = swept
    strict = await sweep_frame(store, grid(), shape=True, over_max_nodes=0, chain_min=1)
    assert not strict["overcommitted"].any() and strict["undercommitted"].all()
    with pytest.raises(ConfigurationError, match="chain_min"):
        await sweep_frame(store, grid(), shape=True, chain_min=0)
    with pytest.raises(ConfigurationError, match="shape columns"):
        await with_shape(frame, store)


async def test_cells_without_a_tree_get_missing_shape_values(swept):
    frame = await sweep_frame(InMemoryTraceStore(), grid(), shape=True)
    assert frame["nodes"].isna().all() and frame["overcommitted"].isna().all()
    assert str(frame["nodes"].dtype) == "Int64" and str(frame["overcommitted"].dtype) == "boolean"
    store, shaped = swept  # an attempt that raised before its root was written: its row only goes without
    plain = shaped[list(FRAME_COLUMNS)].copy()
    plain.loc[3, "trace_id"] = "00000000-0000-4000-8000-000000000000"
    again = await with_shape(plain, store)
    assert again["nodes"].isna().tolist() == [i == 3 for i in range(len(again))]
    assert again.drop(index=3)["nodes"].tolist() == shaped.drop(index=3)["nodes"].tolist()


def test_wilson_interval_matches_the_textbook_values():
    low, high = wilson_interval(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    low, high = wilson_interval(0, 10)
    assert round(low, 12) == 0.0 and round(high, 4) == 0.2775
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    with pytest.raises(ConfigurationError, match="confidence"):
        wilson_interval(1, 2, confidence=1.5)


def test_the_report_counts_each_group_and_gives_its_interval():
    frame = pd.DataFrame({
        "mode": ["legacy"] * 10 + ["recursive"] * 11,
        "model": ["m"] * 21,
        "passed": [True] * 8 + [False] * 2 + [True] * 10 + [None],
        "cost": [1.0] * 10 + [3.0] * 11, "tokens": [100] * 10 + [300] * 11, "llm_calls": [1] * 10 + [5] * 11,
        "agents": [1] * 10 + [4] * 11,
    })
    report = delegation_report(frame)
    assert list(report.columns) == ["mode", "model", *REPORT_COLUMNS]
    legacy, recursive = report.set_index("mode").loc["legacy"], report.set_index("mode").loc["recursive"]
    assert (legacy["runs"], legacy["judged"], legacy["successes"], legacy["success_rate"]) == (10, 10, 8, 0.8)
    assert (round(legacy["ci_low"], 4), round(legacy["ci_high"], 4)) == (0.4902, 0.9433)
    assert (recursive["runs"], recursive["judged"], recursive["successes"]) == (11, 10, 10)
    assert legacy["cost_per_success"] == 10.0 / 8 and recursive["cost_per_success"] == 33.0 / 10
    assert recursive["agents_mean"] == 4.0 and recursive["llm_calls_mean"] == 5.0
    with pytest.raises(ConfigurationError, match="not in the frame"):
        delegation_report(frame, by=["provider"])
    perfect = pd.DataFrame({"mode": ["recursive"] * 48, "model": ["m"] * 48, "passed": [True] * 48, "cost": [1.0] * 48,
                            "tokens": [1] * 48, "llm_calls": [1] * 48, "agents": [1] * 48})
    [axes] = plot_success_vs_cost(perfect).axes  # 48 of 48: the upper bound rounds just below 1.0, still drawn
    assert [c.lines[0].get_ydata()[0] for c in axes.containers] == [1.0]


async def test_the_report_of_a_sweep_has_shape_and_a_chart(swept):
    _, frame = swept
    report = delegation_report(frame)
    assert set(report["mode"]) == {"legacy", "recursive"} and report["runs"].sum() == 16
    assert {"nodes_mean", "max_depth_mean", "own_share_mean", "overcommitted_rate", "undercommitted_rate",
            "delegated_without_work_rate", "root_did_the_work_rate"} <= set(report.columns)
    by_mode = report.set_index("mode")
    assert by_mode.loc["recursive", "nodes_mean"] > by_mode.loc["legacy", "nodes_mean"]
    assert by_mode.loc["legacy", "successes"] == frame[frame["mode"] == "legacy"]["passed"].sum()
    figure = plot_success_vs_cost(frame)
    [axes] = figure.axes
    points = sorted((c.lines[0].get_xdata()[0], c.lines[0].get_ydata()[0]) for c in axes.containers)
    assert points == sorted(zip(report["cost_mean"], report["success_rate"]))


async def test_native_runs_frame_agrees_with_the_sweep_frame(swept):
    store, frame = swept
    runs = await runs_frame(store, list(frame["trace_id"]))
    assert list(runs.columns) == [*RUN_COLUMNS, *SHAPE_FRAME_COLUMNS]
    columns = ["runs", "judged", "successes", "success_rate", "cost_mean", "nodes_mean", "overcommitted_rate"]
    assert delegation_report(runs, ["mode", "model"])[columns].equals(delegation_report(frame)[columns])


async def test_imported_runs_are_reported_grouped_by_a_column():
    store = InMemoryTraceStore()
    summary = await import_runs([REDEL], store, source="redel")
    runs = await runs_frame(store, summary.roots)
    assert set(runs["source"]) == {"redel"} and runs["passed"].isna().all()
    direct = (await delegation_shape(store, summary.roots)).set_index("trace_id")
    assert list(runs.set_index("trace_id").loc[direct.index, "nodes"]) == list(direct["nodes"])
    runs["size"] = ["big" if n > 3 else "small" for n in runs["nodes"]]
    report = delegation_report(runs, by="size")
    assert report["runs"].sum() == len(summary.roots) and (report["judged"] == 0).all()
    assert report["success_rate"].isna().all()  # ReDel records no scores: no rate is made up
    sizes = runs.groupby("size")["nodes"].mean()
    assert dict(zip(report["size"], report["nodes_mean"])) == sizes.to_dict()
