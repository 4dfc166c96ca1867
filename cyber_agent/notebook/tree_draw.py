"""Drawing a tree DiGraph as a matplotlib Figure: tidy layout, one edge collection, one scatter.

Layout: `tidy_tree_layout` — leaves take consecutive slots in depth-first order, a parent sits
centred over its first and last child, y = -depth. Crossing-free and O(n); networkx has no tree
layout (bfs/multipartite layouts centre each layer on its own and lose the shape).

Fitting (`cyber_agent/notebook/tree_fit.py`): unless `fold=False`, the tree is folded to what
fits `MAX_WIDTH` × `MAX_HEIGHT` at the labels' own size, and the figure gets exactly the inches
its leaves and levels need (so labels are never shrunk by a huge canvas). `orientation="auto"`
draws top-down when the whole tree fits that way and left to right otherwise (a notebook
scrolls down, not sideways). Every edge is in ONE LineCollection (elbow connectors), every node
in ONE scatter (the marker of each point set per role).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Union

import networkx as nx
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure, FigureBase
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle

from cyber_agent.notebook.tree_fit import (
    CHAR_WIDTH,
    FOLDED_ROLE,
    LEGEND_WIDTH,
    MAX_HEIGHT,
    MAX_WIDTH,
    budget_for,
    fold_tree,
    label_size,
    wrap_label,
)
from cyber_agent.errors import ConfigurationError
from cyber_agent.notebook.tree_labels import VERDICT_MARKS

if TYPE_CHECKING:
    from cyber_agent.analysis.explain import Attribution

__all__ = [
    "DIFF_COLORS",
    "HIGHLIGHT_COLOR",
    "NODES_GID",
    "ROLE_MARKERS",
    "STATUS_COLORS",
    "VERDICT_COLORS",
    "HighlightInput",
    "Orientation",
    "TreePlan",
    "draw_tree",
    "drawn_colors",
    "highlight_of",
    "plan_tree",
    "render_tree",
    "tidy_tree_layout",
]

Orientation = Literal["vertical", "horizontal", "auto"]
STATUS_COLORS: dict[str, str] = {
    "completed": "#2ca02c", "running": "#1f77b4", "in_progress": "#1f77b4", "failed": "#d62728",
    "stopped": "#ff7f0e", "waiting_confirmation": "#9467bd", "waiting_children": "#17becf",
    "pending_review": "#bcbd22", "pending": "#c7c7c7", "abandoned": "#7f7f7f", FOLDED_ROLE: "#e4e4e4",
}
"""Fill colour of a node by status (traces, goals, count nodes)."""
UNSUPPORTED_COLOR = "#d62728"
"""The cross on a child whose report had claims the evidence check found unsupported."""
DIFF_COLORS: dict[str, str] = {
    "same": "#e8e8e8", "changed": "#9467bd", "relabelled": "#ff7f0e", "inserted": "#2ca02c", "deleted": "#d62728",
}
"""Fill of a node of a comparison by its `diff`: unchanged, changed (status / outcome / verdict), relabelled
(its brief changed), inserted (only in b), deleted (only in a)."""
HIGHLIGHT_COLOR = "#e6007e"
"""Rings and edges of a highlighted path (an `explain` chain)."""
NODES_GID = "tree-nodes"
"""The gid of the node scatter of a drawing (`drawn_colors` finds it by this)."""
VERDICT_COLORS: dict[str, str] = {"pass": "#2ca02c", "fail": "#d62728", "unknown": "#e7ba52"}
"""A validator's fill and a judged trace's ring, by verdict (a node's `verdict` attribute)."""
ROLE_MARKERS: dict[str, str] = {
    "main": "s", "explore": "o", "delegate": "^", "agent": "o", "validator": "D",
    "goal": "o", "agent_call": "s", "trace": "D", FOLDED_ROLE: "P",
}
"""Marker of a node by role (trace trees) or kind (goal trees); other roles cycle through `_SPARE_MARKERS`."""
_SPARE_MARKERS = ("v", "p", "h", "*", "X", "<", ">")
_UNKNOWN_COLOR = "#444444"
_ENDED_BADLY = ("failed", "stopped")
MAX_LABELLED_NODES = 60
"""Unfolded (`fold=False`) drawings above this many nodes label only the root and first level (or only the root)."""
MIN_LABEL_WIDTH = 1.0  # inches: labels of a deep left-to-right tree are wrapped down to this
MIN_WRAP = 14  # characters
MAX_LEVELS = 9  # levels a deep tree is narrowed for; deeper ones fold
DEFAULT_MAX_NODES = 60
"""Nodes a folded drawing shows at most unless `max_nodes` says otherwise (every one labelled: ~10 ms each to render)."""


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


def _markers(roles: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    spare = iter(_SPARE_MARKERS * 4)
    for role in roles:
        out[role] = ROLE_MARKERS.get(role) or next(spare)
    return out


def _fit(graph: nx.DiGraph, root: Hashable | None, orientation: Orientation, fontsize: float,
         max_depth: int | None, max_nodes: int | None) -> tuple[nx.DiGraph, Literal["vertical", "horizontal"], float, float,
                                                               int | None]:
    """The folded graph, its orientation, the inches of one leaf and one level, and the label wrap width (chars)."""
    labels = [str(d.get("label", n)) for n, d in graph.nodes(data=True)]
    width, lines = label_size(labels, fontsize)
    width = min(width, 2.6)  # a longer line is clipped by its neighbour, not given more room
    lines = max(lines, 2)  # a count node's label has two
    starts = [root] if root is not None else [n for n in graph if graph.in_degree(n) == 0]
    levels = 1 + max((d for start in starts for d in nx.single_source_shortest_path_length(graph, start).values()),
                     default=0)
    if max_depth is not None:
        levels = min(levels, max_depth + 1)
    if orientation == "auto":
        whole = budget_for("vertical", width, lines, fontsize)
        leaves = sum(1 for n in graph if graph.out_degree(n) == 0)
        fits = (leaves <= whole.max_leaves and levels <= whole.max_levels
                and (DEFAULT_MAX_NODES if max_nodes is None else max_nodes) >= len(graph))
        orientation = "vertical" if fits else "horizontal"
    budget = budget_for(orientation, width, lines, fontsize)
    wrap = None
    if orientation == "horizontal" and levels > budget.max_levels and width > MIN_LABEL_WIDTH:
        # A deep tree (goal → step → sub-agent → goal ...): narrower, taller labels buy levels.
        room = (MAX_WIDTH - LEGEND_WIDTH - 0.4) / min(levels, MAX_LEVELS) - 0.45
        wrap = max(MIN_WRAP, int(max(room, MIN_LABEL_WIDTH) / (CHAR_WIDTH * fontsize)))
        width, lines = label_size((wrap_label(label, wrap) for label in labels), fontsize)
        budget = budget_for(orientation, width, max(lines, 2), fontsize)
    depth = budget.max_levels - 1 if max_depth is None else min(max_depth, budget.max_levels - 1)
    folded = fold_tree(graph, root, max_leaves=budget.max_leaves, max_depth=depth,
                       max_nodes=DEFAULT_MAX_NODES if max_nodes is None else max_nodes)
    return folded, orientation, budget.leaf, budget.level, wrap


HighlightInput = Union["Attribution", Iterable[Hashable], None]
"""What `draw_tree(highlight=...)` takes: an `explain` result (its chain, its node) or node ids."""


@dataclass(frozen=True, kw_only=True)
class _Highlight:
    path: frozenset[Hashable]
    """Nodes of the highlighted path (a hidden one stands for the count node that folds it)."""
    culprit: Hashable | None
    """The node `explain` named (drawn with a thicker ring), or None."""
    caption: str = ""


def highlight_of(graph: nx.DiGraph, drawn: nx.DiGraph, highlight: HighlightInput) -> _Highlight | None:
    """The path to highlight in the drawn (maybe folded) graph: a node folded away stands for its count node."""
    if highlight is None:
        return None
    chain = getattr(highlight, "chain", None)
    if chain is not None:
        nodes: list[Hashable] = list(chain)
        culprit: Hashable | None = getattr(highlight, "trace_id", None)
        kind, step = getattr(highlight, "kind", None), getattr(highlight, "step", None)
        caption = f"explain: {kind} at step {step}" if kind else ""
    else:
        nodes, culprit, caption = list(highlight), None, ""  # type: ignore[arg-type]
    missing = [n for n in nodes if n not in graph]
    if missing:
        raise ConfigurationError("highlight", f"names nodes that are not in the tree: {missing[:3]!r}; "
                                              "pass explain() of this tree's root or ids of its nodes")

    def shown(node: Hashable) -> Hashable:
        current = node
        while current not in drawn:  # folded away: the count node of the nearest drawn ancestor
            parent = next(iter(graph.predecessors(current)), None)
            if parent is None:
                return node
            if ("folded", parent) in drawn:
                return ("folded", parent)
            current = parent
        return current

    return _Highlight(path=frozenset(shown(n) for n in nodes), culprit=shown(culprit) if culprit is not None else None,
                      caption=caption)


@dataclass(kw_only=True)
class TreePlan:
    """A tree laid out for drawing: the (folded) graph, positions, orientation and the inches it needs."""

    graph: nx.DiGraph
    pos: dict[Hashable, tuple[float, float]]
    horizontal: bool
    figsize: tuple[float, float]
    fontsize: float
    leaf: float
    wrap: int | None
    fold: bool
    root: Hashable | None

    @property
    def nodes(self) -> list[Hashable]:
        """Drawn nodes in the order of the node scatter's points."""
        return list(self.pos)

    def xy(self, node: Hashable) -> tuple[float, float]:
        """Where `node` is drawn (data coordinates of the axes)."""
        x, y = self.pos[node]
        return (-y, -x) if self.horizontal else (x, y)


def plan_tree(graph: nx.DiGraph, *, orientation: Orientation = "vertical", figsize: tuple[float, float] | None = None,
              max_depth: int | None = None, max_nodes: int | None = None, fold: bool = True,
              titled: bool = False) -> TreePlan:
    """Fold, orient, lay out and size `graph` as `draw_tree` does (without drawing)."""
    root = graph.graph.get("root") if graph.graph.get("root") in graph else None
    fontsize = 8.0 if graph.number_of_nodes() <= MAX_LABELLED_NODES else 7.0
    leaf = level = 0.0
    wrap: int | None = None
    if fold:
        graph, orientation, leaf, level, wrap = _fit(graph, root, orientation, fontsize, max_depth, max_nodes)
    elif orientation == "auto":
        orientation = "vertical"
    pos = tidy_tree_layout(graph, root)
    nodes = list(pos)
    leaves = max(1, sum(1 for node in nodes if graph.out_degree(node) == 0))
    levels = int(max((-p[1] for p in pos.values()), default=0)) + 1
    horizontal = orientation == "horizontal"
    if figsize is None:
        figsize = _figsize(horizontal, leaves, levels, leaf, level, graph, nodes, titled)
    return TreePlan(graph=graph, pos=pos, horizontal=horizontal, figsize=figsize, fontsize=fontsize, leaf=leaf, wrap=wrap,
                    fold=fold, root=root)


def draw_tree(
    graph: nx.DiGraph,
    *,
    orientation: Orientation = "vertical",
    labels: bool | None = None,
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
    max_depth: int | None = None,
    max_nodes: int | None = None,
    fold: bool = True,
    highlight: HighlightInput = None,
) -> Figure:
    """Draw a tree DiGraph (nodes with `status`, `role`, `label`, optional `verdict`, `diff`); return the Figure.

    Folds what does not fit (`cyber_agent/notebook/tree_fit.py:fold_tree`) into count nodes, also
    below `max_depth` levels and beyond `max_nodes` nodes; `fold=False` draws every node. A node
    with a `diff` attribute (`cyber_agent/notebook/tree_diff.py:comparison_graph`) is filled with
    its `DIFF_COLORS`. `highlight` (an `explain` result, or node ids) draws that path's edges and
    rings in `HIGHLIGHT_COLOR`, the named node with a thicker ring.
    """
    plan = plan_tree(graph, orientation=orientation, figsize=figsize, max_depth=max_depth, max_nodes=max_nodes, fold=fold,
                     titled=bool(title))
    fig = Figure(figsize=plan.figsize)
    render_tree(fig, plan, labels=labels, title=title, highlight=highlight_of(graph, plan.graph, highlight))
    return fig


def render_tree(fig: FigureBase, plan: TreePlan, *, labels: bool | None = None, title: str | None = None,
                highlight: _Highlight | None = None) -> Axes:
    """Draw `plan` on a new axes of `fig` (a Figure or a SubFigure); return the axes."""
    graph, nodes, figsize, horizontal = plan.graph, plan.nodes, plan.figsize, plan.horizontal
    n = len(nodes)
    depth_of = {node: -plan.pos[node][1] for node in nodes}
    xy = plan.xy
    # Fixed margins in inches instead of constrained layout: measuring every label costs ~0.3 s at 1k nodes.
    fig.subplots_adjust(left=0.15 / figsize[0], right=1 - (LEGEND_WIDTH - 0.1) / figsize[0], bottom=0.1 / figsize[1],
                        top=1 - (0.45 if title else 0.15) / figsize[1])
    ax = fig.add_subplot()
    ax.set_axis_off()
    segments: list[list[tuple[float, float]]] = []
    lit: list[list[tuple[float, float]]] = []
    for parent, child in graph.edges():
        if parent in plan.pos and child in plan.pos:
            (px, py), (cx, cy) = xy(parent), xy(child)
            mid = (px + 0.5, py) if horizontal else (px, py - 0.5)
            segment = [(px, py), mid, (mid[0], cy), (cx, cy)] if horizontal else [(px, py), mid, (cx, mid[1]), (cx, cy)]
            on_path = highlight is not None and parent in highlight.path and child in highlight.path
            (lit if on_path else segments).append(segment)
    ax.add_collection(LineCollection(segments, colors="#9a9a9a", linewidths=0.9 if n <= 200 else 0.4, zorder=1))
    if lit:
        ax.add_collection(LineCollection(lit, colors=HIGHLIGHT_COLOR, linewidths=2.6, zorder=2, gid="highlight-edges"))

    statuses = [str(graph.nodes[node].get("status")) for node in nodes]
    roles = [str(graph.nodes[node].get("role", "agent")) for node in nodes]
    verdicts = [graph.nodes[node].get("verdict") for node in nodes]
    diffs = [graph.nodes[node].get("diff") for node in nodes]
    hidden_bad = [bool(graph.nodes[node].get("failed") or graph.nodes[node].get("stopped") or graph.nodes[node].get("rejected"))
                  if role == FOLDED_ROLE else False for node, role in zip(nodes, roles)]
    marker_of = _markers(list(dict.fromkeys(roles)))
    coords = [xy(node) for node in nodes]
    fills, edges, widths = _node_colors(statuses, roles, verdicts, hidden_bad, thin=n > 200)
    for index, diff in enumerate(diffs):
        if diff in DIFF_COLORS:
            fills[index] = DIFF_COLORS[diff]
    if highlight is not None:
        for index, node in enumerate(nodes):
            if node in highlight.path or node == highlight.culprit:
                edges[index] = HIGHLIGHT_COLOR
                widths[index] = 4.0 if node == highlight.culprit else 2.4
    scatter = ax.scatter([c[0] for c in coords], [c[1] for c in coords], s=_marker_size(n, plan.leaf, plan.fold), zorder=3,
                         c=fills, edgecolors=edges, linewidths=widths)
    scatter.set_gid(NODES_GID)
    paths = {}
    for role, marker in marker_of.items():
        style = MarkerStyle(marker)
        paths[role] = style.get_path().transformed(style.get_transform())
    scatter.set_paths([paths[role] for role in roles])

    if labels is None or labels:
        _draw_labels(ax, graph, {node: xy(node) for node in nodes}, depth_of, horizontal=horizontal, figsize=figsize,
                     fontsize=plan.fontsize, everything=plan.fold, wrap=plan.wrap)
    xs, ys = [c[0] for c in coords] or [0.0], [c[1] for c in coords] or [0.0]
    if horizontal:
        ax.set_xlim(min(xs) - 0.3, max(xs) + 1.0)
        ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    else:
        ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
        ax.set_ylim(min(ys) - 0.75, max(ys) + 0.35)
    # A child whose report had claims the evidence check did not find support for wears a red cross.
    flagged = [c for node, c in zip(nodes, coords) if graph.nodes[node].get("unsupported_claims")]
    if flagged:
        dx, dy = (0.18, 0.18)
        ax.scatter([x + dx for x, _ in flagged], [y + dy for _, y in flagged], marker="X",
                   s=_marker_size(n, plan.leaf, plan.fold) * 0.45, c=UNSUPPORTED_COLOR, edgecolors="white",
                   linewidths=0.5, zorder=4)
    _legend(ax, statuses, roles, verdicts, marker_of, unsupported=bool(flagged), diffs=diffs, highlight=highlight)
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    return ax


def drawn_colors(ax: Axes) -> dict[tuple[float, float], tuple[float, ...]]:
    """{(x, y) of a node: its RGBA fill} of the node scatter on `ax` (map positions to nodes with `TreePlan.xy`)."""
    import numpy as np

    scatter = next(c for c in ax.collections if c.get_gid() == NODES_GID)
    colors = np.asarray(scatter.get_facecolor(), dtype="float64")
    offsets = np.asarray(scatter.get_offsets(), dtype="float64")
    return {(float(x), float(y)): tuple(float(v) for v in colors[i % len(colors)]) for i, (x, y) in enumerate(offsets)}


def _figsize(horizontal: bool, leaves: int, levels: int, leaf: float, level: float, graph: nx.DiGraph,
             nodes: list[Hashable], titled: bool) -> tuple[float, float]:
    """Inches for `leaves` × `levels` at the fitted spacing (or the unfolded rule), within the caps."""
    extra_h = 0.25 + (0.45 if titled else 0.15)
    if not leaf:  # unfolded: the rule of thumb of the first version
        lines = max((str(graph.nodes[node].get("label", "")).count("\n") + 1 for node in nodes), default=1)
        leaf = (0.2 + 0.16 * lines) if horizontal else (1.3 if len(nodes) <= MAX_LABELLED_NODES else 0.03)
        level = 2.8 if horizontal else (1.15 if len(nodes) <= MAX_LABELLED_NODES else 0.5)
    if horizontal:
        width, height = (levels + 0.3) * level + LEGEND_WIDTH + 0.25, (leaves + 0.2) * leaf + extra_h
    else:
        width, height = (leaves + 0.2) * leaf + LEGEND_WIDTH + 0.25, (levels + 0.1) * level + extra_h
    return (min(max(width, 6.0), MAX_WIDTH), min(max(height, 2.6), MAX_HEIGHT))


def _marker_size(n: int, leaf: float, fitted: bool) -> float:
    if fitted and leaf:
        return max(16.0, min(170.0, (leaf * 72 * 0.4) ** 2))
    return 170.0 if n <= MAX_LABELLED_NODES else max(4.0, min(60.0, 6000.0 / n))


def _node_colors(statuses: list[str], roles: list[str], verdicts: list[Any], hidden_bad: list[bool], *,
                 thin: bool) -> tuple[list[str], list[str], list[float]]:
    """Fill, edge colour and edge width of each node: a validator is filled with its verdict (unless it
    ended failed or stopped), a judged trace keeps its status fill and gets a thick ring of its verdict,
    a count node hiding failures gets a red ring."""
    fills, edges, widths = [], [], []
    plain_edge, plain_width = ("none", 0.0) if thin else ("#333333", 0.6)
    ring = 1.2 if thin else 2.2
    for status, role, verdict, bad in zip(statuses, roles, verdicts, hidden_bad):
        status_color = STATUS_COLORS.get(status, _UNKNOWN_COLOR)
        if bad:
            fills.append(status_color)
            edges.append(VERDICT_COLORS["fail"])
            widths.append(ring)
        elif verdict not in VERDICT_COLORS:
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
            widths.append(ring)
    return fills, edges, widths


def _legend(ax: Any, statuses: list[str], roles: list[str], verdicts: list[Any], marker_of: dict[str, str], *,
            unsupported: bool = False, diffs: list[Any] | None = None, highlight: _Highlight | None = None) -> None:
    diffs = diffs or [None] * len(statuses)
    shown = [s for s, r, v, d in zip(statuses, roles, verdicts, diffs)
             if s != FOLDED_ROLE and d not in DIFF_COLORS and not (r == "validator" and v in VERDICT_COLORS and s not in _ENDED_BADLY)]
    handles = [Line2D([], [], ls="", marker="s", ms=8, mfc=DIFF_COLORS[d], mec="#333333", label=d)
               for d in DIFF_COLORS if d in diffs]
    handles += [Line2D([], [], ls="", marker="o", ms=8, mfc=STATUS_COLORS.get(s, _UNKNOWN_COLOR), mec="#333333", label=s)
                for s in dict.fromkeys(shown)]
    # A verdict is shown as a validator filled with it (a judged trace wears it as a ring).
    handles += [Line2D([], [], ls="", marker=ROLE_MARKERS["validator"], ms=7, mfc=VERDICT_COLORS[v], mec="#333333",
                       label=f"verdict {VERDICT_MARKS[v]} {v}") for v in VERDICT_COLORS if v in verdicts]
    handles += [Line2D([], [], ls="", marker=marker_of[r], ms=8, mfc=STATUS_COLORS[FOLDED_ROLE] if r == FOLDED_ROLE else "white",
                       mec="#333333", label="folded (+N)" if r == FOLDED_ROLE else r.replace("_", " "))
                for r in dict.fromkeys(roles)]
    if unsupported:
        handles.append(Line2D([], [], ls="", marker="X", ms=8, mfc=UNSUPPORTED_COLOR, mec="white", label="unsupported claims"))
    if highlight is not None:
        handles.append(Line2D([], [], color=HIGHLIGHT_COLOR, lw=2.6, marker="o", ms=8, mfc="white", mec=HIGHLIGHT_COLOR,
                              mew=2.4, label=highlight.caption or "highlighted path"))
    if handles:
        title = "difference / role" if any(d in DIFF_COLORS for d in diffs) else \
            "status / verdict / role" if any(verdicts) else "status / role"
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
                  title=title, title_fontsize=8, borderaxespad=0.0)


def _draw_labels(
    ax: Any, graph: nx.DiGraph, coords: dict[Hashable, tuple[float, float]], depth_of: dict[Hashable, float], *,
    horizontal: bool, figsize: tuple[float, float], fontsize: float, everything: bool, wrap: int | None = None,
) -> None:
    """Label nodes while labels stay readable: no label overlapping its neighbour at the same depth.

    A fitted (folded) tree offers every node; an unfolded big one only the root and first level.
    """
    nodes = list(coords)
    candidates = nodes
    if not everything and len(nodes) > MAX_LABELLED_NODES:
        top = [node for node in nodes if depth_of[node] <= 1]
        candidates = top if len(top) <= MAX_LABELLED_NODES else [node for node in nodes if depth_of[node] == 0]
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
    box = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}
    for level in by_depth.values():
        level.sort(key=lambda node: coords[node][along])
        last: tuple[float, float] | None = None  # (position, half extent) of the last label kept
        for node in level:
            text = str(graph.nodes[node].get("label", node))
            if wrap is not None:
                text = wrap_label(text, wrap)
            half = extent(text) / 2
            where = coords[node][along]
            if last is not None and abs(where - last[0]) * per_unit < last[1] + half + 0.04:
                continue
            last = (where, half)
            if horizontal:
                ax.annotate(text, coords[node], xytext=(8, 0), textcoords="offset points", va="center", ha="left",
                            fontsize=fontsize, zorder=4, bbox=box)
            else:
                ax.annotate(text, coords[node], xytext=(0, -9), textcoords="offset points", va="top", ha="center",
                            fontsize=fontsize, zorder=4, bbox=box)
