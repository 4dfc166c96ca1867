"""Ordered-tree alignment of two stored runs: matched, relabelled, inserted and deleted nodes.

The label of a node (`cyber_agent/analysis/tree.py:node_label`) is its role (root / child /
validator), its position among its siblings and its normalised brief. The alignment is top-down
(Selkow's model: a node pairs only with a node whose parent it pairs with; deleting a node deletes
its subtree): the roots pair; then, for every pair, the two ordered lists of children are aligned
by a sequence alignment (a DP over siblings) where

- equal role and equal brief cost 0 (**matched**),
- equal role and briefs whose word sets overlap by at least `relabel_threshold` (Jaccard) cost
  `1 - similarity` (**relabelled**: the same node with a changed brief),
- anything else cannot pair, and deleting (inserting) a sibling costs the size of its subtree
  (**deleted** / **inserted**, with every node below it).

Order is kept (that is what the position in the label means): a matched pair's children are
aligned in turn. Each level's DP uses node labels and subtree sizes, not the cost of aligning
the children's own subtrees (Selkow's exact cost needs every pair of subtrees: O(n²) pairs),
so the cost is O(Σ k_a·k_b) over paired parents with k their child counts, after equal
prefixes and suffixes of siblings are paired without a DP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cyber_agent.analysis.tree import Tree, TreeNode, load_tree
from cyber_agent.errors import ConfigurationError
from cyber_agent.trace.protocols import TraceReader

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ALIGNMENT_COLUMNS", "Kind", "align_trees", "compare_runs", "compare_trees", "comparison_counts"]

Kind = Literal["matched", "relabelled", "deleted", "inserted"]

_CATEGORICAL = ("status", "outcome", "verdict")
_NUMERIC = ("tokens", "cost", "llm_calls", "duration_s")
ALIGNMENT_COLUMNS: tuple[str, ...] = (
    "kind", "role", "trace_id_a", "trace_id_b", "parent_a", "parent_b", "depth_a", "depth_b", "position_a",
    "position_b", "brief_a", "brief_b", "similarity",
    *(f"{m}_{s}" for m in _CATEGORICAL for s in ("a", "b", "changed")),
    *(f"{m}_{s}" for m in _NUMERIC for s in ("a", "b", "delta")),
)
"""Columns of the frame of `align_trees` / `compare_trees` (docs/compare.md describes each)."""

DEFAULT_RELABEL_THRESHOLD = 0.5


@dataclass(frozen=True, slots=True)
class _Pair:
    kind: Kind
    a: TreeNode | None
    b: TreeNode | None
    similarity: float | None


class _Words:
    """Word sets of briefs, computed once per brief."""

    def __init__(self) -> None:
        self._cache: dict[str, frozenset[str]] = {}

    def similarity(self, x: str, y: str) -> float:
        if x == y:
            return 1.0
        wx, wy = self._of(x), self._of(y)
        if not wx and not wy:
            return 1.0
        union = len(wx | wy)
        return len(wx & wy) / union if union else 0.0

    def _of(self, text: str) -> frozenset[str]:
        words = self._cache.get(text)
        if words is None:
            words = self._cache[text] = frozenset(text.split())
        return words


def _align_siblings(a: list[TreeNode], b: list[TreeNode], words: _Words, threshold: float) -> list[_Pair]:
    """Order-keeping alignment of two sibling lists (minimum total cost; ties prefer pairing)."""
    out_head: list[_Pair] = []
    start = 0
    while start < len(a) and start < len(b) and a[start].role == b[start].role and a[start].brief == b[start].brief:
        out_head.append(_Pair("matched", a[start], b[start], 1.0))
        start += 1
    end_a, end_b = len(a), len(b)
    tail: list[_Pair] = []
    while end_a > start and end_b > start and a[end_a - 1].role == b[end_b - 1].role \
            and a[end_a - 1].brief == b[end_b - 1].brief:
        end_a, end_b = end_a - 1, end_b - 1
        tail.append(_Pair("matched", a[end_a], b[end_b], 1.0))
    mid_a, mid_b = a[start:end_a], b[start:end_b]
    m, n = len(mid_a), len(mid_b)
    middle: list[_Pair] = []
    if m == 0 or n == 0:
        middle = [_Pair("deleted", x, None, None) for x in mid_a] + [_Pair("inserted", None, y, None) for y in mid_b]
    else:
        inf = math.inf
        sims: list[list[float]] = []
        subs: list[list[float]] = []
        for x in mid_a:
            row_sim, row_sub = [], []
            for y in mid_b:
                if x.role != y.role:
                    s, c = 0.0, inf
                elif x.brief == y.brief:
                    s, c = 1.0, 0.0
                else:
                    s = words.similarity(x.brief, y.brief)
                    c = 1.0 - s if s >= threshold else inf
                row_sim.append(s)
                row_sub.append(c)
            sims.append(row_sim)
            subs.append(row_sub)
        # cost[i][j]: aligning mid_a[i:] with mid_b[j:] (suffix DP, so the walk below runs forward)
        cost = [[0.0] * (n + 1) for _ in range(m + 1)]
        for j in range(n - 1, -1, -1):
            cost[m][j] = cost[m][j + 1] + mid_b[j].size
        for i in range(m - 1, -1, -1):
            row, below, size_a, sub = cost[i], cost[i + 1], mid_a[i].size, subs[i]
            row[n] = below[n] + size_a
            for j in range(n - 1, -1, -1):
                best = sub[j] + below[j + 1]
                delete = below[j] + size_a
                insert = row[j + 1] + mid_b[j].size
                if delete < best:
                    best = delete
                if insert < best:
                    best = insert
                row[j] = best
        i = j = 0
        while i < m or j < n:
            if i < m and j < n and subs[i][j] != inf and cost[i][j] == subs[i][j] + cost[i + 1][j + 1]:
                kind: Kind = "matched" if subs[i][j] == 0.0 else "relabelled"
                middle.append(_Pair(kind, mid_a[i], mid_b[j], sims[i][j]))
                i, j = i + 1, j + 1
            elif i < m and cost[i][j] == cost[i + 1][j] + mid_a[i].size:
                middle.append(_Pair("deleted", mid_a[i], None, None))
                i += 1
            else:
                middle.append(_Pair("inserted", None, mid_b[j], None))
                j += 1
    return out_head + middle + tail[::-1]


def _pairs(tree_a: Tree, tree_b: Tree, threshold: float) -> list[_Pair]:
    words = _Words()
    ra, rb = tree_a.nodes[tree_a.root], tree_b.nodes[tree_b.root]
    root_kind: Kind = "matched" if ra.brief == rb.brief else "relabelled"
    out: list[_Pair] = []
    stack = [_Pair(root_kind, ra, rb, words.similarity(ra.brief, rb.brief))]
    while stack:
        pair = stack.pop()
        out.append(pair)
        if pair.a is not None and pair.b is not None:
            children = _align_siblings([tree_a.nodes[c] for c in pair.a.children],
                                       [tree_b.nodes[c] for c in pair.b.children], words, threshold)
            stack.extend(reversed(children))
        elif pair.a is not None:
            stack.extend(_Pair("deleted", tree_a.nodes[c], None, None) for c in reversed(pair.a.children))
        elif pair.b is not None:
            stack.extend(_Pair("inserted", None, tree_b.nodes[c], None) for c in reversed(pair.b.children))
    return out


def _delta(x: Any, y: Any) -> Any:
    return None if x is None or y is None else y - x


def align_trees(tree_a: Tree, tree_b: Tree, *, relabel_threshold: float = DEFAULT_RELABEL_THRESHOLD) -> pd.DataFrame:
    """One row per aligned node of two loaded trees (`cyber_agent/analysis/tree.py:load_tree`), in preorder.

    `kind` is matched / relabelled (both sides set), deleted (only `_a`) or inserted (only `_b`);
    `*_delta` is b − a, `*_changed` compares a matched pair's status, outcome and verdict.
    """
    import pandas as pd

    if not 0.0 < relabel_threshold <= 1.0:
        raise ConfigurationError("relabel_threshold", f"must be in (0, 1], got {relabel_threshold!r}")
    columns: dict[str, list[Any]] = {name: [] for name in ALIGNMENT_COLUMNS}
    for pair in _pairs(tree_a, tree_b, relabel_threshold):
        a, b = pair.a, pair.b
        both = a is not None and b is not None
        some = a if a is not None else b
        assert some is not None
        values: dict[str, Any] = {
            "kind": pair.kind, "role": some.role,
            "trace_id_a": a.trace_id if a else None, "trace_id_b": b.trace_id if b else None,
            "parent_a": a.parent if a else None, "parent_b": b.parent if b else None,
            "depth_a": a.depth if a else None, "depth_b": b.depth if b else None,
            "position_a": a.position if a else None, "position_b": b.position if b else None,
            "brief_a": a.brief if a else None, "brief_b": b.brief if b else None, "similarity": pair.similarity,
        }
        for m in _CATEGORICAL:
            x, y = (getattr(a, m) if a else None), (getattr(b, m) if b else None)
            values[f"{m}_a"], values[f"{m}_b"] = x, y
            values[f"{m}_changed"] = (x != y) if both else None
        for m in _NUMERIC:
            x, y = (getattr(a, m) if a else None), (getattr(b, m) if b else None)
            values[f"{m}_a"], values[f"{m}_b"], values[f"{m}_delta"] = x, y, _delta(x, y)
        for name in ALIGNMENT_COLUMNS:
            columns[name].append(values[name])
    frame = pd.DataFrame(columns, columns=list(ALIGNMENT_COLUMNS))
    for name in ("depth_a", "depth_b", "position_a", "position_b", "tokens_a", "tokens_b", "tokens_delta",
                 "llm_calls_a", "llm_calls_b", "llm_calls_delta"):
        frame[name] = frame[name].astype("Int64")
    for name in ("similarity", "cost_a", "cost_b", "cost_delta", "duration_s_a", "duration_s_b", "duration_s_delta"):
        frame[name] = frame[name].astype("float64")
    for m in _CATEGORICAL:
        frame[f"{m}_changed"] = frame[f"{m}_changed"].astype("boolean")
    return frame


async def compare_trees(store_a: TraceReader, root_a: str, store_b: TraceReader, root_b: str, *,
                        relabel_threshold: float = DEFAULT_RELABEL_THRESHOLD) -> pd.DataFrame:
    """Align the tree under `root_a` in `store_a` with the tree under `root_b` in `store_b` (any stores).

    The frame is that of `align_trees`: one row per node of either tree.
    """
    tree_a, tree_b = await load_tree(store_a, root_a), await load_tree(store_b, root_b)
    return align_trees(tree_a, tree_b, relabel_threshold=relabel_threshold)


async def compare_runs(runs: Sequence[tuple[TraceReader, str]], *, baseline: int = 0,
                       relabel_threshold: float = DEFAULT_RELABEL_THRESHOLD) -> pd.DataFrame:
    """Align every run of `runs` (pairs of store and root id) with `runs[baseline]`.

    One frame: the rows of `align_trees` for each other run, with `run` (its index in `runs`),
    `root_a` (the baseline's root) and `root_b` in front.
    """
    import pandas as pd

    if len(runs) < 2:
        raise ConfigurationError("runs", f"compare_runs needs at least two (store, root_id) pairs, got {len(runs)}")
    if not 0 <= baseline < len(runs):
        raise ConfigurationError("baseline", f"must index runs (0..{len(runs) - 1}), got {baseline!r}")
    trees = [await load_tree(store, root) for store, root in runs]
    frames = []
    for index, tree in enumerate(trees):
        if index == baseline:
            continue
        frame = align_trees(trees[baseline], tree, relabel_threshold=relabel_threshold)
        frame.insert(0, "root_b", tree.root)
        frame.insert(0, "root_a", trees[baseline].root)
        frame.insert(0, "run", index)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def comparison_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Nodes per kind (matched / relabelled / deleted / inserted): one row per run of `compare_runs`, or one row."""
    kinds = ["matched", "relabelled", "deleted", "inserted"]
    by = frame["run"] if "run" in frame.columns else frame["kind"].map(lambda _: 0)
    counts = frame.groupby([by, "kind"]).size().unstack(fill_value=0)
    return counts.reindex(columns=kinds, fill_value=0).rename_axis(index="run", columns=None)
