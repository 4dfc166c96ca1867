"""Charts of a sweep: score against cost per group, and one metric per group, with error bars across repeats.

Both take a `sweep_frame` (or a `SweepReport.frame()`), draw on a new
`matplotlib.figure.Figure` (no pyplot state, so a notebook shows it once) and return it.
Error bars are one standard deviation of the per-repeat means (`summarize`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments.frame import summarize

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["plot_metric", "plot_score_vs_cost"]

_METRICS = {"score": "accuracy (mean score)", "cost": "cost per cell (USD)", "tokens": "tokens per cell",
            "llm_calls": "LLM calls per cell"}


def _label(row: pd.Series, by: Sequence[str]) -> str:
    return " · ".join(str(row[k]) for k in by)


def plot_score_vs_cost(frame: pd.DataFrame, by: Sequence[str] = ("mode", "model"), *, title: str | None = None) -> Figure:
    """One point per group at (mean cost per cell, mean score), with error bars across repeats."""
    from matplotlib.figure import Figure

    summary = summarize(frame, by)
    figure = Figure(figsize=(6.4, 4.2), layout="constrained")
    axes = figure.add_subplot()
    for _, row in summary.iterrows():
        axes.errorbar(row["cost_mean"], row["score_mean"], xerr=row["cost_std"], yerr=row["score_std"], fmt="o",
                      capsize=4, label=_label(row, by))
    axes.set_xlabel(_METRICS["cost"])
    axes.set_ylabel(_METRICS["score"])
    axes.set_ylim(-0.05, 1.05)
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small", loc="best")
    axes.set_title(title or "Score vs cost (error bars: 1 s.d. across repeats)")
    return figure


def plot_metric(frame: pd.DataFrame, metric: str = "score", by: str = "mode", hue: str | None = "model", *,
                title: str | None = None) -> Figure:
    """Bars of a metric's mean per `by` value, one bar per `hue` value, with error bars across repeats."""
    from matplotlib.figure import Figure

    if metric not in _METRICS:
        raise ConfigurationError("metric", f"unknown metric {metric!r}; use one of {', '.join(_METRICS)}")
    keys = [by] + ([hue] if hue else [])
    summary = summarize(frame, keys)
    column = f"{metric}_mean"
    spread = summary[f"{metric}_std"] if f"{metric}_std" in summary else None
    groups = list(dict.fromkeys(summary[by]))
    hues = list(dict.fromkeys(summary[hue])) if hue else [None]
    width = 0.8 / len(hues)
    figure = Figure(figsize=(6.4, 4.2), layout="constrained")
    axes = figure.add_subplot()
    for h_index, value in enumerate(hues):
        part = summary if value is None else summary[summary[hue] == value]
        positions = [groups.index(g) + (h_index - (len(hues) - 1) / 2) * width for g in part[by]]
        errors = spread.loc[part.index] if spread is not None else None
        axes.bar(positions, part[column], width=width, yerr=errors, capsize=4, label=None if value is None else str(value))
    axes.set_xticks(range(len(groups)), [str(g) for g in groups])
    axes.set_xlabel(by)
    axes.set_ylabel(_METRICS[metric])
    if metric == "score":
        axes.set_ylim(0, 1.05)
    if hue:
        axes.legend(fontsize="small", title=hue)
    axes.grid(axis="y", alpha=0.3)
    axes.set_title(title or f"{_METRICS[metric]} by {by}")
    return figure
