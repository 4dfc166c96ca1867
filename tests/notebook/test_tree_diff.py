"""Differences and the explain path drawn: the colour of each drawn node is that of its diff (artists, not pixels)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.colors import to_rgba

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))

from seeded import FaultInReport, seeded_run  # noqa: E402
from tree_gen import plant, random_tree  # noqa: E402

from cyber_agent.analysis import align_trees, explain  # noqa: E402
from cyber_agent.errors import ConfigurationError  # noqa: E402
from cyber_agent.notebook.tree_diff import comparison_graph, draw_comparison  # noqa: E402
from cyber_agent.notebook.tree_draw import (  # noqa: E402
    DIFF_COLORS,
    HIGHLIGHT_COLOR,
    NODES_GID,
    draw_tree,
    drawn_colors,
    plan_tree,
)
from cyber_agent.notebook.trees import draw_trace_tree, trace_graph  # noqa: E402


def _planted(seed: int = 4):
    rng = random.Random(seed)
    tree_a = random_tree(rng, 40, max_children=4, prefix="a", validators=False)
    planted = plant(tree_a, rng, inserts=3, deletes=2, relabels=3)
    changed_a, changed_b = next((a, b) for a, b in planted.matched.items() if a != tree_a.root)
    tree_a.nodes[changed_a].status, planted.tree_b.nodes[changed_b].status = "completed", "failed"
    expected = {b: "same" for b in planted.matched.values()}
    expected |= {b: "relabelled" for b in planted.relabelled.values()}
    expected |= {b: "inserted" for b in planted.inserted}
    expected |= {a: "deleted" for a in planted.deleted}
    expected[changed_b] = "changed"
    return align_trees(tree_a, planted.tree_b), expected, planted


def _colours_by_node(ax, plan) -> dict:
    at = drawn_colors(ax)
    return {node: at[tuple(float(v) for v in plan.xy(node))] for node in plan.nodes}


def test_the_union_colours_every_planted_difference():
    cmp, expected, _ = _planted()
    graph = comparison_graph(cmp)
    assert {n: d["diff"] for n, d in graph.nodes(data=True)} == expected
    assert graph.number_of_nodes() == len(cmp) and graph.number_of_edges() == len(cmp) - 1
    figure = draw_comparison(cmp, fold=False, orientation="vertical")
    [ax] = figure.axes
    plan = plan_tree(graph, orientation="vertical", fold=False, titled=True)
    colours = _colours_by_node(ax, plan)
    assert colours == {node: to_rgba(DIFF_COLORS[diff]) for node, diff in expected.items()}
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"inserted", "deleted", "relabelled", "changed", "same"} <= set(legend)


def test_a_deleted_node_hangs_under_its_parents_partner():
    cmp, expected, planted = _planted()
    graph = comparison_graph(cmp)
    for deleted in (n for n, kind in expected.items() if kind == "deleted"):
        row = cmp[cmp["trace_id_a"] == deleted].iloc[0]
        [parent] = graph.predecessors(deleted)
        partner = cmp[cmp["trace_id_a"] == row["parent_a"]]
        assert parent == (partner["trace_id_b"].iloc[0] if partner["trace_id_b"].notna().iloc[0] else row["parent_a"])


def test_side_by_side_colours_each_tree_with_its_own_differences():
    cmp, expected, _ = _planted()
    figure = draw_comparison(cmp, side_by_side=True, fold=False, orientation="vertical")
    left, right = figure.subfigs
    for sub, side, absent in ((left, "a", "inserted"), (right, "b", "deleted")):
        graph = comparison_graph(cmp, side=side)
        [ax] = sub.axes
        colours = _colours_by_node(ax, plan_tree(graph, orientation="vertical", fold=False, titled=True))
        diffs = {n: d["diff"] for n, d in graph.nodes(data=True)}
        assert absent not in diffs.values() and colours == {n: to_rgba(DIFF_COLORS[d]) for n, d in diffs.items()}
        ids = set(cmp[f"trace_id_{side}"].dropna())
        assert set(graph) == ids
    right_diffs = {d["diff"] for _, d in comparison_graph(cmp, side="b").nodes(data=True)}
    assert right_diffs == {"same", "changed", "relabelled", "inserted"}


def test_a_compare_runs_frame_needs_one_run_and_bad_frames_are_refused():
    cmp, _, _ = _planted()
    both = pd.concat([cmp.assign(run=1), cmp.assign(run=2)], ignore_index=True)
    assert comparison_graph(both, run=2).number_of_nodes() == len(cmp)
    with pytest.raises(ConfigurationError, match="run"):
        comparison_graph(both)
    with pytest.raises(ConfigurationError, match="lacks columns"):
        comparison_graph(cmp.drop(columns=["kind"]))
    with pytest.raises(ConfigurationError, match="side"):
        comparison_graph(cmp, side="c")  # type: ignore[arg-type]


def _rings(ax) -> dict:
    scatter = next(c for c in ax.collections if c.get_gid() == NODES_GID)
    return {(float(x), float(y)): (tuple(edge), float(width)) for (x, y), edge, width in
            zip(scatter.get_offsets(), scatter.get_edgecolors(), scatter.get_linewidths())}


async def test_the_explain_path_is_highlighted_in_the_trace_drawing():
    run = await seeded_run(FaultInReport("region North"))
    found = await explain(run.store, run.root)
    graph = trace_graph(run.store, run.root)
    figure = draw_trace_tree(graph, highlight=found)
    [ax] = figure.axes
    plan = plan_tree(graph, orientation="auto", titled=True)
    rings = _rings(ax)
    lit = {node for node in plan.nodes if rings[tuple(float(v) for v in plan.xy(node))][0] == to_rgba(HIGHLIGHT_COLOR)}
    assert lit == set(found.chain) and len(found.chain) == 3
    assert rings[tuple(float(v) for v in plan.xy(found.trace_id))][1] > rings[tuple(float(v) for v in plan.xy(run.root))][1]
    [edges] = [c for c in ax.collections if c.get_gid() == "highlight-edges"]
    assert len(edges.get_segments()) == len(found.chain) - 1
    assert any("evidence_fail" in t.get_text() for t in ax.get_legend().get_texts())


async def test_a_folded_culprit_lights_its_count_node_and_unknown_ids_are_refused():
    run = await seeded_run(FaultInReport("region South"))
    found = await explain(run.store, run.root)
    graph = trace_graph(run.store, run.root)
    plan = plan_tree(graph, orientation="auto", titled=True, max_nodes=4)
    assert found.trace_id not in plan.graph
    figure = draw_tree(graph, orientation="auto", title="t", max_nodes=4, highlight=found)
    rings = _rings(figure.axes[0])
    lit = {node for node in plan.nodes if rings[tuple(float(v) for v in plan.xy(node))][0] == to_rgba(HIGHLIGHT_COLOR)}
    assert any(isinstance(node, tuple) and node[0] == "folded" for node in lit) and run.root in lit
    with pytest.raises(ConfigurationError, match="highlight"):
        draw_tree(graph, highlight=["not-a-node"])
