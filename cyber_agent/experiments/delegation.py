"""Does delegation pay? Success with a confidence interval, cost and delegation shape per group of runs.

`delegation_report(frame, by=("mode", "model"))` reads any frame of one row per run — a sweep
frame (`cyber_agent/experiments/frame.py:sweep_frame`, best with `shape=True`) or the frame of
imported or native runs that `runs_frame` builds from a store — and gives one row per group:
how many runs were judged, how many passed, the success rate with its Wilson score interval,
cost, tokens, calls and agents per run, and the delegation shape (means and rates of
`cyber_agent/experiments/frame.py:SHAPE_FRAME_COLUMNS`) when the frame has it.
`plot_success_vs_cost` draws the groups at (cost per run, success rate) with the interval as
error bars. Every number is computed from the frame; nothing is read twice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from cyber_agent.analysis.shape import Work, check_thresholds, shape_of
from cyber_agent.analysis.tree import trees_from_records
from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments.frame import SHAPE_FRAME_COLUMNS, shape_dtypes
from cyber_agent.trace.protocols import TraceReader

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["REPORT_COLUMNS", "RUN_COLUMNS", "delegation_report", "plot_success_vs_cost", "runs_frame", "wilson_interval"]

REPORT_COLUMNS: tuple[str, ...] = (
    "runs", "judged", "successes", "success_rate", "ci_low", "ci_high", "cost_mean", "cost_total", "cost_per_success",
    "tokens_mean", "llm_calls_mean", "agents_mean",
)
"""Columns of `delegation_report` after the group keys (the shape columns follow when the frame has them)."""
_SHAPE_MEANS = ("nodes", "max_depth", "max_fanout", "mean_fanout", "longest_chain", "own_share")
_SHAPE_RATES = ("overcommitted", "undercommitted", "delegated_without_work", "root_did_the_work")
RUN_COLUMNS: tuple[str, ...] = (
    "trace_id", "source", "name", "task", "model", "mode", "status", "verdict", "passed", "tokens", "cost",
    "llm_calls", "agents", "duration_s",
)
"""Columns of `runs_frame` before the shape columns (docs/experiments.md describes each)."""


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a success rate `successes / n` (NaN, NaN when n is 0)."""
    if not 0.0 < confidence < 1.0:
        raise ConfigurationError("confidence", f"must be between 0 and 1 (exclusive), got {confidence!r}")
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ConfigurationError("successes", f"must be between 0 and n={n}, got {successes!r}")
    if n == 0:
        return (math.nan, math.nan)
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def _success(frame: pd.DataFrame) -> pd.Series:
    """1.0 / 0.0 per judged run, NaN per unjudged one: `passed` when the frame has it, else a score of 1."""
    import pandas as pd

    if "passed" in frame.columns:
        passed = frame["passed"]
        return pd.Series([float(bool(v)) if v is not None and not pd.isna(v) else math.nan for v in passed],
                         index=frame.index, dtype="float64")
    if "score" in frame.columns:
        return (frame["score"].astype("float64") >= 1.0).astype("float64").where(frame["score"].notna())
    raise ConfigurationError("frame", "has neither a passed nor a score column; pass a sweep frame or a runs_frame")


def delegation_report(frame: pd.DataFrame, by: Sequence[str] | str = ("mode", "model"), *,
                      confidence: float = 0.95) -> pd.DataFrame:
    """One row per group of `by`: runs, judged, successes, success rate with its Wilson interval, cost, work, shape.

    A run counts as judged when it has a `passed` value (a sweep cell that was scored, an imported
    run with a score); pending and errored sweep cells are in `runs` only. `cost_per_success` is
    the group's total cost over its successes (inf with none). Shape columns (means of `nodes`,
    `max_depth`, ..., rates of `overcommitted`, ...) appear when the frame has them
    (`sweep_frame(..., shape=True)`, `runs_frame`).
    """
    import numpy as np
    import pandas as pd

    keys = [by] if isinstance(by, str) else list(by)
    missing = [k for k in keys if k not in frame.columns]
    if not keys or missing:
        raise ConfigurationError("by", f"columns {missing or keys} are not in the frame; group by some of "
                                       f"{', '.join(map(str, frame.columns))}")
    if not 0.0 < confidence < 1.0:
        raise ConfigurationError("confidence", f"must be between 0 and 1 (exclusive), got {confidence!r}")
    work = frame.assign(_success=_success(frame))
    for column in ("cost", "tokens", "llm_calls", "agents"):
        if column not in work.columns:
            raise ConfigurationError("frame", f"has no {column} column; pass a sweep frame or a runs_frame")
    grouped = work.groupby(keys, dropna=False, sort=True)
    out = pd.DataFrame({
        "runs": grouped.size(),
        "judged": grouped["_success"].count(),
        "successes": grouped["_success"].sum(),
        "cost_mean": grouped["cost"].mean(), "cost_total": grouped["cost"].sum(),
        "tokens_mean": grouped["tokens"].mean(), "llm_calls_mean": grouped["llm_calls"].mean(),
        "agents_mean": grouped["agents"].mean(),
    })
    out["successes"] = out["successes"].astype("int64")
    n, k = out["judged"].to_numpy(dtype="float64"), out["successes"].to_numpy(dtype="float64")
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        denominator = 1.0 + z * z / n
        centre = (p + z * z / (2 * n)) / denominator
        half = z * np.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / denominator
        out["success_rate"] = p
        out["ci_low"] = np.clip(centre - half, 0.0, 1.0)
        out["ci_high"] = np.clip(centre + half, 0.0, 1.0)
        out["cost_per_success"] = out["cost_total"].to_numpy(dtype="float64") / k
    columns = list(REPORT_COLUMNS)
    for name in _SHAPE_MEANS:
        if name in work.columns:
            out[f"{name}_mean"] = grouped[name].apply(lambda s: s.astype("float64").mean())
            columns.append(f"{name}_mean")
    for name in _SHAPE_RATES:
        if name in work.columns:
            out[f"{name}_rate"] = grouped[name].apply(lambda s: s.dropna().astype("float64").mean())
            columns.append(f"{name}_rate")
    return out[columns].reset_index()


def _label(row: Any, keys: Sequence[str]) -> str:
    return " · ".join(str(row[k]) for k in keys)


def plot_success_vs_cost(frame: pd.DataFrame, by: Sequence[str] | str = ("mode", "model"), *, confidence: float = 0.95,
                         title: str | None = None) -> Figure:
    """One point per group at (mean cost per run, success rate), the Wilson interval as vertical error bars.

    `frame` is a frame of runs (grouped with `delegation_report`) or a report already made.
    """
    from matplotlib.figure import Figure

    keys = [by] if isinstance(by, str) else list(by)
    report = frame if {"success_rate", "ci_low", "ci_high"} <= set(frame.columns) else \
        delegation_report(frame, keys, confidence=confidence)
    figure = Figure(figsize=(6.4, 4.2), layout="constrained")
    axes = figure.add_subplot()
    for _, row in report.iterrows():
        rate = row["success_rate"]
        if math.isnan(rate):
            continue
        below, above = max(0.0, rate - row["ci_low"]), max(0.0, row["ci_high"] - rate)  # rounding at 0 and 1
        axes.errorbar(row["cost_mean"], rate, yerr=[[below], [above]], fmt="o",
                      capsize=4, label=f"{_label(row, keys)} (n={int(row['judged'])})")
    axes.set_xlabel("cost per run (USD)")
    axes.set_ylabel("success rate")
    axes.set_ylim(-0.05, 1.05)
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize="small", loc="best")
    axes.set_title(title or f"Success vs cost (error bars: {confidence:.0%} Wilson interval)")
    return figure


def _root_verdict(meta: dict[str, Any]) -> str | None:
    validations = [v for v in (meta.get("protocol") or {}).get("validations") or () if v.get("scope") == "root"]
    return str(validations[-1]["verdict"]) if validations else None


async def runs_frame(store: TraceReader, roots: Sequence[str], *, shape: bool = True, over_max_nodes: int = 2,
                     chain_min: int = 3, chain_max_children: int = 1, work: Work = "llm_calls") -> pd.DataFrame:
    """One row per root of `roots` (native or imported runs), the input of `delegation_report` outside a sweep.

    Per run: `source` (the importer's, `native` otherwise), name, task, model, `mode` (the root's
    `lineage.mode`), status, the root's latest `root`-scope `verdict` (an imported score, a root
    validator) and `passed` from it (None when unknown or absent), and over the tree: tokens, cost,
    LLM calls (assistant messages) and agents (non-validator traces). A root run by a sweep takes
    its cell's task, model entry, mode, passed and numbers (as `sweep_frame` has them). Group it by any column — one you add too — in `delegation_report`.
    `shape=True` adds the delegation-shape columns (`SHAPE_FRAME_COLUMNS`) with ReDel's thresholds as given,
    from the same read (one `read_records` call for every root).
    """
    import pandas as pd

    if shape:
        check_thresholds(over_max_nodes=over_max_nodes, chain_min=chain_min, chain_max_children=chain_max_children,
                         work=work)
    ids = list(dict.fromkeys(roots))
    records = await store.read_records(ids, messages=True, events=False) if ids else []
    meta = {r.trace_id: r.trace for r in records}
    rows = []
    for tree in trees_from_records(records, ids):
        root = meta[tree.root]
        nodes = list(tree.nodes.values())
        verdict = _root_verdict(root)
        cell = root.get("sweep_cell") or {}
        passed = cell.get("passed") if cell.get("passed") is not None else \
            {"pass": True, "fail": False}.get(verdict or "")
        row: dict[str, Any] = {
            "trace_id": tree.root, "source": (root.get("provenance") or {}).get("source") or "native",
            "name": root.get("name"), "task": root.get("task"), "model": root.get("model"),
            "mode": (root.get("lineage") or {}).get("mode"), "status": root.get("status"), "verdict": verdict,
            "passed": passed, "tokens": sum(n.tokens for n in nodes), "cost": sum(n.cost for n in nodes),
            "llm_calls": sum(n.llm_calls for n in nodes), "agents": sum(1 for n in nodes if n.role != "validator"),
            "duration_s": tree.nodes[tree.root].duration_s,
        }
        if cell:  # a sweep's root: its cell's own numbers, so the frame agrees with the sweep frame
            row.update({"task": cell.get("task_id"), "model": cell.get("model"), "mode": cell.get("mode"),
                        **{k: cell[k] for k in ("tokens", "cost", "llm_calls", "agents", "duration_s") if k in cell}})
        rows.append(row)
        if shape:
            shaped = shape_of(tree, over_max_nodes=over_max_nodes, chain_min=chain_min,
                              chain_max_children=chain_max_children, work=work)
            row.update((name, shaped[name]) for name in SHAPE_FRAME_COLUMNS)
    frame = pd.DataFrame(rows, columns=[*RUN_COLUMNS, *(SHAPE_FRAME_COLUMNS if shape else ())])
    frame["passed"] = frame["passed"].astype("boolean")
    for name in ("tokens", "llm_calls", "agents"):
        frame[name] = frame[name].astype("int64")
    frame["cost"] = frame["cost"].astype("float64")
    return shape_dtypes(frame) if shape else frame
