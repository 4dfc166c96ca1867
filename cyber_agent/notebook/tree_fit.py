"""Fitting a big tree into a readable figure: fold subtrees into count nodes, size the figure.

A figure is readable when its labels are printed at their size: a notebook shows an image at
most as wide as the page (about 11 inches at 100 dpi) and scrolls down, so a drawing is bounded
by `MAX_WIDTH` × `MAX_HEIGHT` inches and a leaf gets a fixed share of it. `fold_tree` decides
what is shown within that budget, level by level from the root: a level is shown whole when it
fits; otherwise each parent shows its first k children (the largest k that fits, the same for
every parent of the level) and a **count node** `+N traces` stands for the rest of its
children's subtrees, with how many of them failed, stopped or got a failing verdict. Whatever
lies below the last level shown is folded the same way, one count node per parent.
"""

from __future__ import annotations

import textwrap
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import networkx as nx

__all__ = [
    "FOLDED_ROLE",
    "MAX_HEIGHT",
    "MAX_WIDTH",
    "Budget",
    "budget_for",
    "fold_tree",
    "label_size",
    "wrap_label",
]

MAX_WIDTH = 10.0
"""Widest figure (inches) a fitted drawing gets: a notebook page (JupyterLab, GitHub, nbviewer) shows about
1,000 px at 100 dpi; a wider image is scaled down, and 8 pt labels shrink to ~6 px."""
MAX_HEIGHT = 26.0
"""Tallest figure (inches) a fitted drawing gets."""
FOLDED_ROLE = "folded"
"""The `role` (and `status`) of a count node."""
LEGEND_WIDTH = 1.8  # inches right of the axes kept for the legend
CHAR_WIDTH = 0.6 / 72  # inches per character per point of font size (DejaVu Sans, average)
LINE_HEIGHT = 1.3 / 72  # inches per line per point of font size
_BAD = ("failed", "stopped")


@dataclass(frozen=True, kw_only=True)
class Budget:
    """How much of a tree fits: leaves (the width of a tree) and levels (its depth)."""

    max_leaves: int
    """Leaves of the drawn tree, count nodes included."""
    max_levels: int
    """Levels drawn, the root's included."""
    leaf: float
    """Inches a leaf takes across the tree."""
    level: float
    """Inches a level takes along the tree."""


def label_size(labels: Iterable[str], fontsize: float) -> tuple[float, int]:
    """(width in inches of the widest line, most lines) of node labels at `fontsize`."""
    width, lines = 0.0, 1
    for label in labels:
        parts = label.split("\n")
        lines = max(lines, len(parts))
        width = max(width, max(len(part) for part in parts) * CHAR_WIDTH * fontsize)
    return width, lines


def wrap_label(label: str, chars: int, max_lines: int = 4) -> str:
    """Re-wrap every line of a label to `chars` characters, at most `max_lines` lines (the last ends in …)."""
    lines: list[str] = []
    for line in label.split("\n"):
        lines.extend(textwrap.wrap(line, chars, break_long_words=True) or [""])
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        last = lines[-1].removesuffix("…").rstrip()  # a title already shortened ends in "…": never "… …"
        lines[-1] = textwrap.shorten(last + " …", chars, placeholder=" …") if len(last) + 2 > chars else last + " …"
    return "\n".join(lines)


def budget_for(orientation: Literal["vertical", "horizontal"], label_width: float, label_lines: int,
               fontsize: float) -> Budget:
    """What fits in `MAX_WIDTH` × `MAX_HEIGHT` when every label is `label_width` inches by `label_lines` lines."""
    label_height = label_lines * LINE_HEIGHT * fontsize
    if orientation == "vertical":
        leaf, level = max(label_width + 0.15, 0.45), label_height + 0.55
        across, along = MAX_WIDTH - LEGEND_WIDTH - 0.4, MAX_HEIGHT - 0.8
    else:
        leaf, level = max(label_height + 0.08, 0.22), max(label_width + 0.45, 1.0)
        across, along = MAX_HEIGHT - 0.8, MAX_WIDTH - LEGEND_WIDTH - 0.4
    return Budget(max_leaves=max(2, int(across // leaf)), max_levels=max(2, int(along // level)), leaf=leaf, level=level)


@dataclass
class _Hidden:
    """What a count node stands for."""

    count: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    stopped: int = 0
    rejected: int = 0
    tokens: int = 0


def _subtree_totals(graph: nx.DiGraph, roots: list[Hashable]) -> dict[Hashable, _Hidden]:
    totals: dict[Hashable, _Hidden] = {}
    for start in roots:
        for node in reversed(list(nx.dfs_preorder_nodes(graph, start))):  # children before parents
            data = graph.nodes[node]
            own = _Hidden(count=1, kinds={str(data.get("kind", "trace")): 1}, failed=int(data.get("status") == "failed"),
                          stopped=int(data.get("status") == "stopped"), rejected=int(data.get("verdict") == "fail"),
                          tokens=int(data.get("tokens", 0) if data.get("kind") != "goal" else 0))
            for child in graph.successors(node):
                _add(own, totals[child])
            totals[node] = own
    return totals


def _add(total: _Hidden, part: _Hidden) -> None:
    total.count += part.count
    for kind, n in part.kinds.items():
        total.kinds[kind] = total.kinds.get(kind, 0) + n
    total.failed += part.failed
    total.stopped += part.stopped
    total.rejected += part.rejected
    total.tokens += part.tokens


def _count_label(hidden: _Hidden) -> str:
    what = ", ".join(f"{n} {kind if n == 1 else kind + 's'}" for kind, n in sorted(hidden.kinds.items(), key=lambda kv: -kv[1]))
    lines = [f"+{what}"]
    bad = [f"{n} {word}" for n, word in ((hidden.failed, "failed"), (hidden.stopped, "stopped"), (hidden.rejected, "✗"))
           if n]
    if bad:
        lines.append(" · ".join(bad))
    return "\n".join(lines)


def fold_tree(
    graph: nx.DiGraph, root: Hashable | None = None, *, max_leaves: int | None = None, max_depth: int | None = None,
    max_nodes: int | None = None,
) -> nx.DiGraph:
    """Return `graph` cut to at most `max_leaves` leaves, `max_depth` levels below the root and `max_nodes` nodes.

    Count nodes (role and status `folded`, id `("folded", parent)`) stand for what is left out: `count`,
    `hidden` (per kind), `failed`, `stopped`, `rejected` (fail verdicts), `tokens`, and a `label`. The
    graph is returned as it is when everything fits. A count node is one node and one leaf.
    """
    roots = [root] if root is not None and root in graph else [n for n in graph if graph.in_degree(n) == 0]
    leaf_cap = max_leaves if max_leaves is not None else graph.number_of_nodes()
    node_cap = max_nodes if max_nodes is not None else graph.number_of_nodes()
    depth_cap = max_depth if max_depth is not None else graph.number_of_nodes()
    if min(leaf_cap, node_cap) < 2 or depth_cap < 0:
        raise ValueError(f"max_leaves and max_nodes must be at least 2 and max_depth at least 0; got max_leaves={max_leaves}, "
                         f"max_nodes={max_nodes}, max_depth={max_depth}")
    shown: dict[Hashable, list[Hashable]] = {}  # parent -> the children kept
    kept = list(roots)
    frontier = [n for n in roots if graph.out_degree(n)]
    leaves = len(roots)
    nodes = len(roots) + len(frontier)  # every frontier parent carries a count node until it is opened
    more = 0  # count nodes of hidden siblings, which stay
    depth = 0
    while frontier and depth < depth_cap:
        children = [list(graph.successors(p)) for p in frontier]

        def cost(k: int) -> tuple[int, int]:
            opened = sum(min(len(c), k) for c in children)
            extra = sum(len(c) > k for c in children)
            parents = sum(1 for c in children for child in c[:k] if graph.out_degree(child))
            return (leaves - len(frontier) + opened + extra,
                    len(kept) + opened + more + extra + parents)

        low, high = 0, max(len(c) for c in children)
        while low < high:  # the largest k whose cost fits (cost grows with k)
            k = (low + high + 1) // 2
            leaf_count, node_count = cost(k)
            if leaf_count <= leaf_cap and node_count <= node_cap:
                low = k
            else:
                high = k - 1
        if low == 0:
            break
        leaves, nodes = cost(low)
        next_frontier: list[Hashable] = []
        for parent, group in zip(frontier, children):
            shown[parent] = group[:low]
            kept.extend(group[:low])
            more += len(group) > low
            next_frontier.extend(child for child in group[:low] if graph.out_degree(child))
        frontier = next_frontier
        depth += 1
    if len(kept) == graph.number_of_nodes():
        return graph
    return _build(graph, roots, kept, shown)


def _build(graph: nx.DiGraph, roots: list[Hashable], kept: list[Hashable], shown: dict[Hashable, list[Hashable]]) -> nx.DiGraph:
    totals = _subtree_totals(graph, roots)
    out = nx.DiGraph(**graph.graph)
    out.graph["folded"] = graph.number_of_nodes() - len(kept)
    for node in kept:
        out.add_node(node, **graph.nodes[node])
    for node in kept:
        visible = shown.get(node, [])
        for child in visible:
            out.add_edge(node, child)
        hidden = [child for child in graph.successors(node) if child not in set(visible)]
        if not hidden:
            continue
        total = _Hidden()
        for child in hidden:
            _add(total, totals[child])
        data: dict[str, Any] = graph.nodes[node]
        fold = ("folded", node)
        out.add_node(fold, role=FOLDED_ROLE, status=FOLDED_ROLE, kind=FOLDED_ROLE, label=_count_label(total),
                     count=total.count, hidden=dict(total.kinds), failed=total.failed, stopped=total.stopped,
                     rejected=total.rejected, tokens=total.tokens, folded_from=node,
                     depth=int(data.get("depth", 0)) + 1, hidden_children=len(hidden))
        out.add_edge(node, fold)
    return out
