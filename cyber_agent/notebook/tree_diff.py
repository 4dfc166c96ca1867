"""Two aligned trees drawn: one tree with its differences coloured, or the two side by side.

`comparison_graph(cmp)` turns the frame of `cyber_agent/analysis/align.py:compare_trees` (or one
run of `compare_runs`) into a tree DiGraph whose nodes carry a `diff` attribute — `same`,
`changed` (a pair whose status, outcome or verdict changed), `relabelled` (its brief changed),
`inserted` (only in b) or `deleted` (only in a) — which the drawing fills with
`cyber_agent/notebook/tree_draw.py:DIFF_COLORS`. `side=None` is the union: b's tree with a's
deleted nodes hung under their parent's partner, in the alignment's order; `side="a"` / `"b"` is
one tree alone. `draw_comparison` draws the union, or both sides in one figure.
Everything is read from the frame: no store is opened.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Literal, cast

import networkx as nx
from matplotlib.figure import Figure, SubFigure

from cyber_agent.errors import ConfigurationError
from cyber_agent.notebook.tree_draw import DIFF_COLORS, HighlightInput, Orientation, highlight_of, plan_tree, render_tree

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DiffKind", "Side", "comparison_graph", "diff_kinds", "draw_comparison"]

DiffKind = Literal["same", "changed", "relabelled", "inserted", "deleted"]
Side = Literal["a", "b"]
_ROLES = {"root": "main", "child": "agent", "validator": "validator"}
_NEEDED = ("kind", "role", "trace_id_a", "trace_id_b", "parent_a", "parent_b", "brief_a", "brief_b", "status_a", "status_b")


def _one_run(cmp: pd.DataFrame, run: int | None) -> pd.DataFrame:
    missing = [c for c in _NEEDED if c not in cmp.columns]
    if missing:
        raise ConfigurationError("cmp", f"lacks columns {missing}; pass the frame of compare_trees or compare_runs")
    if "run" in cmp.columns:
        runs = sorted(set(cmp["run"]))
        if run is None and len(runs) == 1:
            run = runs[0]
        if run not in runs:
            raise ConfigurationError("run", f"pick one run of the compare_runs frame ({runs}), got {run!r}")
        return cmp[cmp["run"] == run]
    if run is not None:
        raise ConfigurationError("run", "applies to a compare_runs frame only; this frame compares one pair")
    return cmp


def _flag(value: Any) -> bool:
    return bool(value) if value is not None and value == value and str(value) != "<NA>" else False


def diff_kinds(cmp: pd.DataFrame, *, run: int | None = None) -> list[DiffKind]:
    """The `diff` of each row of `cmp`: the alignment's kind, with `same` split from `changed`."""
    rows = _one_run(cmp, run)
    changed = None
    for measure in ("status", "outcome", "verdict"):
        column = f"{measure}_changed"
        if column in rows.columns:
            flags = rows[column].astype("boolean").fillna(False).astype(bool)
            changed = flags if changed is None else changed | flags
    kinds = rows["kind"].astype(str)
    paired = kinds.isin(["matched"])
    out = kinds.where(~paired, "same")
    if changed is not None:
        out = out.where(~(paired & changed), "changed")
    return cast("list[DiffKind]", out.tolist())


def _two_lines(text: str, width: int = 34) -> list[str]:
    """`text` on at most two lines of about `width` characters, the second ending in … when cut (cheap: no textwrap)."""
    if len(text) <= width:
        return [text]
    cut = text.rfind(" ", 0, width + 1)
    cut = cut if cut > width // 2 else width
    first, rest = text[:cut].rstrip(), text[cut:].strip()
    if len(rest) > width:
        end = rest.rfind(" ", 0, width - 1)
        rest = rest[: end if end > width // 2 else width - 2].rstrip() + " …"
    return [first, rest] if rest else [first]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _label(row: Any, diff: DiffKind, side: Side | None) -> str:
    a, b = _text(row.brief_a), _text(row.brief_b)
    brief = a if side == "a" or diff == "deleted" else b
    lines = _two_lines(brief or str(row.role))
    if diff == "relabelled" and side is None:
        lines.append("was: " + (a if len(a) <= 30 else a[:28].rstrip() + " …"))
    if diff == "changed":
        for measure in ("status", "outcome", "verdict"):
            if _flag(getattr(row, f"{measure}_changed", None)):
                before, after = (_text(getattr(row, f"{measure}_{side}")) or "—" for side in ("a", "b"))
                lines.append(f"{measure}: {before} → {after}")
                break
    return "\n".join(lines)


def comparison_graph(cmp: pd.DataFrame, *, side: Side | None = None, run: int | None = None) -> nx.DiGraph:
    """The aligned trees of `cmp` as a DiGraph with a `diff` per node (the union, or `side` "a" / "b" alone).

    Node ids are trace ids (b's for a pair in the union and on side b, a's on side a and for a
    deleted node). Attributes: `diff`, `kind`, `role` (main / agent / validator), `status`,
    `label`, `trace_id_a`, `trace_id_b`.
    """
    if side not in (None, "a", "b"):
        raise ConfigurationError("side", f"must be None (the union), 'a' or 'b', got {side!r}")
    rows = _one_run(cmp, run)
    kinds = diff_kinds(rows)
    graph = nx.DiGraph()
    id_of_a: dict[str, Hashable] = {}
    id_of_b: dict[str, Hashable] = {}
    for row, diff in zip(rows.itertuples(index=False), kinds):
        a, b = row.trace_id_a if isinstance(row.trace_id_a, str) else None, row.trace_id_b if isinstance(row.trace_id_b, str) else None
        if (side == "a" and a is None) or (side == "b" and b is None):
            continue
        node: Hashable = a if side == "a" or b is None else b
        if a is not None:
            id_of_a[a] = node
        if b is not None:
            id_of_b[b] = node
        if side == "a" or (side is None and b is None):
            parent = id_of_a.get(row.parent_a) if isinstance(row.parent_a, str) else None
        else:
            parent = id_of_b.get(row.parent_b) if isinstance(row.parent_b, str) else None
        status = row.status_b if side != "a" and b is not None else row.status_a
        graph.add_node(node, diff=diff, kind=row.kind, role=_ROLES.get(str(row.role), str(row.role)),
                       status=status if isinstance(status, str) else "pending", label=_label(row, diff, side),
                       trace_id_a=a, trace_id_b=b)
        if parent is not None:
            graph.add_edge(parent, node)
        elif "root" not in graph.graph:
            graph.graph["root"] = node
    return graph


def _title(graph: nx.DiGraph, which: str) -> str:
    counts = {kind: 0 for kind in DIFF_COLORS}
    for _, data in graph.nodes(data=True):
        counts[data["diff"]] += 1
    shown = " · ".join(f"{n} {kind}" for kind, n in counts.items() if n and kind != "same")
    size = graph.number_of_nodes()
    return f"{which} · {size} node{'s' if size != 1 else ''}" + (f" · {shown}" if shown else " · no differences")


def draw_comparison(
    cmp: pd.DataFrame,
    *,
    side_by_side: bool = False,
    run: int | None = None,
    orientation: Orientation = "auto",
    max_depth: int | None = None,
    max_nodes: int | None = None,
    fold: bool = True,
    labels: bool | None = None,
    highlight: HighlightInput = None,
    names: tuple[str, str] = ("a", "b"),
) -> Figure:
    """Draw the comparison `cmp` (`compare_trees`' frame): one tree with its differences coloured, or a | b.

    The union (default) shows b's tree with a's deleted nodes in place; `side_by_side=True` draws
    a (deleted, relabelled, changed coloured) left of b (inserted, relabelled, changed coloured).
    `highlight` (an `explain` result or node ids) is drawn on every tree that holds its nodes;
    folding and orientation are those of `cyber_agent/notebook/tree_draw.py:draw_tree`.
    """
    if not side_by_side:
        graph = comparison_graph(cmp, run=run)
        plan = plan_tree(graph, orientation=orientation, max_depth=max_depth, max_nodes=max_nodes, fold=fold, titled=True)
        fig = Figure(figsize=plan.figsize)
        render_tree(fig, plan, labels=labels, title=_title(graph, f"{names[0]} → {names[1]}"),
                    highlight=_maybe(graph, plan.graph, highlight))
        return fig
    graphs = [comparison_graph(cmp, side="a", run=run), comparison_graph(cmp, side="b", run=run)]
    plans = [plan_tree(g, orientation=orientation, max_depth=max_depth, max_nodes=max_nodes, fold=fold, titled=True)
             for g in graphs]
    width = sum(p.figsize[0] for p in plans)
    height = max(p.figsize[1] for p in plans)
    fig = Figure(figsize=(width, height))
    subfigures = cast("list[SubFigure]", list(cast(Any, fig.subfigures(1, 2, width_ratios=[p.figsize[0] for p in plans]))))
    for sub, graph, plan, name in zip(subfigures, graphs, plans, names):
        render_tree(sub, plan, labels=labels, title=_title(graph, name), highlight=_maybe(graph, plan.graph, highlight))
    return fig


def _maybe(graph: nx.DiGraph, drawn: nx.DiGraph, highlight: HighlightInput) -> Any:
    """The highlight on this tree, or None when the tree holds none of its nodes (the other side's run)."""
    if highlight is None:
        return None
    chain = getattr(highlight, "chain", None)
    nodes = list(chain) if chain is not None else list(highlight)  # type: ignore[arg-type]
    if not nodes or any(n not in graph for n in nodes):
        return None
    return highlight_of(graph, drawn, nodes if chain is None else highlight)
