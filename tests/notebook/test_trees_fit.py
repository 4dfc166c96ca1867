"""Big trees fold into count nodes and get a figure of bounded size."""

from __future__ import annotations

import random

import networkx as nx
import pytest
from matplotlib.collections import PathCollection

from cyber_agent.notebook import draw_goal_tree, draw_tree
from cyber_agent.notebook.tree_draw import DEFAULT_MAX_NODES
from cyber_agent.notebook.tree_fit import FOLDED_ROLE, MAX_HEIGHT, MAX_WIDTH, fold_tree


def wide_tree(n: int, seed: int = 5, *, kind: str = "trace") -> nx.DiGraph:
    """A recursive-run-shaped tree: 3–8 children per node, about a fifth of them failed."""
    rng = random.Random(seed)
    graph = nx.DiGraph(root=0)
    graph.add_node(0, status="completed", role="main", label="main", kind=kind, tokens=10)
    frontier, count = [0], 1
    while count < n:
        parent = frontier.pop(0)
        for _ in range(rng.randint(3, 8)):
            if count >= n:
                break
            status = "failed" if rng.random() < 0.2 else "completed"
            graph.add_node(count, status=status, role="explore", label=f"{count} explore\\nsome title", kind=kind, tokens=10)
            graph.add_edge(parent, count)
            frontier.append(count)
            count += 1
    return graph


def _folds(graph: nx.DiGraph) -> list:
    return [n for n, d in graph.nodes(data=True) if d.get("role") == FOLDED_ROLE]


def test_a_tree_that_fits_is_returned_as_it_is():
    graph = wide_tree(30)
    assert fold_tree(graph, 0, max_leaves=100, max_nodes=100) is graph


@pytest.mark.parametrize(("leaves", "nodes", "depth"), [(40, 60, None), (12, 500, None), (100, 500, 2), (3, 3, None)])
def test_folding_keeps_every_node_counted_within_the_limits(leaves, nodes, depth):
    graph = wide_tree(1000)
    folded = fold_tree(graph, 0, max_leaves=leaves, max_nodes=nodes, max_depth=depth)
    folds = _folds(folded)
    assert folded.number_of_nodes() <= nodes
    assert sum(1 for n in folded if folded.out_degree(n) == 0) <= leaves
    kept = [n for n in folded if n not in folds]
    assert all(graph.nodes[n] == folded.nodes[n] for n in kept)
    assert len(kept) + sum(folded.nodes[f]["count"] for f in folds) == 1000  # nothing lost, nothing counted twice
    hidden_failed = sum(1 for n in graph if n not in set(kept) and graph.nodes[n]["status"] == "failed")
    assert sum(folded.nodes[f]["failed"] for f in folds) == hidden_failed
    depths = nx.shortest_path_length(folded, 0)
    if depth is not None:
        assert max(depths[n] for n in kept) <= depth
    for fold in folds:  # a count node hangs under the parent whose children it stands for
        assert list(folded.predecessors(fold)) == [fold[1]] and folded.nodes[fold]["label"].startswith("+")


def test_a_root_with_a_thousand_children_shows_the_first_ones_and_a_count():
    graph = nx.star_graph(999, create_using=nx.DiGraph)
    nx.set_node_attributes(graph, "completed", "status")
    folded = fold_tree(graph, 0, max_leaves=20, max_nodes=60)
    assert list(folded.successors(0))[:-1] == list(range(1, 20))
    (fold,) = _folds(folded)
    assert folded.nodes[fold]["count"] == 980 and folded.nodes[fold]["label"] == "+980 traces"


def test_limits_below_two_nodes_are_refused():
    with pytest.raises(ValueError, match="max_nodes=1"):
        fold_tree(wide_tree(10), 0, max_nodes=1)


def _points(fig) -> int:
    (points,) = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    return len(points.get_offsets())


def test_a_thousand_trace_tree_draws_a_bounded_labelled_figure():
    fig = draw_tree(wide_tree(1000), orientation="auto")
    width, height = fig.get_size_inches()
    assert width <= MAX_WIDTH and height <= MAX_HEIGHT
    shown = _points(fig)
    assert 20 <= shown <= DEFAULT_MAX_NODES
    assert len(fig.axes[0].texts) == shown  # every node shown is labelled
    assert "folded (+N)" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    bigger = draw_tree(wide_tree(1000), orientation="auto", max_nodes=150)
    assert DEFAULT_MAX_NODES < _points(bigger) <= 150
    shallow = draw_tree(wide_tree(1000), orientation="auto", max_depth=1)
    children = wide_tree(1000).out_degree(0)
    assert _points(shallow) == 1 + 2 * children  # the root, its children, a count node under each child


def test_a_thousand_goal_tree_draws_a_bounded_figure():
    graph = wide_tree(1000, kind="goal")
    for node, data in graph.nodes(data=True):
        data.update(role="goal", label=f"{node}. Compute the revenue of one region in\\ndata/sales.csv\\n→ Region: 152.00")
    fig = draw_goal_tree(graph)
    width, height = fig.get_size_inches()
    assert width <= MAX_WIDTH and height <= MAX_HEIGHT
    assert _points(fig) <= DEFAULT_MAX_NODES and len(fig.axes[0].texts) == _points(fig)
    assert any(t.get_text().startswith("+") and "goals" in t.get_text() for t in fig.axes[0].texts)


def test_auto_orientation_is_top_down_only_when_everything_fits():
    small = draw_tree(wide_tree(6), orientation="auto")
    big = draw_tree(wide_tree(200), orientation="auto")
    assert small.get_size_inches()[0] > small.get_size_inches()[1]  # wider than tall: top-down
    assert big.get_size_inches()[1] > big.get_size_inches()[0]      # taller than wide: left to right


def test_a_deep_tree_left_to_right_gets_narrower_labels_and_more_levels():
    from cyber_agent.notebook.tree_fit import wrap_label

    graph = nx.DiGraph([(0, 1), (0, 2), (0, 3)] + [(n, n + 3) for n in range(1, 28)])  # three chains, 10 levels deep
    for node, data in graph.nodes(data=True):
        data.update(status="completed", role="goal", kind="goal",
                    label=f"{node}. Compute the revenue of one region from the ledger")
    graph.graph["root"] = 0
    fig = draw_tree(graph, orientation="horizontal")
    (points,) = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    levels = {round(float(x), 3) for x, _ in points.get_offsets()}
    assert len(levels) >= 6  # 40-character labels would leave room for 2 levels on a page-wide (10 in) figure
    lines = [line for text in fig.axes[0].texts for line in text.get_text().split("\n")]
    assert max(len(line) for line in lines) <= 20 and max(t.get_text().count("\n") for t in fig.axes[0].texts) <= 3
    assert wrap_label("one two three four five six seven eight nine ten", 9, max_lines=3) == "one two\nthree\nfour …"


def test_a_label_cut_short_twice_ends_in_one_ellipsis():
    from cyber_agent.notebook.tree_fit import wrap_label

    # A title shortened upstream ("… region …") and then cut to fewer lines: one "…" at the end, never "… …".
    label = wrap_label("Compute the revenue of one … region from the ledger …", 12, max_lines=2)
    assert label.endswith(" …") and "… …" not in label and label.count("…") <= 2, label
    assert wrap_label("alpha beta gamma …\ndelta epsilon …\nzeta …", 20, max_lines=2) == "alpha beta gamma …\ndelta epsilon …"
