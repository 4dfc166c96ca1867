"""Trace and goal trees as networkx graphs and matplotlib figures (SPEC J2).

`trace_graph` / `goal_graph` return a `networkx.DiGraph` (parent -> child, children in
creation order) whose nodes carry status, role, verdict, a unique path and a label
(`tree_labels.py`). `draw_trace_tree` / `draw_goal_tree` return a `matplotlib.figure.Figure`
built without pyplot (so nothing is shown or kept behind the caller's back), folded and sized
to stay readable (`tree_draw.py`, `tree_fit.py`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Hashable
from typing import Any

import networkx as nx
from matplotlib.figure import Figure

from cyber_agent.notebook.frames import TraceFrames, to_frames
from cyber_agent.notebook.records import StoreSource
from cyber_agent.notebook.tree_draw import (
    ROLE_MARKERS,
    STATUS_COLORS,
    VERDICT_COLORS,
    HighlightInput,
    Orientation,
    draw_tree,
    tidy_tree_layout,
)
from cyber_agent.errors import InvalidIdError, TraceNotFoundError
from cyber_agent.notebook.tree_labels import TraceText, trace_texts
from cyber_agent.trace.trace_id import parse_trace_id
from cyber_agent.trace.bulk import gc_paused
from cyber_agent.trace.goal_models import FINAL_GOAL_STATUSES

__all__ = [
    "ROLE_MARKERS",
    "STATUS_COLORS",
    "VERDICT_COLORS",
    "Orientation",
    "draw_goal_tree",
    "draw_trace_tree",
    "draw_tree",
    "goal_graph",
    "tidy_tree_layout",
    "trace_graph",
    "tree_frames",
]

_ENDED_BADLY = ("failed", "stopped")


def _human(value: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:.0f}"


def tree_frames(source: StoreSource | TraceFrames, trace_id: str) -> tuple[TraceFrames, dict[str, TraceText]]:
    """The frames (no messages, no events) of the tree under `trace_id`, and the texts of its traces.

    Paths are those of the whole tree, so a sub-agent drawn on its own keeps the path it has in
    the full drawing and the explorer (`2.3`, not `root`).
    """
    try:
        root: str | None = parse_trace_id(trace_id).root_id
    except InvalidIdError:  # an id made outside T2 (an import, a test): ask the records (below, not chained to this)
        root = None
    if root is None:
        root = str(to_frames(source, [trace_id], messages=False, events=False).traces["root_trace_id"].iloc[0])
    whole: TraceFrames | None
    try:
        if isinstance(source, TraceFrames) and source.roots == [root]:
            whole = source  # already that one tree: selecting it again costs an isin per frame
        else:
            whole = to_frames(source, [root], messages=False, events=False)
    except TraceNotFoundError:  # the root is not in this store or export: the subtree is all there is
        whole = None
    if whole is None:
        root, whole = trace_id, to_frames(source, [trace_id], messages=False, events=False)
    texts = trace_texts(whole.traces.sort_values("position", kind="stable"), whole.validations)
    return (whole if root == trace_id else whole.tree(trace_id)), texts


@gc_paused()  # building thousands of node dicts and rows: young collections would walk the frames each time
def trace_graph(source: StoreSource | TraceFrames, root_trace_id: str) -> nx.DiGraph:
    """Return the tree of traces under `root_trace_id` (agents and validators) as a DiGraph.

    Node attributes: `status`, `role`, `agent_type`, `depth`, `tokens`, `cost`, `messages`, `task`,
    `is_validator`, `unsupported_claims` (claims and report signals its evidence checks failed), and from
    `cyber_agent/notebook/tree_labels.py:trace_texts` the unique `path`, the `title`, the `objective`, the
    `verdict` (and a validator's `checks`); `label` is what a drawing prints.
    """
    frames, texts = tree_frames(source, root_trace_id)
    traces = frames.traces.sort_values("position", kind="stable")
    failed = frames.claims[frames.claims["check_verdict"] == "fail"]
    unsupported = failed.groupby("trace_id").size().to_dict() if len(failed) else {}
    graph = nx.DiGraph(root=root_trace_id)
    for row in traces.itertuples(index=False):
        text = texts[row.trace_id]
        role = str(row.role)
        lines = [text.headline(role), text.detail(role), f"{_human(row.total_tokens)} tok"]
        graph.add_node(
            row.trace_id, status=row.status, role=row.role, agent_type=row.agent_type, depth=int(row.depth),
            tokens=int(row.total_tokens), cost=float(row.total_cost), messages=int(row.total_messages),
            label="\n".join(line for line in lines if line), task=row.task, is_validator=bool(row.is_validator),
            path=text.path, title=text.title, objective=text.objective, verdict=text.verdict, checks=text.checks,
            unsupported_claims=int(unsupported.get(row.trace_id, 0)),
        )
        if row.trace_id != root_trace_id and row.parent_trace_id in graph:
            graph.add_edge(row.parent_trace_id, row.trace_id)
    return graph


@gc_paused()
def goal_graph(source: StoreSource | TraceFrames, trace_id: str, *, sub_traces: bool = False) -> nx.DiGraph:
    """Return a trace's goal tree as a DiGraph (node = goal id); `sub_traces` hangs sub-agents' goals under their goal.

    A goal left open (pending, in progress, ...) by a trace that ended `failed` or `stopped` takes
    that status, so it is drawn as such; `goal_status` keeps what the goal tree says.
    """
    frames, texts = tree_frames(source, trace_id)
    traces = frames.traces.sort_values("position", kind="stable")
    meta = {row.trace_id: row for row in traces.itertuples(index=False)}
    graph = nx.DiGraph(root=trace_id)

    goals_of: dict[str, list[Any]] = {}  # grouped once: a filter per trace costs seconds on big trees
    for goal in frames.goals.sort_values(["trace_id", "position"], kind="stable").itertuples(index=False):
        goals_of.setdefault(goal.trace_id, []).append(goal)

    def add_goals(owner: str, prefix: str, attach_to: str | None) -> None:
        ended = meta[owner].status if owner in meta and meta[owner].status in _ENDED_BADLY else None
        for row in goals_of.get(owner, []):
            node = f"{prefix}{row.goal_id}"
            status = ended if ended and row.status not in FINAL_GOAL_STATUSES else row.status
            graph.add_node(
                node, kind="goal", role="agent_call" if row.type == "agent_call" else "goal", status=status,
                goal_status=row.status, description=row.description, label=_goal_label(row.goal_id, row.description, row.summary),
                trace_id=owner, goal_id=row.goal_id, depth=int(row.depth), tokens=int(row.cumulative_tokens),
                cost=float(row.cumulative_cost), is_current=bool(row.is_current),
            )
            parent = f"{prefix}{row.parent_goal_id}" if isinstance(row.parent_goal_id, str) else attach_to
            if parent is not None and parent in graph:
                graph.add_edge(parent, node)
            if sub_traces:
                for child in row.sub_trace_ids:
                    if child in meta:
                        trace, text = meta[child], texts[child]
                        role = str(trace.role)
                        graph.add_node(
                            child, kind="trace", role="trace", status=trace.status, trace_id=child, path=text.path,
                            label="\n".join(line for line in (text.headline(role), text.detail(role)) if line),
                            verdict=text.verdict, depth=int(row.depth) + 1,
                            tokens=int(trace.total_tokens), cost=float(trace.total_cost),
                        )
                        graph.add_edge(node, child)
                        add_goals(child, f"{child}/", child)

    add_goals(trace_id, "", None)
    return graph


def _goal_label(goal_id: str, description: object, summary: object) -> str:
    lines = textwrap.wrap(f"{goal_id}. {description}", 40, max_lines=2, placeholder=" …")
    if isinstance(summary, str) and summary.strip():
        lines.append("→ " + textwrap.shorten(summary, 40, placeholder=" …"))
    return "\n".join(lines)


def _trace_title(graph: nx.DiGraph, root: Hashable) -> str:
    tokens = sum(int(graph.nodes[n].get("tokens", 0)) for n in graph)
    data = graph.nodes[root]
    label = str(data.get("role") or data.get("label", root)).split("\n")[0]
    return f"Trace tree of {label} · {graph.number_of_nodes()} traces · {_human(tokens)} tokens"


def _goal_title(graph: nx.DiGraph) -> str:
    kinds = [graph.nodes[n].get("kind") for n in graph]
    agents = kinds.count("trace")
    return f"Goal tree · {kinds.count('goal')} goals" + (f" · {agents} sub-agents" if agents else "")


def draw_trace_tree(
    source: StoreSource | TraceFrames | nx.DiGraph,
    root_trace_id: str | None = None,
    *,
    orientation: Orientation = "auto",
    max_depth: int | None = None,
    max_nodes: int | None = None,
    fold: bool = True,
    labels: bool | None = None,
    figsize: tuple[float, float] | None = None,
    highlight: HighlightInput = None,
) -> Figure:
    """Draw the trace tree (colour = status or verdict, marker = role); accepts a store, path, frames or a `trace_graph`.

    Top-down when it fits, else left to right; what does not fit folds into `+N traces` count nodes
    (`max_depth` levels below the root, `max_nodes` nodes at most; `fold=False` draws everything).
    `highlight=await explain(store, root)` draws the path from the root to where the run went wrong.
    """
    graph = source if isinstance(source, nx.DiGraph) else trace_graph(source, _required(root_trace_id))
    root = graph.graph.get("root")
    title = _trace_title(graph, root) if root in graph else None
    return draw_tree(graph, orientation=orientation, labels=labels, title=title, figsize=figsize, max_depth=max_depth,
                     max_nodes=max_nodes, fold=fold, highlight=highlight)


def draw_goal_tree(
    source: StoreSource | TraceFrames | nx.DiGraph,
    trace_id: str | None = None,
    *,
    sub_traces: bool = True,
    orientation: Orientation = "horizontal",
    max_depth: int | None = None,
    max_nodes: int | None = None,
    fold: bool = True,
    labels: bool | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Draw a goal tree left to right (colour = status, marker = goal / agent call / sub-trace), folded to fit."""
    graph = source if isinstance(source, nx.DiGraph) else goal_graph(source, _required(trace_id), sub_traces=sub_traces)
    return draw_tree(graph, orientation=orientation, labels=labels, title=_goal_title(graph), figsize=figsize,
                     max_depth=max_depth, max_nodes=max_nodes, fold=fold)


def _required(trace_id: str | None) -> str:
    if not trace_id:
        from cyber_agent.errors import ConfigurationError

        raise ConfigurationError("trace_id", "is required when drawing from a store, path or frames")
    return trace_id
