"""Budgets and usage of a task tree as pandas frames and charts (SPEC J3, A10).

`budget_frame` has one row per A10 resource, and one for the child quota: used, limit,
remaining, percent and the refusal that hit it. Recursive roots carry their limits in
`Trace.root_setup.resource_budget` and their live usage in `resource_usage.json`; legacy trees
have no limits (limit NaN) and their usage is computed from the traces themselves.
`usage_by_agent` and `usage_over_time` break usage down per trace and over time. Charts return
`matplotlib.figure.Figure`s.

"Agents" means one thing everywhere (the progress widget too): the root and its sub-agents,
every trace that is not a validator — what the A10 budget counts (`AGENTS_DEFINITION`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, UTC
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from cyber_agent.protocol.mode import MAX_CHILDREN_PER_PARENT
from cyber_agent.notebook.budget_table import BudgetFrame
from cyber_agent.notebook.frames import TraceFrames, to_frames
from cyber_agent.notebook.records import StoreSource, parse_time
from cyber_agent.notebook.tree_labels import trace_texts
from cyber_agent.notebook.usage_charts import DEFAULT_TOP, agent_names, usage_by_agent_figure, usage_over_time_figure

__all__ = [
    "AGENTS_DEFINITION",
    "QUOTAS",
    "RESOURCES",
    "budget_frame",
    "plot_budget",
    "plot_usage_by_agent",
    "plot_usage_over_time",
    "usage_by_agent",
    "usage_over_time",
]

# resource -> (limit key in `Trace.root_setup.resource_budget`, unit)
RESOURCES: dict[str, tuple[str, str]] = {
    "agents": ("max_total_agents", "agents"),
    "llm_calls": ("max_llm_calls", "calls"),
    "tokens": ("max_total_tokens", "tokens"),
    "cost_usd": ("max_total_cost_usd", "USD"),
    "duration_seconds": ("max_duration_seconds", "s"),
    "validation_tool_calls": ("max_validation_tool_calls", "calls"),
    "validation_material_chars": ("max_validation_material_chars", "chars"),
}
"""The A10 resources, their limit keys and units, in display order."""

QUOTAS: dict[str, str] = {"children": "children"}
"""Limits outside the tree budget, after the A10 rows: `children` is the most direct children any one
agent created, against the recursive child quota (`MAX_CHILDREN_PER_PARENT`; legacy has none)."""

AGENTS_DEFINITION = "the root and its sub-agents: every trace of the tree that is not a validator (as A10 counts them)"
"""What "agents" counts in `budget_frame`, `usage_over_time` and `ProgressSnapshot`."""


def _tree(source: StoreSource | TraceFrames, root_trace_id: str, *, messages: bool = True) -> TraceFrames:
    return to_frames(source, [root_trace_id], messages=messages, events=False).tree(root_trace_id)


def _computed_usage(frames: TraceFrames, now: datetime) -> dict[str, float]:
    traces = frames.traces
    agents = traces[~traces["is_validator"]]
    end = traces["completed_at"].fillna(traces["updated_at"])
    root = traces.iloc[0]
    finished = root["status"] != "running"
    stop = end.max() if finished else pd.Timestamp(now)
    return {
        "agents": float(len(agents)),
        "llm_calls": float((frames.messages["message_role"] == "assistant").sum()),
        "tokens": float(traces["total_tokens"].sum()),
        "cost_usd": float(traces["total_cost"].sum()),
        "duration_seconds": float((stop - root["created_at"]).total_seconds()) if pd.notna(stop) else np.nan,
        "validation_tool_calls": 0.0,
        "validation_material_chars": 0.0,
    }


def _recorded_usage(record: dict[str, Any], running: bool, now: datetime) -> dict[str, float]:
    started = parse_time(record.get("started_at"))
    stop = now if running else parse_time(record.get("updated_at") or record.get("started_at"))
    return {
        "agents": float(record.get("agents", 0)),
        "llm_calls": float(record.get("llm_calls", 0)),
        "tokens": float(record.get("total_tokens", 0)),
        "cost_usd": float(record.get("cost_usd", 0.0)),
        "duration_seconds": (stop - started).total_seconds(),
        "validation_tool_calls": float(record.get("validation_tool_calls", 0)),
        "validation_material_chars": float(record.get("validation_material_chars", 0)),
    }


def budget_frame(
    source: StoreSource | TraceFrames, root_trace_id: str, *, limits: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> BudgetFrame:
    """One row per A10 resource of the tree, then the child quota: used, limit, remaining, percent, unit, refusal.

    A `BudgetFrame`: a DataFrame that displays formatted (counts as integers, percent used,
    refused rows marked); its data stay floats (NaN: no limit).

    `refusal` is the last refusal that names the row's limit: the budget's own record, or a
    refused tool call (a child quota, a batch the budget refused). `attrs["stop_reason"]` is why
    the root did not complete and `attrs["refusal"]` the tree's last refusal of any kind.
    `limits` (keys of `Trace.root_setup.resource_budget`, e.g. `ResourceBudget().model_dump()`) replaces
    the tree's own limits: "what would this legacy run use of a recursive budget?". An imported tree
    (`cyber_agent/importers/`) has `used` NaN for what its source did not record (`attrs["unknown"]`)
    and `attrs["limits_source"] == "unknown"`: the source records no limits, which is not "no limit".
    """
    frames = _tree(source, root_trace_id)
    now = now or datetime.now(UTC)
    root = frames.traces.iloc[0]
    setup = root["root_setup"] if isinstance(root["root_setup"], dict) else {}
    budget = setup.get("resource_budget") if isinstance(setup.get("resource_budget"), dict) else None
    if limits is not None:
        budget = {**(budget or {}), **dict(limits)}
    record = root["resource_usage"] if isinstance(root["resource_usage"], dict) else None
    if record is not None:
        used, source_name = _recorded_usage(record, root["status"] == "running", now), "resource_usage"
    else:
        used, source_name = _computed_usage(frames, now), "traces"
    unknown = _unknown_usage(root)
    for resource in unknown:
        used[resource] = np.nan
    recorded_refusal = str((record or {}).get("last_refusal") or "")
    refused, latest_refusal, refused_calls = _tool_refusals(frames)
    recursive = root["agent_mode"] == "recursive"
    rows = []
    for resource, (key, unit) in RESOURCES.items():
        limit = float(budget[key]) if budget and isinstance(budget.get(key), (int, float)) else np.nan
        refusal = recorded_refusal if recorded_refusal.startswith(f"{resource}:") else refused.get(resource)
        rows.append(_row(resource, used[resource], limit, unit, refusal))
    agents = frames.traces[~frames.traces["is_validator"]]
    children = float(agents["parent_trace_id"].value_counts().max()) if agents["parent_trace_id"].notna().any() else 0.0
    rows.append(_row("children", children, float(MAX_CHILDREN_PER_PARENT) if recursive else np.nan, QUOTAS["children"],
                     refused.get("children")))
    frame = BudgetFrame(pd.DataFrame(rows).astype({
        "resource": "string", "used": "float64", "limit": "float64", "remaining": "float64", "percent": "float64",
        "unit": "string", "refusal": "string",
    }).set_index("resource"))
    last = latest_refusal or recorded_refusal or None
    frame.attrs.update({
        "root_trace_id": root_trace_id, "mode": root["agent_mode"] or "legacy", "usage_source": source_name,
        "enforced": bool(budget.get("enabled", True)) and limits is None if budget else False,
        "limits_source": "given" if limits is not None else "tree" if budget else None,
        "reserved_final_calls": budget.get("reserved_final_calls") if budget else None,
        "refusals": int((record or {}).get("refusals", 0)),
        "refused_calls": refused_calls,
        "status": str(root["status"]),
        "stop_reason": None if root["status"] in ("completed", "running") else (
            root["error_message"] if isinstance(root["error_message"], str) else f"the run ended {root['status']}"),
        "refusal": last,
        "source": str(root["source"]) if isinstance(root["source"], str) else "native",
        "unknown": sorted(unknown),
    })
    if frame.attrs["source"] != "native" and budget is None:
        frame.attrs["limits_source"] = "unknown"  # the source records none: not "no limit"
    return frame


def _unknown_usage(root: pd.Series) -> set[str]:
    """Resources an imported tree's source did not record (NaN `used`, not 0): from `missing`."""
    missing = set(str(root["missing"]).split(",")) if isinstance(root["missing"], str) else set()
    unknown = set()
    if "usage" in missing:
        unknown |= {"tokens", "cost_usd"}
    if "cost" in missing:
        unknown.add("cost_usd")
    if "timestamps" in missing:
        unknown.add("duration_seconds")
    return unknown


def _row(resource: str, value: float, limit: float, unit: str, refusal: str | None) -> dict[str, Any]:
    return {
        "resource": resource, "used": value, "limit": limit,
        "remaining": max(limit - value, 0.0) if not np.isnan(limit) else np.nan,
        "percent": 100.0 * value / limit if not np.isnan(limit) and limit > 0 else np.nan,
        "unit": unit, "refusal": refusal or None,
    }


def _tool_refusals(frames: TraceFrames) -> tuple[dict[str, str], str | None, int]:
    """(limit name -> text of the latest refused tool call naming it, the latest of any kind, how many)."""
    messages = frames.messages
    refused = messages[messages["refused"].notna()].sort_values(["created_at", "trace_id", "sequence"], kind="stable")
    by_limit: dict[str, str] = {}
    latest = None
    for kind, text in zip(refused["refused"], refused["text"]):
        if isinstance(text, str):
            by_limit[str(kind)] = latest = text
    return by_limit, latest, len(refused)


def usage_by_agent(source: StoreSource | TraceFrames, root_trace_id: str) -> pd.DataFrame:
    """One row per trace of the tree: parent, depth, role, status, LLM calls, tokens, cost, flags, duration."""
    return _tree(source, root_trace_id).usage.reset_index(drop=True)


def usage_over_time(source: StoreSource | TraceFrames, root_trace_id: str) -> pd.DataFrame:
    """One row per LLM call of the tree in time order: the call's tokens and cost, then the cumulative counts."""
    frames = _tree(source, root_trace_id)
    calls = frames.messages[frames.messages["message_role"] == "assistant"]
    roles = dict(zip(frames.traces["trace_id"], frames.traces["role"]))
    out = pd.DataFrame({
        "time": calls["created_at"], "trace_id": calls["trace_id"],
        "role": calls["trace_id"].map(roles).astype("string"),
        "total_tokens": calls["total_tokens"], "cost": calls["cost"],
    }).sort_values(["time", "trace_id"], kind="stable").reset_index(drop=True)
    start = frames.traces["created_at"].min()
    out.insert(1, "elapsed_seconds", (out["time"] - start).dt.total_seconds().astype("float64"))
    out["cumulative_llm_calls"] = np.arange(1, len(out) + 1, dtype="int64")
    out["cumulative_tokens"] = out["total_tokens"].cumsum().astype("int64")
    out["cumulative_cost"] = out["cost"].cumsum().astype("float64")
    created = np.sort(frames.traces.loc[~frames.traces["is_validator"], "created_at"].to_numpy())
    out["cumulative_agents"] = np.searchsorted(created, out["time"].to_numpy(), side="right").astype("int64")
    return out


def _fmt(value: float, unit: str) -> str:
    if np.isnan(value):
        return "—"
    if unit == "USD":
        return f"\\${value:,.4f}"  # escaped: a bare $ starts matplotlib mathtext
    if unit == "s":
        return f"{value:,.1f} s"
    return f"{value:,.0f}"


def plot_budget(source: StoreSource | TraceFrames | pd.DataFrame, root_trace_id: str | None = None) -> Figure:
    """One bar per resource as a percentage of its limit, its usage written inside or beside the bar.

    A tree without limits (legacy) is drawn against the default recursive budget, as a what-if
    (`budget_frame(..., limits=ResourceBudget().model_dump())`), so its bars say something.
    """
    frame = source if isinstance(source, pd.DataFrame) else budget_frame(source, _need(root_trace_id))
    headline = _headline(frame)
    if frame["limit"].isna().all():
        frame = _against_default_budget(frame)
        headline = "no limits: usage vs the default recursive budget (what-if)"
    fig = Figure(figsize=(8.0, 0.42 * len(frame) + 1.0))
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.25, right=0.97, top=1 - 0.55 / fig.get_figheight(), bottom=0.45 / fig.get_figheight())
    y = np.arange(len(frame))
    percent = frame["percent"].to_numpy(dtype="float64")
    limited = ~np.isnan(percent)
    shown = np.where(limited, np.minimum(np.nan_to_num(percent), 110.0), 0.0)
    colors = ["#d62728" if p >= 100 else "#ff7f0e" if p >= 80 else "#1f77b4" for p in np.nan_to_num(percent)]
    reserved = _reserved_share(frame)  # (row, % of the limit kept for the root validator) or None
    if reserved is not None:
        row_at, share = reserved
        usable = frame["limit"].iloc[row_at] * (1 - share / 100)
        if frame["used"].iloc[row_at] >= usable:  # the agents' share is spent: that is a full bar, not 60 % blue
            colors[row_at] = "#d62728"
        ax.barh([y[row_at]], share, left=100.0 - share, color="#fff3e0", hatch="xx", edgecolor="#ff9800", linewidth=0,
                zorder=1)
    ax.barh(y[~limited], 100.0, color="#eeeeee", hatch="//", edgecolor="#cccccc", linewidth=0)
    ax.barh(y[limited], shown[limited], color=[c for c, keep in zip(colors, limited) if keep], zorder=2)
    ax.axvline(100.0, color="#333333", ls="--", lw=1)
    for yi, (_, row), has_limit, end in zip(y, frame.iterrows(), limited, shown):
        if has_limit:
            pct = row["percent"]
            text = f"{_fmt(row['used'], row['unit'])} of {_fmt(row['limit'], row['unit'])} ({pct:.1f}%)" if pct < 10 else (
                f"{_fmt(row['used'], row['unit'])} of {_fmt(row['limit'], row['unit'])} ({pct:.0f}%)")
        else:
            text = f"{_fmt(row['used'], row['unit'])} {row['unit'] if row['unit'] not in ('USD', 's') else ''} used · no limit".replace("  ", " ")
        if reserved is not None and yi == y[reserved[0]]:  # the reserved share says what it is, inside its hatching
            ax.text(100.0 - reserved[1] / 2, float(yi), f"{int(frame.attrs['reserved_final_calls'])} reserved for\nthe root validator",
                    va="center", ha="center", fontsize=7, color="#8a4b00", zorder=3,
                    bbox={"facecolor": "#fff3e0", "edgecolor": "none", "pad": 0.5})
        if isinstance(row["refusal"], str):
            text += " · refused"
        if has_limit and end > 55:  # a long bar holds its label: text beyond ~100% would leave the axes
            ax.text(end - 1.5, float(yi), text, va="center", ha="right", fontsize=8, color="white", zorder=3)
        else:
            ax.text(end + 1.5 if has_limit else 1.5, float(yi), text, va="center", fontsize=8, zorder=3)
    ax.set_yticks(y, [str(r).replace("_", " ") for r in frame.index], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, 112)
    ax.tick_params(axis="x", labelsize=7)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("% of limit", fontsize=8)
    ax.set_title(f"Tree budget ({frame.attrs.get('mode', 'legacy')}) — {headline}", fontsize=10, loc="left")
    return fig


def _reserved_share(frame: pd.DataFrame) -> tuple[int, float] | None:
    """Where the calls kept for the root validator go on the chart: (row of llm_calls, % of its limit), or None."""
    reserved = frame.attrs.get("reserved_final_calls")
    if frame.attrs.get("mode") != "recursive" or not isinstance(reserved, int) or reserved <= 0:
        return None
    if "llm_calls" not in frame.index or not frame.loc["llm_calls", "limit"] > 0:
        return None
    return int(frame.index.get_loc("llm_calls")), 100.0 * reserved / float(frame.loc["llm_calls", "limit"])


def _headline(frame: pd.DataFrame) -> str:
    if frame.attrs.get("limits_source") == "given":
        return "what-if: usage vs the given limits"
    return "used vs limit" + ("" if frame.attrs.get("enforced", True) else " (limits not enforced)")


def _against_default_budget(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with the default recursive limits filled in (and the child quota), percent recomputed."""
    from cyber_agent.trace.budget_limits import ResourceBudget

    defaults = ResourceBudget().model_dump()
    limits = {resource: float(defaults[key]) for resource, (key, _) in RESOURCES.items() if key in defaults}
    limits["children"] = float(MAX_CHILDREN_PER_PARENT)
    out = frame.copy()
    out["limit"] = [limits.get(str(r), np.nan) for r in out.index]
    out["remaining"] = (out["limit"] - out["used"]).clip(lower=0.0)
    out["percent"] = 100.0 * out["used"] / out["limit"]
    out.attrs.update(frame.attrs, limits_source="default")
    return out


def plot_usage_by_agent(source: StoreSource | TraceFrames | pd.DataFrame, root_trace_id: str | None = None, *,
                        top: int = DEFAULT_TOP) -> Figure:
    """Stacked prompt/completion tokens of the `top` biggest agents (tree order) and one bar for the others."""
    if isinstance(source, pd.DataFrame):
        return usage_by_agent_figure(source, agent_names(source), top=top)
    frames = _tree(source, _need(root_trace_id))
    frame = frames.usage.reset_index(drop=True)
    return usage_by_agent_figure(frame, agent_names(frame, trace_texts(frames.traces, frames.validations)), top=top)


def plot_usage_over_time(source: StoreSource | TraceFrames | pd.DataFrame, root_trace_id: str | None = None) -> Figure:
    """Cumulative tokens (upper panel), LLM calls and agents (lower panel) against elapsed seconds."""
    frame = source if isinstance(source, pd.DataFrame) else usage_over_time(source, _need(root_trace_id))
    return usage_over_time_figure(frame)


def _need(root_trace_id: str | None) -> str:
    if not root_trace_id:
        from cyber_agent.errors import ConfigurationError

        raise ConfigurationError("root_trace_id", "is required when charting from a store, path or frames")
    return root_trace_id
