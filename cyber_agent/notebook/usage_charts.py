"""The usage charts of `budgets.py`, built to stay readable on big trees.

`usage_by_agent_figure` draws at most `top` traces — the biggest by tokens, kept in tree order —
and one `others (N traces: A agents + V validators)` bar for the rest, so 800 traces give a chart
of 27 rows, not 18,000 pixels; an "others" bar much longer than the rest is cut (a gap, and its
label gives the whole sum), so the bars beside it stay readable. Counts use the one definition
of agents (`cyber_agent/notebook/budgets.py:AGENTS_DEFINITION`): validators are counted apart. Each row is named by its tree path (`cyber_agent/notebook/tree_labels.py:trace_paths`),
its role and, when the traces are known, its title; the names are left-aligned and indented by
depth, so the indentation shows. `usage_over_time_figure` draws tokens and the counts (LLM calls,
agents) in two panels over one time axis instead of two y axes over each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from cyber_agent.notebook.tree_labels import TraceText, trace_paths

__all__ = ["DEFAULT_TOP", "agent_names", "usage_by_agent_figure", "usage_over_time_figure"]

DEFAULT_TOP = 25
"""Agents `plot_usage_by_agent` draws before it folds the rest into one "others" bar."""
_NAME_WIDTH = 44  # characters of a row name
_INDENT = "\u2007\u2007"  # figure spaces: kept by matplotlib, one digit wide


def agent_names(frame: pd.DataFrame, texts: Mapping[str, TraceText] | None = None) -> list[str]:
    """Row names of a usage frame: `path role · title`, indented two figure spaces per level."""
    paths = {trace_id: text.path for trace_id, text in texts.items()} if texts else trace_paths(frame)
    names = []
    for trace_id, role in zip(frame["trace_id"], frame["role"]):
        path = paths.get(trace_id, "?")
        depth = 0 if path == "root" else path.count(".") + 1
        text = texts.get(trace_id) if texts else None
        about = (text.detail(str(role)) if text else "") or ""
        head = str(role) if path == "root" else f"{path} {role}"
        name = f"{head} · {about}" if about else head
        if len(name) > _NAME_WIDTH:
            name = name[: _NAME_WIDTH - 1] + "…"
        names.append(_INDENT * depth + name)
    return names


def _top_rows(frame: pd.DataFrame, names: list[str], top: int) -> tuple[pd.DataFrame, list[str]]:
    """The `top` biggest rows by tokens in frame order, plus one row summing the others."""
    if top < 1:
        raise ValueError(f"top must be at least 1, got {top}")
    frame = frame.reset_index(drop=True)
    if len(frame) <= top + 1:  # an "others" bar for a single agent would hide nothing
        return frame, names
    keep = _kept(frame, top)
    rest = frame.drop(index=keep)
    others = {
        "total_prompt_tokens": rest["total_prompt_tokens"].sum(),
        "total_completion_tokens": rest["total_completion_tokens"].sum(),
        "total_tokens": rest["total_tokens"].sum(), "total_cost": rest["total_cost"].sum(),
        "llm_calls": rest["llm_calls"].sum() if rest["llm_calls"].notna().all() else pd.NA,
    }
    shown = pd.concat([frame.loc[keep, list(others)], pd.DataFrame([others])], ignore_index=True)
    return shown, [names[i] for i in keep] + [f"others ({_count(rest)[0]})"]


def _count(frame: pd.DataFrame) -> tuple[str, str]:
    """(`40 agents` or `1,000 traces`, `600 agents + 400 validators` or ""): validators are not agents (`AGENTS_DEFINITION`)."""
    validators = int((frame["role"] == "validator").sum()) if "role" in frame else 0
    agents = len(frame) - validators
    if not validators:
        return f"{agents:,} agents", ""
    return f"{len(frame):,} traces", f"{agents:,} agents + {validators:,} validators"


def _tokens(value: float) -> str:
    return f"{value / 1e6:.1f}M" if value >= 1e6 else f"{value / 1e3:.0f}k" if value >= 1e4 else f"{value:,.0f}"


def _kept(frame: pd.DataFrame, top: int) -> Any:
    """Positions of the `top` biggest rows by tokens, in frame order."""
    return np.sort(frame["total_tokens"].to_numpy().argsort(kind="stable")[::-1][:top])


def usage_by_agent_figure(frame: pd.DataFrame, names: list[str], *, top: int = DEFAULT_TOP) -> Figure:
    """Stacked prompt/completion tokens per agent (tree order), annotated with LLM calls and cost."""
    shown, labels = _top_rows(frame, names, top)
    height = 0.3 * len(shown) + 1.5
    name_inches = min(max((len(label) for label in labels), default=10) * 8 * 0.6 / 72 + 0.3, 4.0)
    fig = Figure(figsize=(9.0, height))
    fig.subplots_adjust(left=name_inches / 9.0, right=1 - 1.5 / 9.0, top=1 - 0.65 / height, bottom=0.5 / height)
    ax = fig.add_subplot()
    y = np.arange(len(shown))
    folded = len(shown) < len(frame)
    colors = ["#1f77b4"] * len(shown)
    if folded:
        colors[-1] = "#9ecae1"
    prompt = shown["total_prompt_tokens"].to_numpy(dtype="float64")
    completion = shown["total_completion_tokens"].to_numpy(dtype="float64")
    cut = None  # the "others" bar sums hundreds of traces: drawn at full length it squeezes every other bar to a line
    if folded and len(shown) > 1:
        widest = float((prompt[:-1] + completion[:-1]).max())
        if prompt[-1] + completion[-1] > 1.6 * widest > 0:
            cut = 1.4 * widest
            share = prompt[-1] / (prompt[-1] + completion[-1])
            prompt[-1], completion[-1] = cut * share, cut * (1 - share)
    ax.barh(y, prompt, color=colors, label="prompt tokens")
    ax.barh(y, completion, left=prompt, color="#ff7f0e", label="completion tokens")
    if cut is not None:  # a zigzag gap says the bar goes on; its label gives the whole sum
        ax.barh([y[-1]], cut * 0.04, left=cut * 0.9, color="white", zorder=3)
    ax.set_yticks(y, labels, fontsize=8)
    for tick in ax.get_yticklabels():  # left-aligned at the figure's edge, so the depth indentation shows
        tick.set_horizontalalignment("left")
    ax.tick_params(axis="y", pad=(name_inches - 0.1) * 72, length=0)
    ax.invert_yaxis()
    for yi, (_, row), end in zip(y, shown.iterrows(), prompt + completion):
        calls = "?" if pd.isna(row["llm_calls"]) else int(row["llm_calls"])
        text = f"{calls} calls · \\${float(row['total_cost']):.4f}"
        if cut is not None and yi == y[-1]:
            text = f"{_tokens(float(row['total_tokens']))} tokens (bar cut)\n" + text
        ax.annotate(text, (float(end), yi), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=7, annotation_clip=False)
    ax.set_xlabel("tokens", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=7, loc="lower right", frameon=False)
    whole, parts = _count(frame)
    what = f"the {top} biggest of {whole}, tree order" if folded else f"{whole}, tree order"
    if parts:
        rest = _count(frame.reset_index(drop=True).drop(index=_kept(frame, top)))[1] if folded else ""
        what += f"\n{whole} = {parts}" + (f"; others: {rest}" if rest else "")
    axes_inches = 9.0 - 1.5 - name_inches  # the title starts at the figure's left edge, over the names, not at the bars
    ax.set_title(f"Usage by {'trace' if parts else 'agent'} · {what}", fontsize=10, loc="left",
                 x=-(name_inches - 0.1) / axes_inches)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig


def usage_over_time_figure(frame: pd.DataFrame) -> Figure:
    """Cumulative tokens (upper panel), LLM calls and agents (lower panel) against elapsed seconds."""
    fig = Figure(figsize=(8.0, 4.6))
    fig.subplots_adjust(left=0.11, right=0.97, top=0.9, bottom=0.12, hspace=0.12)
    tokens_ax, counts_ax = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    seconds = frame["elapsed_seconds"]
    tokens_ax.step(seconds, frame["cumulative_tokens"], where="post", color="#1f77b4", label="tokens")
    tokens_ax.set_ylabel("tokens", fontsize=8)
    counts_ax.step(seconds, frame["cumulative_llm_calls"], where="post", color="#ff7f0e", label="LLM calls")
    counts_ax.step(seconds, frame["cumulative_agents"], where="post", color="#2ca02c", label="agents")
    counts_ax.set_ylabel("count", fontsize=8)
    counts_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    counts_ax.set_xlabel("seconds since the root started", fontsize=8)
    for ax in (tokens_ax, counts_ax):
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="upper left", frameon=False)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    cost = float(frame["cumulative_cost"].iloc[-1]) if len(frame) else 0.0
    tokens_ax.set_title(f"Usage over time · {len(frame)} LLM calls · \\${cost:.4f}", fontsize=10, loc="left")
    return fig
