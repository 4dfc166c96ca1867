"""The usage charts stay readable on big trees: top-N plus "others", named by path, two panels over time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.patches import Rectangle

from cyber_agent.notebook import plot_usage_by_agent, plot_usage_over_time, to_frames, usage_by_agent

from nb_helpers import REPO

EXPORT = REPO / "data" / "exports" / "recursive_demo.jsonl"


def usage_frame(n: int) -> pd.DataFrame:
    """A usage frame of `n` traces: a root, ten delegates, explore agents under them."""
    ids = ["r"] + [f"d{i}" for i in range(10)] + [f"e{i}" for i in range(n - 11)]
    parents = [None] + ["r"] * 10 + [f"d{i % 10}" for i in range(n - 11)]
    tokens = np.arange(n, dtype="int64") * 10 + 100
    return pd.DataFrame({
        "trace_id": ids, "parent_trace_id": parents, "depth": [0] + [1] * 10 + [2] * (n - 11),
        "role": ["main"] + ["delegate"] * 10 + ["explore"] * (n - 11), "label": ids,
        "llm_calls": pd.array([3] * n, dtype="Int64"), "total_prompt_tokens": tokens - 50,
        "total_completion_tokens": np.full(n, 50), "total_tokens": tokens, "total_cost": np.full(n, 0.001),
    })


def _bars(fig) -> list[Rectangle]:
    return [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]


def test_eight_hundred_agents_give_the_top_ones_and_one_others_bar():
    frame = usage_frame(794)
    fig = plot_usage_by_agent(frame)
    names = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(names) == 26 and names[-1] == "others (769 agents)"
    assert fig.get_size_inches()[1] < 10  # not 18,000 pixels
    bars = _bars(fig)
    kept_rows = frame.nlargest(25, "total_tokens")
    drawn = sum(bar.get_width() for bar in bars if bar.get_facecolor()[:3] != (1.0, 1.0, 1.0))
    widest = float(kept_rows["total_tokens"].max())
    # The 25 bars at full length; the others bar (31 times the widest) cut at 1.4 times the widest, so they stay readable.
    assert drawn == pytest.approx(float(kept_rows["total_tokens"].sum()) + 1.4 * widest)
    others = float(frame["total_tokens"].sum() - kept_rows["total_tokens"].sum())
    assert any(t.get_text().startswith(f"{others / 1e6:.1f}M tokens (bar cut)") for t in fig.axes[0].texts)
    kept = names[:-1]  # the 25 biggest (the last traces, e758 … e782), in frame order
    assert [name.strip("\u2007") for name in kept] == [f"{i % 10 + 1}.{i // 10 + 1} explore" for i in range(758, 783)]
    assert "25 biggest of 794 agents" in fig.axes[0].get_title(loc="left")


def test_rows_are_named_by_path_and_indented_by_depth():
    fig = plot_usage_by_agent(usage_frame(20), top=30)
    ticks = fig.axes[0].get_yticklabels()
    names = [t.get_text() for t in ticks]
    assert names[:3] == ["main", "\u2007\u20071 delegate", "\u2007\u20072 delegate"]
    assert names[11] == "\u2007\u2007\u2007\u20071.1 explore"
    assert all(t.get_horizontalalignment() == "left" for t in ticks)  # so the indentation is visible


def test_from_a_store_rows_say_what_each_agent_handled():
    (root,) = to_frames(EXPORT, messages=False).roots
    names = [t.get_text().strip("\u2007") for t in plot_usage_by_agent(EXPORT, root).axes[0].get_yticklabels()]
    assert "1.1 explore · region East" in names and "1.1.v1 validator · ✗ fail · 0/1 criteria" in names
    assert len(names) == len(usage_by_agent(EXPORT, root))  # 16 agents: all drawn, no "others"


def test_top_must_be_positive():
    with pytest.raises(ValueError, match="top must be at least 1, got 0"):
        plot_usage_by_agent(usage_frame(20), top=0)


def test_usage_over_time_has_two_panels_and_no_twin_axis():
    (root,) = to_frames(EXPORT, messages=False).roots
    fig = plot_usage_over_time(EXPORT, root)
    tokens_ax, counts_ax = fig.axes
    assert [line.get_label() for line in tokens_ax.get_lines()] == ["tokens"]
    assert [line.get_label() for line in counts_ax.get_lines()] == ["LLM calls", "agents"]
    assert tokens_ax.get_shared_x_axes().joined(tokens_ax, counts_ax)


def test_validators_are_counted_apart_from_agents():
    frame = usage_frame(100)
    frame.loc[frame.index[-40:], "role"] = "validator"
    fig = plot_usage_by_agent(frame, top=10)
    title = fig.axes[0].get_title(loc="left")
    assert title.startswith("Usage by trace · the 10 biggest of 100 traces, tree order\n100 traces = 60 agents + 40 validators")
    others = [t.get_text() for t in fig.axes[0].get_yticklabels()][-1]
    assert others == "others (90 traces)" and "others: 60 agents + 30 validators" in title
