"""How a tree delegated: size, depth, fan-out, own vs subtree work, ReDel's commitment heuristics.

One row per root, keyed by `trace_id` (the root's id) so it joins the traces / usage frames of
`cyber_agent/notebook/frames.py:TraceFrames` and the `trace_id` column of the sweep frame.
Validators are left out of the shape by default (they judge work, they are not delegation).

ReDel's heuristics (Zhu et al. 2024, `analysis/commitment_metrics.ipynb`):
**overcommitted** — the tree has at most `over_max_nodes` (2) nodes: the root did the work itself;
**undercommitted** — some root-to-leaf chain holds at least `chain_min` (3) consecutive nodes that
each have at most `chain_max_children` (1) child: needless hand-offs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from cyber_agent.analysis.tree import Tree, TreeNode, load_trees
from cyber_agent.errors import ConfigurationError
from cyber_agent.trace.protocols import TraceReader

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DELEGATION_TOOLS", "SHAPE_COLUMNS", "check_thresholds", "delegation_shape", "shape_of", "tree_shape"]

DELEGATION_TOOLS = frozenset({"agent", "delegate"})
"""Tools that hand work to a child: cyber_agent's `agent()`, ReDel's `delegate`."""

SHAPE_COLUMNS: tuple[str, ...] = (
    "trace_id", "nodes", "max_depth", "parents", "mean_fanout", "max_fanout", "longest_chain",
    "own_calls", "subtree_calls", "own_tokens", "subtree_tokens", "own_share",
    "overcommitted", "undercommitted", "delegated_without_work", "idle_delegators", "root_did_the_work",
)
"""Columns of `delegation_shape` (docs/compare.md describes each)."""

Work = Literal["llm_calls", "tokens"]


def _agents(tree: Tree, validators: bool) -> dict[str, list[str]]:
    """Children of every kept node (validators dropped with their subtrees unless `validators`)."""
    kept: dict[str, list[str]] = {}
    stack = [tree.root]
    while stack:
        node = tree.nodes[stack.pop()]
        children = [c for c in node.children if validators or tree.nodes[c].role != "validator"]
        kept[node.trace_id] = children
        stack.extend(children)
    return kept


def _did_work(node: TreeNode, delegation_tools: frozenset[str]) -> bool:
    return any(name not in delegation_tools for name in node.tool_names)


def shape_of(tree: Tree, *, over_max_nodes: int = 2, chain_min: int = 3, chain_max_children: int = 1,
             validators: bool = False, work: Work = "llm_calls",
             delegation_tools: frozenset[str] = DELEGATION_TOOLS) -> dict[str, Any]:
    """The shape row of one loaded tree (see the module doc and docs/compare.md for each column)."""
    children = _agents(tree, validators)
    root = tree.nodes[tree.root]
    depth: dict[str, int] = {tree.root: 0}
    run: dict[str, int] = {}  # consecutive nodes with <= chain_max_children children ending here
    order = [tree.root]
    for trace_id in order:  # breadth first: parents before children
        narrow = len(children[trace_id]) <= chain_max_children
        parent = tree.nodes[trace_id].parent if trace_id != tree.root else None
        run[trace_id] = (run.get(parent, 0) + 1 if parent is not None else 1) if narrow else 0
        for child in children[trace_id]:
            depth[child] = depth[trace_id] + 1
            order.append(child)
    fanouts = [len(c) for c in children.values() if c]
    below = [tree.nodes[t] for t in order[1:]]
    own_calls, own_tokens = root.llm_calls, root.tokens
    subtree_calls, subtree_tokens = sum(n.llm_calls for n in below), sum(n.tokens for n in below)
    own, total = (own_calls, own_calls + subtree_calls) if work == "llm_calls" else (own_tokens, own_tokens + subtree_tokens)
    delegators = [tree.nodes[t] for t in order if children[t]]
    idle = [n for n in delegators if not _did_work(n, delegation_tools)]
    longest = max(run.values())
    return {
        "trace_id": tree.root, "nodes": len(order), "max_depth": max(depth.values()), "parents": len(fanouts),
        "mean_fanout": sum(fanouts) / len(fanouts) if fanouts else float("nan"),
        "max_fanout": max(fanouts, default=0), "longest_chain": longest,
        "own_calls": own_calls, "subtree_calls": subtree_calls, "own_tokens": own_tokens,
        "subtree_tokens": subtree_tokens, "own_share": own / total if total else float("nan"),
        "overcommitted": len(order) <= over_max_nodes, "undercommitted": longest >= chain_min,
        "delegated_without_work": bool(children[tree.root]) and not _did_work(root, delegation_tools),
        "idle_delegators": len(idle), "root_did_the_work": total > 0 and own * 2 > total,
    }


def tree_shape(trees: Sequence[Tree], **options: Any) -> pd.DataFrame:
    """One shape row per loaded tree (options as for `shape_of`)."""
    import pandas as pd

    frame = pd.DataFrame([shape_of(tree, **options) for tree in trees], columns=list(SHAPE_COLUMNS))
    for name in ("nodes", "max_depth", "parents", "max_fanout", "longest_chain", "own_calls", "subtree_calls",
                 "own_tokens", "subtree_tokens", "idle_delegators"):
        frame[name] = frame[name].astype("int64")
    for name in ("overcommitted", "undercommitted", "delegated_without_work", "root_did_the_work"):
        frame[name] = frame[name].astype(bool)
    return frame


async def delegation_shape(store: TraceReader, roots: Sequence[str] | str, *, over_max_nodes: int = 2,
                           chain_min: int = 3, chain_max_children: int = 1, validators: bool = False,
                           work: Work = "llm_calls",
                           delegation_tools: frozenset[str] = DELEGATION_TOOLS) -> pd.DataFrame:
    """One row per root of `roots` in `store`: the tree's delegation shape, joinable on `trace_id`.

    `over_max_nodes`, `chain_min` and `chain_max_children` are ReDel's thresholds; `work` picks
    what `own_share` and `root_did_the_work` count (`llm_calls`, which imported runs without
    usage still have, or `tokens`); `delegation_tools` are the tools that only hand work on.
    """
    if isinstance(roots, str):
        roots = [roots]
    check_thresholds(over_max_nodes=over_max_nodes, chain_min=chain_min, chain_max_children=chain_max_children, work=work)
    trees = await load_trees(store, roots)
    return tree_shape(trees, over_max_nodes=over_max_nodes, chain_min=chain_min, chain_max_children=chain_max_children,
                      validators=validators, work=work, delegation_tools=frozenset(delegation_tools))


def check_thresholds(*, over_max_nodes: int, chain_min: int, chain_max_children: int, work: str) -> None:
    """Refuse thresholds that are not non-negative ints (`chain_min` >= 1) and an unknown work measure."""
    for name, value in (("over_max_nodes", over_max_nodes), ("chain_min", chain_min),
                        ("chain_max_children", chain_max_children)):
        if type(value) is not int or value < (1 if name == "chain_min" else 0):
            raise ConfigurationError(name, f"must be a non-negative int (chain_min >= 1), got {value!r}")
    if work not in ("llm_calls", "tokens"):
        raise ConfigurationError("work", f"must be 'llm_calls' or 'tokens', got {work!r}")
