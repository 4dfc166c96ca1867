"""Analysis of stored trees: align two runs, measure how a tree delegated, name where it went wrong (docs/compare.md).

    from cyber_agent.analysis import compare_trees, compare_runs, delegation_shape
    frame = await compare_trees(store, root_a, other_store, root_b)   # one row per aligned node
    shape = await delegation_shape(store, roots)                       # one row per root
    where = await explain(store, root)                                 # first node and step that went wrong

Everything reads through the TraceStore API (`read_records`), so imported trees compare too.
"""

from cyber_agent.analysis.align import ALIGNMENT_COLUMNS, align_trees, compare_runs, compare_trees, comparison_counts
from cyber_agent.analysis.explain import Attribution, EvidenceMode, explain
from cyber_agent.analysis.shape import SHAPE_COLUMNS, delegation_shape, shape_of, tree_shape
from cyber_agent.analysis.tree import Tree, TreeNode, build_tree, load_tree, load_trees, node_label, normalise_brief

__all__ = [
    "ALIGNMENT_COLUMNS",
    "Attribution",
    "EvidenceMode",
    "SHAPE_COLUMNS",
    "Tree",
    "TreeNode",
    "align_trees",
    "build_tree",
    "compare_runs",
    "compare_trees",
    "comparison_counts",
    "delegation_shape",
    "explain",
    "load_tree",
    "load_trees",
    "node_label",
    "normalise_brief",
    "shape_of",
    "tree_shape",
]
