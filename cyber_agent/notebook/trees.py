"""Trace and goal trees as networkx graphs and matplotlib figures (SPEC J2).

`trace_graph` / `goal_graph` return a `networkx.DiGraph` (parent -> child, children in
creation order). `draw_trace_tree` / `draw_goal_tree` return a `matplotlib.figure.Figure`
built without pyplot, so nothing is shown or kept behind the caller's back.

Layout: `tidy_tree_layout` — leaves take consecutive slots in depth-first order, a parent
sits centred over its first and last child, y = -depth. Crossing-free and O(n); networkx has
no tree layout (bfs/multipartite layouts centre each layer on its own and lose the shape).
Drawing: every edge in ONE LineCollection (elbow connectors), every node in ONE scatter (the
marker of each point set per role), labels only while they stay readable.
"""

from __future__ import annotations

import textwrap
from collections.abc import Hashable
from typing import Any, Literal

import networkx as nx
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle

from cyber_agent.notebook.frames import TraceFrames, to_frames
from cyber_agent.notebook.records import StoreSource
from cyber_agent.notebook.tree_labels import VERDICT_MARKS, trace_texts
from cyber_agent.trace.goal_models import FINAL_GOAL_STATUSES

__all__ = [
    "ROLE_MARKERS",
    "STATUS_COLORS",
    "VERDICT_COLORS",
    "draw_goal_tree",
    "draw_trace_tree",
    "draw_tree",
    "goal_graph",
    "tidy_tree_layout",
    "trace_graph",
]

STATUS_COLORS: dict[str, str] = {
    "completed": "#2ca02c", "running": "#1f77b4", "in_progress": "#1f77b4", "failed": "#d62728",
    "stopped": "#ff7f0e", "waiting_confirmation": "#9467bd", "waiting_children": "#17becf",
    "pending_review": "#bcbd22", "pending": "#c7c7c7", "abandoned": "#7f7f7f",
}
"""Fill colour of a node by status (traces and goals)."""
VERDICT_COLORS: dict[str, str] = {"pass": "#2ca02c", "fail": "#d62728", "unknown": "#e7ba52"}
"""A validator's fill and a judged trace's ring, by verdict (a node's `verdict` attribute)."""
ROLE_MARKERS: dict[str, str] = {
    "main": "s", "explore": "o", "delegate": "^", "agent": "o", "validator": "D",
    "goal": "o", "agent_call": "s", "trace": "D",
}
"""Marker of a node by role (trace trees) or kind (goal trees); other roles cycle through `_SPARE_MARKERS`."""
_SPARE_MARKERS = ("v", "p", "h", "*", "P", "X", "<", ">")
_UNKNOWN_COLOR = "#444444"
_ENDED_BADLY = ("failed", "stopped")
MAX_LABELLED_NODES = 60
"""Above this many nodes only the root and first level are labelled (or only the root)."""


def tidy_tree_layout(graph: nx.DiGraph, root: Hashable | None = None) -> dict[Hashable, tuple[float, float]]:
    """Return {node: (x, y)}: leaves at x = 0, 1, 2... in DFS order, parents centred, y = -depth."""
    roots = [root] if root is not None else [n for n in graph if graph.in_degree(n) == 0]
    pos: dict[Hashable, tuple[float, float]] = {}
    next_leaf = 0.0
    for start in roots:
        stack: list[tuple[Hashable, int, bool]] = [(start, 0, False)]
        while stack:  # iterative post-order: deep trees never hit the recursion limit
            node, depth, expanded = stack.pop()
            children = [c for c in graph.successors(node) if c not in pos]
            if expanded:
                xs = [pos[c][0] for c in graph.successors(node) if c in pos]
                pos[node] = ((xs[0] + xs[-1]) / 2 if xs else next_leaf, -float(depth))
            elif not children:
                pos[node] = (next_leaf, -float(depth))
                next_leaf += 1.0
            else:
                stack.append((node, depth, True))
                stack.extend((c, depth + 1, False) for c in reversed(children))
    return pos


def _human(value: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:.0f}"


def trace_graph(source: StoreSource | TraceFrames, root_trace_id: str) -> nx.DiGraph:
    """Return the tree of traces under `root_trace_id` (agents and validators) as a DiGraph.

    Node attributes: `status`, `role`, `agent_type`, `depth`, `tokens`, `cost`, `messages`, `task`,
    `is_validator`, and from `cyber_agent/notebook/tree_labels.py:trace_texts` the unique `path`, the
    `title`, the `objective`, the `verdict` (and a validator's `checks`); `label` is what a drawing prints.
    """
    frames = to_frames(source, [root_trace_id], messages=False, events=False).tree(root_trace_id)
    traces = frames.traces.sort_values("position", kind="stable")
    texts = trace_texts(traces, frames.validations)
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
        )
        if row.trace_id != root_trace_id and row.parent_trace_id in graph:
            graph.add_edge(row.parent_trace_id, row.trace_id)
    return graph


def goal_graph(source: StoreSource | TraceFrames, trace_id: str, *, sub_traces: bool = False) -> nx.DiGraph:
    """Return a trace's goal tree as a DiGraph (node = goal id); `sub_traces` hangs sub-agents' goals under their goal.

    A goal left open (pending, in progress, ...) by a trace that ended `failed` or `stopped` takes
    that status, so it is drawn as such; `goal_status` keeps what the goal tree says.
    """
    frames = to_frames(source, [trace_id], messages=False, events=False).tree(trace_id)
    traces = frames.traces.sort_values("position", kind="stable")
    texts = trace_texts(traces, frames.validations)
    meta = {row.trace_id: row for row in traces.itertuples(index=False)}
    graph = nx.DiGraph(root=trace_id)

    def add_goals(owner: str, prefix: str, attach_to: str | None) -> None:
        goals = frames.goals[frames.goals["trace_id"] == owner].sort_values("position")
        ended = meta[owner].status if owner in meta and meta[owner].status in _ENDED_BADLY else None
        for row in goals.itertuples(index=False):
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


def _markers(roles: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    spare = iter(_SPARE_MARKERS * 4)
    for role in roles:
        out[role] = ROLE_MARKERS.get(role) or next(spare)
    return out


def draw_tree(
    graph: nx.DiGraph,
    *,
    orientation: Literal["vertical", "horizontal"] = "vertical",
    labels: bool | None = None,
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Draw a tree DiGraph (nodes with `status`, `role`, `label`) with the tidy layout; return the Figure."""
    pos = tidy_tree_layout(graph, graph.graph.get("root") if graph.graph.get("root") in graph else None)
    nodes = list(pos)
    n = len(nodes)
    depth_of = {node: -pos[node][1] for node in nodes}
    leaves = max(1, sum(1 for node in nodes if graph.out_degree(node) == 0))
    levels = int(max(depth_of.values(), default=0)) + 1
    horizontal = orientation == "horizontal"
    if figsize is None:
        lines = max((str(graph.nodes[node].get("label", "")).count("\n") + 1 for node in nodes), default=1)
        figsize = (min(2.6 + 2.8 * levels, 22.0), min(max(2.2, (0.2 + 0.16 * lines) * leaves + 1.0), 30.0)) if horizontal else (
            min(max(6.0, leaves * (1.3 if n <= MAX_LABELLED_NODES else 0.03) + 2.0), 30.0),
            min(max(3.0, (1.15 if n <= MAX_LABELLED_NODES else 0.5) * levels + 1.2), 12.0))

    def xy(node: Hashable) -> tuple[float, float]:
        x, y = pos[node]
        return (-y, -x) if horizontal else (x, y)

    fig = Figure(figsize=figsize)
    # Fixed margins in inches instead of constrained layout: measuring every label costs ~0.3 s at 1k nodes.
    fig.subplots_adjust(left=0.15 / figsize[0], right=1 - 1.7 / figsize[0], bottom=0.1 / figsize[1],
                        top=1 - (0.45 if title else 0.15) / figsize[1])
    ax = fig.add_subplot()
    ax.set_axis_off()
    segments = []
    for parent, child in graph.edges():
        if parent in pos and child in pos:
            (px, py), (cx, cy) = xy(parent), xy(child)
            if horizontal:
                mid = px + 0.5
                segments.append([(px, py), (mid, py), (mid, cy), (cx, cy)])
            else:
                mid = py - 0.5
                segments.append([(px, py), (px, mid), (cx, mid), (cx, cy)])
    ax.add_collection(LineCollection(segments, colors="#9a9a9a", linewidths=0.9 if n <= 200 else 0.4, zorder=1))

    statuses = [str(graph.nodes[node].get("status")) for node in nodes]
    roles = [str(graph.nodes[node].get("role", "agent")) for node in nodes]
    verdicts = [graph.nodes[node].get("verdict") for node in nodes]
    marker_of = _markers(list(dict.fromkeys(roles)))
    size = 170.0 if n <= MAX_LABELLED_NODES else max(4.0, min(60.0, 6000.0 / n))
    coords = [xy(node) for node in nodes]
    fills, edges, widths = _node_colors(statuses, roles, verdicts, thin=n > 200)
    scatter = ax.scatter(
        [c[0] for c in coords], [c[1] for c in coords], s=size, zorder=3, c=fills, edgecolors=edges, linewidths=widths,
    )
    paths = {}
    for role, marker in marker_of.items():
        style = MarkerStyle(marker)
        paths[role] = style.get_path().transformed(style.get_transform())
    scatter.set_paths([paths[role] for role in roles])

    if labels is None or labels:
        _draw_labels(ax, graph, {node: xy(node) for node in nodes}, depth_of, horizontal=horizontal, figsize=figsize)
    xs, ys = [c[0] for c in coords] or [0.0], [c[1] for c in coords] or [0.0]
    if horizontal:
        ax.set_xlim(min(xs) - 0.3, max(xs) + 1.0)
        ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    else:
        ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
        ax.set_ylim(min(ys) - 0.75, max(ys) + 0.35)

    shown = [s for s, r, v in zip(statuses, roles, verdicts) if not (r == "validator" and v in VERDICT_COLORS
                                                                        and s not in _ENDED_BADLY)]
    handles = [Line2D([], [], ls="", marker="o", ms=8, mfc=STATUS_COLORS.get(s, _UNKNOWN_COLOR), mec="#333333", label=s)
               for s in dict.fromkeys(shown)]
    # A verdict is shown as a validator filled with it (a judged trace wears it as a ring).
    handles += [Line2D([], [], ls="", marker=ROLE_MARKERS["validator"], ms=7, mfc=VERDICT_COLORS[v], mec="#333333",
                       label=f"verdict {VERDICT_MARKS[v]} {v}") for v in VERDICT_COLORS if v in verdicts]
    handles += [Line2D([], [], ls="", marker=marker_of[r], ms=8, mfc="white", mec="#333333", label=r.replace("_", " "))
                for r in dict.fromkeys(roles)]
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
                  title="status / verdict / role" if any(verdicts) else "status / role", title_fontsize=8, borderaxespad=0.0)
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    return fig


def _node_colors(statuses: list[str], roles: list[str], verdicts: list[Any], *, thin: bool) -> tuple[
        list[str], list[str], list[float]]:
    """Fill, edge colour and edge width of each node: a validator is filled with its verdict (unless it
    ended failed or stopped), a judged trace keeps its status fill and gets a thick ring of its verdict."""
    fills, edges, widths = [], [], []
    plain_edge, plain_width = ("none", 0.0) if thin else ("#333333", 0.6)
    for status, role, verdict in zip(statuses, roles, verdicts):
        status_color = STATUS_COLORS.get(status, _UNKNOWN_COLOR)
        if verdict not in VERDICT_COLORS:
            fills.append(status_color)
            edges.append(plain_edge)
            widths.append(plain_width)
        elif role == "validator" and status not in _ENDED_BADLY:
            fills.append(VERDICT_COLORS[verdict])
            edges.append(plain_edge)
            widths.append(plain_width)
        else:
            fills.append(status_color)
            edges.append(VERDICT_COLORS[verdict])
            widths.append(1.2 if thin else 2.2)
    return fills, edges, widths


def _draw_labels(
    ax: Any, graph: nx.DiGraph, coords: dict[Hashable, tuple[float, float]], depth_of: dict[Hashable, float], *,
    horizontal: bool, figsize: tuple[float, float],
) -> None:
    """Label nodes while labels stay readable: few enough nodes, and no label overlapping its neighbour."""
    nodes = list(coords)
    candidates = nodes
    if len(nodes) > MAX_LABELLED_NODES:
        top = [node for node in nodes if depth_of[node] <= 1]
        candidates = top if len(top) <= MAX_LABELLED_NODES else [node for node in nodes if depth_of[node] == 0]
    fontsize = 8 if len(nodes) <= MAX_LABELLED_NODES else 7
    char_w, line_h = fontsize * 0.6 / 72, fontsize * 1.3 / 72
    along = 1 if horizontal else 0  # the axis along which same-depth labels can collide
    values = [c[along] for c in coords.values()] or [0.0]
    span = max(values) - min(values) + 1.2
    inches = (figsize[1] - 0.8) if horizontal else (figsize[0] - 2.0)
    per_unit = max(inches, 0.5) / span

    def extent(text: str) -> float:
        return (text.count("\n") + 1) * line_h if horizontal else max(len(line) for line in text.split("\n")) * char_w

    by_depth: dict[float, list[Hashable]] = {}
    for node in candidates:
        by_depth.setdefault(depth_of[node], []).append(node)
    for level in by_depth.values():
        level.sort(key=lambda node: coords[node][along])
        last: tuple[float, float] | None = None  # (position, half extent) of the last label kept
        for node in level:
            text = str(graph.nodes[node].get("label", node))
            half = extent(text) / 2
            where = coords[node][along]
            if last is not None and abs(where - last[0]) * per_unit < last[1] + half + 0.04:
                continue
            last = (where, half)
            box = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}
            if horizontal:
                ax.annotate(text, coords[node], xytext=(8, 0), textcoords="offset points", va="center", ha="left",
                            fontsize=fontsize, zorder=4, bbox=box)
            else:
                ax.annotate(text, coords[node], xytext=(0, -9), textcoords="offset points", va="top", ha="center",
                            fontsize=fontsize, zorder=4, bbox=box)


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
    labels: bool | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Draw the trace tree (colour = status, marker = role); accepts a store, path, frames or a `trace_graph`."""
    graph = source if isinstance(source, nx.DiGraph) else trace_graph(source, _required(root_trace_id))
    root = graph.graph.get("root")
    title = _trace_title(graph, root) if root in graph else None
    return draw_tree(graph, orientation="vertical", labels=labels, title=title, figsize=figsize)


def draw_goal_tree(
    source: StoreSource | TraceFrames | nx.DiGraph,
    trace_id: str | None = None,
    *,
    sub_traces: bool = True,
    labels: bool | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Draw a goal tree left to right (colour = status, marker = goal / agent call / sub-trace)."""
    graph = source if isinstance(source, nx.DiGraph) else goal_graph(source, _required(trace_id), sub_traces=sub_traces)
    return draw_tree(graph, orientation="horizontal", labels=labels, title=_goal_title(graph), figsize=figsize)


def _required(trace_id: str | None) -> str:
    if not trace_id:
        from cyber_agent.errors import ConfigurationError

        raise ConfigurationError("trace_id", "is required when drawing from a store, path or frames")
    return trace_id
