"""Budget frame (A10 resources), usage per agent and over time, and their charts."""

from __future__ import annotations

import math
import re

from matplotlib.figure import Figure

from cyber_agent.notebook import (
    budget_frame,
    plot_budget,
    plot_usage_by_agent,
    plot_usage_over_time,
    to_frames,
    usage_by_agent,
    usage_over_time,
)
from cyber_agent.notebook.budgets import QUOTAS, RESOURCES

COLUMNS = {"used": "float64", "limit": "float64", "remaining": "float64", "percent": "float64", "unit": "string",
           "refusal": "string"}


def test_legacy_budget_frame_is_usage_without_limits(demo_store, demo_root):
    frame = budget_frame(demo_store, demo_root)
    assert list(frame.index) == [*RESOURCES, *QUOTAS]
    assert {c: str(t) for c, t in frame.dtypes.items()} == COLUMNS
    assert frame["limit"].isna().all() and frame["percent"].isna().all() and frame["refusal"].isna().all()
    frames = to_frames(demo_store, demo_root)
    assert frame.loc["agents", "used"] == 5
    assert frame.loc["llm_calls", "used"] == (frames.messages["message_role"] == "assistant").sum()
    assert frame.loc["tokens", "used"] == frames.traces["total_tokens"].sum()
    assert frame.loc["duration_seconds", "used"] > 0
    assert frame.loc["validation_tool_calls", "used"] == 0
    assert frame.attrs["mode"] == "legacy" and frame.attrs["usage_source"] == "traces"


def test_given_limits_show_what_a_legacy_tree_would_use(demo_store, demo_root):
    frame = budget_frame(demo_store, demo_root, limits={"max_llm_calls": 36, "max_total_agents": 10})
    assert frame.loc["llm_calls", "percent"] == 50.0
    assert frame.loc["agents", "remaining"] == 5
    assert math.isnan(frame.loc["tokens", "limit"])
    assert frame.attrs["limits_source"] == "given" and frame.attrs["enforced"] is False


def test_recursive_budget_reads_limits_and_recorded_usage(recursive_store):
    store, root = recursive_store
    frame = budget_frame(store, root)
    assert frame.loc["llm_calls", "limit"] == 20 and frame.loc["llm_calls", "used"] == 19
    assert frame.loc["llm_calls", "percent"] == 95.0 and frame.loc["llm_calls", "remaining"] == 1
    assert frame.loc["llm_calls", "refusal"] == "llm_calls: used 18 of 18"
    assert frame.loc["tokens", "used"] == 900 and frame.loc["cost_usd", "used"] == 0.25
    assert frame.loc["validation_material_chars", "used"] == 1200
    assert frame.loc["agents", "refusal"] is None or frame["refusal"].isna()["agents"]
    assert frame.attrs["usage_source"] == "resource_usage" and frame.attrs["enforced"] is True
    assert frame.attrs["refusals"] == 1


def test_usage_by_agent_has_one_row_per_trace(recursive_store):
    store, root = recursive_store
    frame = usage_by_agent(store, root)
    assert list(frame.columns[:8]) == ["trace_id", "root_trace_id", "parent_trace_id", "depth", "role", "label", "status", "llm_calls"]
    assert list(frame["role"]) == ["main", "delegate", "validator"]
    assert list(frame["depth"]) == [0, 1, 2]
    assert list(frame["llm_calls"]) == [1, 1, 1]
    assert list(frame["total_tokens"]) == [15, 15, 15]


def test_usage_over_time_is_cumulative(demo_store, demo_root):
    series = usage_over_time(demo_store, demo_root)
    assert series["time"].is_monotonic_increasing
    assert list(series["cumulative_llm_calls"]) == list(range(1, len(series) + 1))
    assert series["cumulative_tokens"].is_monotonic_increasing and series["cumulative_agents"].is_monotonic_increasing
    assert series["cumulative_agents"].iloc[0] == 1 and series["cumulative_agents"].iloc[-1] == 5
    assert series["cumulative_tokens"].iloc[-1] == series["total_tokens"].sum()
    assert str(series["time"].dtype) == "datetime64[ns, UTC]"


def test_charts_are_figures(demo_store, demo_root, recursive_store):
    store, root = recursive_store
    figures = [plot_budget(demo_store, demo_root), plot_budget(store, root), plot_budget(budget_frame(store, root)),
               plot_usage_by_agent(demo_store, demo_root), plot_usage_over_time(demo_store, demo_root)]
    assert all(isinstance(f, Figure) and f.axes for f in figures)
    titles = [f.axes[0].get_title(loc="left") for f in figures]
    assert "no limits: usage vs the default recursive budget (what-if)" in titles[0]
    assert "used vs limit" in titles[1]


def test_the_budget_table_reads_in_units_with_the_refusal_and_the_stop_reason(recursive_store, demo_store, demo_root):
    from cyber_agent.notebook import budget_table

    store, root = recursive_store
    table = budget_table(store, root)
    text = table.to_text()
    assert re.search(r"^llm calls +19 +20 +1 +95\.0%  llm_calls: used 18 of 18$", text, re.M)
    assert "$0.2500" in text and "600.0 s" in text and "e+0" not in text and "<NA>" not in text
    assert "last refusal: llm_calls: used 18 of 18" in text
    assert "<caption" in table.to_html() and "95.0%" in table.to_html()
    legacy = budget_table(budget_frame(demo_store, demo_root)).to_text()
    assert legacy.splitlines()[0] == "Tree budget (legacy, no limits, usage from traces)"
    assert re.search(r"^agents +5 +— +— +—$", legacy, re.M)


def test_plot_budget_labels_stay_inside_the_figure_and_a_legacy_tree_gets_a_what_if(recursive_store, demo_store, demo_root):
    store, root = recursive_store
    fig = plot_budget(store, root)  # llm_calls at 95%: its label sits inside its bar
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    width = fig.bbox.width
    labels = [t for t in fig.axes[0].texts if "of" in t.get_text()]
    assert labels and all(t.get_window_extent(renderer).x1 <= width for t in labels)
    legacy = plot_budget(demo_store, demo_root)
    assert not [p for p in legacy.axes[0].patches if p.get_hatch()]  # no "no limit" bars: every row has a default
    assert len([t for t in legacy.axes[0].texts if " of " in t.get_text()]) == 8
    assert any("of 150" in t.get_text() for t in legacy.axes[0].texts)  # llm calls vs the default 150
