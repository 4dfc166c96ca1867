"""Trace and goal graphs, the tidy layout, and drawings built on Figure (not pyplot)."""

from __future__ import annotations

import random

import networkx as nx
import pytest
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.figure import Figure

from cyber_agent.notebook import draw_goal_tree, draw_trace_tree, draw_tree, goal_graph, tidy_tree_layout, trace_graph

from nb_helpers import CHILD, ROOT, VALIDATOR


def random_tree(n: int, seed: int = 3) -> nx.DiGraph:
    rng = random.Random(seed)
    graph = nx.DiGraph()
    graph.add_node(0, status="completed", role="main", label="root")
    for i in range(1, n):
        graph.add_node(i, status=rng.choice(["completed", "failed", "running"]), role="explore", label=f"n{i}")
        graph.add_edge(rng.randrange(i), i)
    return graph


@pytest.mark.parametrize("graph", [random_tree(300), nx.balanced_tree(3, 4, create_using=nx.DiGraph)])
def test_tidy_layout_puts_leaves_in_dfs_order_and_parents_over_children(graph):
    pos = tidy_tree_layout(graph, 0)
    depth = nx.shortest_path_length(graph, 0)
    assert set(pos) == set(graph)
    leaves = [n for n in nx.dfs_preorder_nodes(graph, 0) if graph.out_degree(n) == 0]
    assert [pos[n][0] for n in leaves] == [float(i) for i in range(len(leaves))]
    for node in graph:
        assert pos[node][1] == -depth[node]
        children = list(graph.successors(node))
        if children:
            assert pos[node][0] == (pos[children[0]][0] + pos[children[-1]][0]) / 2


def test_tidy_layout_handles_forests_and_deep_chains():
    forest = nx.DiGraph([(0, 1), (0, 2), (10, 11)])
    pos = tidy_tree_layout(forest)
    assert pos[11][0] > max(pos[1][0], pos[2][0])
    chain = nx.path_graph(5000, create_using=nx.DiGraph)
    assert tidy_tree_layout(chain, 0)[4999] == (0.0, -4999.0)


def test_trace_graph_of_the_demo(demo_store, demo_root):
    graph = trace_graph(demo_store, demo_root)
    assert graph.number_of_nodes() == 5
    assert sorted(graph.successors(demo_root)) == sorted(n for n in graph if n != demo_root)
    root = graph.nodes[demo_root]
    assert (root["role"], root["status"], root["depth"]) == ("main", "completed", 0)
    child = graph.nodes[next(iter(graph.successors(demo_root)))]
    assert child["role"] == "explore" and child["depth"] == 1 and child["tokens"] > 0
    assert child["label"].startswith("1 explore\nregion East")
    assert sum(graph.nodes[n]["tokens"] for n in graph) > root["tokens"]


def test_validators_hang_under_the_trace_they_validate(recursive_store):
    store, root = recursive_store
    graph = trace_graph(store, root)
    assert list(graph.edges) == [(ROOT, CHILD), (CHILD, VALIDATOR)]
    assert graph.nodes[VALIDATOR]["role"] == "validator" and graph.nodes[VALIDATOR]["is_validator"]
    assert graph.nodes[VALIDATOR]["depth"] == 2


def test_goal_graph_with_and_without_sub_agents(demo_store, demo_root):
    plain = goal_graph(demo_store, demo_root)
    assert sorted(plain.edges) == [("1", "2"), ("1", "3"), ("1", "4")]
    assert plain.nodes["3"]["role"] == "agent_call"
    assert all(plain.nodes[n]["status"] == "completed" for n in plain)
    full = goal_graph(demo_store, demo_root, sub_traces=True)
    subs = list(full.successors("3"))
    assert len(subs) == 4 and all(full.nodes[s]["kind"] == "trace" for s in subs)
    assert all(list(full.successors(s)) == [f"{s}/1"] for s in subs)


def _artists(fig: Figure) -> tuple[list, list]:
    ax = fig.axes[0]
    return ([c for c in ax.collections if isinstance(c, LineCollection)],
            [c for c in ax.collections if isinstance(c, PathCollection)])


def test_drawings_are_figures_with_one_edge_collection_and_one_scatter(demo_store, demo_root):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    for fig in (draw_trace_tree(demo_store, demo_root), draw_goal_tree(demo_store, demo_root)):
        assert isinstance(fig, Figure)
        lines, points = _artists(fig)
        assert len(lines) == 1 and len(points) == 1
        assert fig.axes[0].get_legend() is not None
    assert plt.get_fignums() == before  # nothing registered with pyplot, nothing shown behind the caller's back


def test_unfolded_big_trees_label_only_what_stays_readable():
    graph = random_tree(1000)
    fig = draw_tree(graph, fold=False)
    lines, points = _artists(fig)
    assert len(lines[0].get_segments()) == 999
    assert len(points[0].get_offsets()) == 1000
    assert 1 <= len(fig.axes[0].texts) <= 60
    small = draw_tree(random_tree(20))
    assert len(small.axes[0].texts) == 20


def test_drawing_needs_an_id_unless_given_a_graph(demo_store):
    from cyber_agent.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="trace_id"):
        draw_trace_tree(demo_store)
