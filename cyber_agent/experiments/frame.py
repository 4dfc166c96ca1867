"""A sweep as pandas and charts: one row per cell (`sweep_frame`), per-group means with their spread across
repeats (`summarize`), and two charts of those (`plot_score_vs_cost`, `plot_metric`).

`sweep_frame(..., shape=True)` (or `with_shape` on a frame already read) adds the delegation shape of
each cell's tree (`cyber_agent/analysis/shape.py:shape_of`): one column per `SHAPE_FRAME_COLUMNS`.

The charts draw on a new `matplotlib.figure.Figure` (no pyplot state, so a notebook shows each
once) and return it; their error bars are one standard deviation of the per-repeat means.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cyber_agent.analysis.shape import SHAPE_COLUMNS, Work, check_thresholds, delegation_shape
from cyber_agent.errors import ConfigurationError, TraceNotFoundError
from cyber_agent.experiments.grid import Sweep
from cyber_agent.experiments.ledger import CellStatus, read_ledger
from cyber_agent.trace.protocols import TraceReader

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = [
    "FRAME_COLUMNS",
    "SHAPE_FRAME_COLUMNS",
    "frame_of",
    "plot_metric",
    "plot_score_vs_cost",
    "shape_dtypes",
    "summarize",
    "sweep_frame",
    "sweep_roots",
    "with_shape",
]

FRAME_COLUMNS = (
    "key", "task", "task_type", "model", "mode", "config", "repeat", "seed", "status", "score", "passed", "answer",
    "tokens", "cost", "llm_calls", "agents", "duration_s", "errors", "trace_id", "scorer", "explanation",
)
"""Columns of `sweep_frame`, in order (docs/experiments.md describes each)."""
SHAPE_FRAME_COLUMNS: tuple[str, ...] = tuple(c for c in SHAPE_COLUMNS if c != "trace_id")
"""Columns `with_shape` adds after `FRAME_COLUMNS` (docs/compare.md describes each)."""
_SHAPE_INTS = ("nodes", "max_depth", "parents", "max_fanout", "longest_chain", "own_calls", "subtree_calls", "own_tokens",
               "subtree_tokens", "idle_delegators")
_SHAPE_BOOLS = ("overcommitted", "undercommitted", "delegated_without_work", "root_did_the_work")


def frame_of(sweep: Sweep, statuses: Sequence[CellStatus]) -> pd.DataFrame:
    """The frame of cells whose status is already read (a `SweepReport` uses it)."""
    import pandas as pd

    rows = []
    for status in statuses:
        cell, record = status.cell, status.record if status.done else None
        if status.done:
            state = record.run_status if record is not None and record.run_status else "completed"
        else:
            state = "error" if status.exhausted(sweep.max_retries) else "pending"
        shown = record or (status.record if state == "error" else None)
        rows.append({
            "key": cell.key, "task": cell.task.id, "task_type": cell.task.type, "model": cell.model.name, "mode": cell.mode,
            "config": cell.config, "repeat": cell.repeat, "seed": cell.seed, "status": state,
            "score": record.score if record else None, "passed": record.passed if record else None,
            "answer": record.answer if record else None,
            "tokens": record.tokens if record else 0, "cost": record.cost if record else 0.0,
            "llm_calls": record.llm_calls if record else 0, "agents": record.agents if record else 0,
            "duration_s": record.duration_s if record else None, "errors": status.errors,
            "trace_id": cell.trace_id(shown.attempt) if shown is not None else None,
            "scorer": record.scorer if record else None,
            "explanation": (record.explanation if record else (shown.error if shown else "")) or "",
        })
    frame = pd.DataFrame(rows, columns=list(FRAME_COLUMNS))
    for column in ("score",):
        frame[column] = frame[column].astype("float64")
    return frame


async def sweep_frame(store: TraceReader, sweep: Sweep, *, shape: bool = False, over_max_nodes: int = 2,
                      chain_min: int = 3, chain_max_children: int = 1, work: Work = "llm_calls") -> pd.DataFrame:
    """One row per cell of `sweep` as the store holds it: finished, errored (`status="error"`) or `pending`.

    Reading never changes the store. `duration_s` and `trace_id` belong to the attempt that
    ran; every other column of a finished cell is a function of the cell and its seed when the
    model is deterministic. `shape=True` adds the delegation-shape columns (`with_shape`, with
    ReDel's thresholds as given).
    """
    frame = frame_of(sweep, await read_ledger(store, sweep))
    if shape:
        frame = await with_shape(frame, store, over_max_nodes=over_max_nodes, chain_min=chain_min,
                                 chain_max_children=chain_max_children, work=work)
    return frame


async def with_shape(frame: pd.DataFrame, store: TraceReader, *, over_max_nodes: int = 2, chain_min: int = 3,
                     chain_max_children: int = 1, work: Work = "llm_calls") -> pd.DataFrame:
    """`frame` (one row per run, with `trace_id`) plus the delegation shape of each run's tree, `SHAPE_FRAME_COLUMNS`.

    The thresholds are ReDel's (`cyber_agent/analysis/shape.py:delegation_shape`); a row without a
    tree in `store` (a pending cell, a root the store lacks) gets <NA> in every shape column.
    All trees are read in one `read_records` call.
    """
    import pandas as pd

    if "trace_id" not in frame.columns:
        raise ConfigurationError("frame", "has no trace_id column; pass a sweep frame (or any frame of root trace ids)")
    check_thresholds(over_max_nodes=over_max_nodes, chain_min=chain_min, chain_max_children=chain_max_children, work=work)
    clashing = [c for c in SHAPE_FRAME_COLUMNS if c in frame.columns]
    if clashing:
        raise ConfigurationError("frame", f"already has shape columns {clashing}; drop them or use the frame as it is")
    roots = [t for t in dict.fromkeys(frame["trace_id"]) if isinstance(t, str) and t]

    async def shapes(ids: list[str]) -> pd.DataFrame:
        if not ids:
            return pd.DataFrame(columns=list(SHAPE_COLUMNS))
        return await delegation_shape(store, ids, over_max_nodes=over_max_nodes, chain_min=chain_min,
                                      chain_max_children=chain_max_children, work=work)

    try:
        shape = await shapes(roots)
    except TraceNotFoundError:  # an errored attempt that never created its root: leave such rows out
        shape = await shapes([t for t in roots if await store.get_trace(t) is not None])
    return shape_dtypes(frame.merge(shape, on="trace_id", how="left"))


def shape_dtypes(frame: pd.DataFrame) -> pd.DataFrame:
    """Give the shape columns of `frame` their nullable dtypes (Int64, boolean, float64) in place; return it."""
    for name in _SHAPE_INTS:
        frame[name] = frame[name].astype("Int64")
    for name in _SHAPE_BOOLS:
        frame[name] = frame[name].astype("boolean")
    for name in ("mean_fanout", "own_share"):
        frame[name] = frame[name].astype("float64")
    return frame


async def sweep_roots(store: TraceReader, sweep: Sweep) -> list[str]:
    """Root trace ids of the sweep's finished cells, in grid order (give them to `to_frames`)."""
    statuses = await read_ledger(store, sweep)
    return [s.cell.trace_id(s.record.attempt) for s in statuses if s.done and s.record is not None]


def summarize(frame: pd.DataFrame, by: Sequence[str] = ("mode", "model")) -> pd.DataFrame:
    """Per group: mean score (accuracy) and mean cost per cell, each with its spread across repeats.

    Each repeat's mean over the group's scored cells is one sample; `*_mean` is the mean of
    those samples and `*_std` their standard deviation (0 with one repeat). `cells` counts the
    scored cells, `unfinished` the pending and errored ones (they carry no score).
    """
    import pandas as pd

    keys = list(by)
    scored = frame[~frame["status"].isin(["pending", "error"])]
    per_repeat = scored.groupby([*keys, "repeat"], dropna=False).agg(
        score=("score", "mean"), cost=("cost", "mean"), tokens=("tokens", "mean"), llm_calls=("llm_calls", "mean"))
    grouped = per_repeat.groupby(level=keys, dropna=False)
    summary = pd.DataFrame({
        "score_mean": grouped["score"].mean(), "score_std": grouped["score"].std(ddof=1).fillna(0.0),
        "cost_mean": grouped["cost"].mean(), "cost_std": grouped["cost"].std(ddof=1).fillna(0.0),
        "tokens_mean": grouped["tokens"].mean(), "llm_calls_mean": grouped["llm_calls"].mean(),
        "repeats": grouped.size(),
    })
    summary["cells"] = scored.groupby(keys, dropna=False).size()
    unfinished = frame[frame["status"].isin(["pending", "error"])].groupby(keys, dropna=False).size()
    summary["unfinished"] = unfinished.reindex(summary.index, fill_value=0).astype(int)
    return summary.reset_index()


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
