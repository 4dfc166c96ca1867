"""Node names of trace trees: unique paths, titles that tell siblings apart, verdicts."""

from __future__ import annotations

from collections import Counter
import networkx as nx
import pandas as pd

from cyber_agent.notebook import goal_graph, load_export, to_frames, trace_graph
from cyber_agent.trace import Goal
from cyber_agent.notebook.tree_labels import distinct_titles, trace_objective, trace_paths

from nb_helpers import CHILD, REPO, ROOT, VALIDATOR

EXPORT = REPO / "data" / "exports" / "recursive_demo.jsonl"
REGIONS = [f"Compute the revenue (units × unit_price) of region {r} in data/sales.csv" for r in ("East", "North", "West")]


def test_sibling_titles_keep_what_differs_with_a_word_of_context():
    assert distinct_titles(REGIONS) == ["region East", "region North", "region West"]
    long = ["Summarise the security findings of the payment service", "Summarise the security findings of the audit log"]
    assert distinct_titles(long) == ["payment service", "audit log"]


def test_titles_of_a_single_or_identical_sibling_are_the_text_shortened():
    (only,) = distinct_titles([REGIONS[0]])
    assert only.startswith("Compute the revenue") and only.endswith("…") and len(only) <= 30
    assert distinct_titles(["same task", "same task"]) == ["same task", "same task"]
    assert distinct_titles([]) == []


def test_objective_comes_from_the_brief_then_the_task():
    assert trace_objective("ignored", {"brief": {"objective": "  Sum   East "}}) == "Sum East"
    # A task text is never parsed for a brief: without a typed brief it is the first non-heading line.
    assert trace_objective("# Task brief\nObjective: Sum West\nReason: x", {}) == "Objective: Sum West"
    assert trace_objective("# Heading\n\nfirst real line\nsecond", None) == "first real line"
    assert trace_objective(None, None) == ""


def test_paths_number_agents_and_validators_apart():
    frame = pd.DataFrame({
        "trace_id": ["r", "a", "b", "av1", "a1", "av2", "rv1"],
        "parent_trace_id": [None, "r", "r", "a", "a", "a", "r"],
        "role": ["main", "explore", "explore", "validator", "explore", "validator", "validator"],
    })
    assert trace_paths(frame) == {"r": "root", "a": "1", "b": "2", "av1": "1.v1", "a1": "1.1", "av2": "1.v2", "rv1": "v1"}
    usage = frame.rename(columns={"parent_trace_id": "parent"})  # the usage frame names the column `parent`
    assert trace_paths(usage)["av2"] == "1.v2"


def test_the_recursive_demo_has_unique_labels_and_verdicts():
    (root,) = to_frames(EXPORT, messages=False).roots
    graph = trace_graph(load_export(EXPORT), root)
    levels = nx.shortest_path_length(graph, root)
    labels = [data["label"].split("\n")[0] for _, data in graph.nodes(data=True)]
    assert len(labels) == 16 and not [label for label, n in Counter(labels).items() if n > 1]
    by_path = {data["path"]: data for _, data in graph.nodes(data=True)}
    assert by_path["1.1"]["title"] == "region East" and by_path["1.4"]["title"] == "region South"
    assert by_path["1.1.v1"]["verdict"] == "fail" and by_path["1.1.v2"]["verdict"] == "pass"
    assert by_path["1.1.v1"]["label"].split("\n")[1] == "✗ fail · 0/1 criteria"
    assert by_path["1.1"]["verdict"] == "pass"  # its latest validation passed
    assert by_path["v1"]["checks"] == "2/2 criteria"
    assert by_path["root"]["label"].startswith("main ✓\nReport the revenue")
    for node, data in graph.nodes(data=True):  # the dots are the depth in the tree
        assert levels[node] == (0 if data["path"] == "root" else data["path"].count(".") + 1)


def test_a_failing_validation_marks_validator_and_judged_trace(recursive_store):
    store, root = recursive_store
    graph = trace_graph(store, root)
    assert graph.nodes[VALIDATOR]["verdict"] == "fail" and graph.nodes[VALIDATOR]["path"] == "1.v1"
    assert graph.nodes[CHILD]["verdict"] == "fail" and graph.nodes[CHILD]["label"].startswith("1 delegate ✗\nSum region East")
    assert graph.nodes[VALIDATOR]["checks"] == "1/2 criteria"
    assert graph.nodes[ROOT]["verdict"] is None


def _node_styles(fig, graph):
    """(fill, edge, width) of each node of a drawing, by node id (the scatter follows the layout's order)."""
    from matplotlib.collections import PathCollection
    from matplotlib.colors import to_hex

    from cyber_agent.notebook import tidy_tree_layout

    (points,) = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    root = graph.graph.get("root")
    order = list(tidy_tree_layout(graph, root if root in graph else None))
    fills, edges, widths = points.get_facecolors(), points.get_edgecolors(), points.get_linewidths()
    return {node: (to_hex(fills[i]), to_hex(edges[i]) if len(edges) > 1 else None, float(widths[i]))
            for i, node in enumerate(order)}


def test_verdicts_colour_validators_and_ring_the_judged_trace(recursive_store):
    from cyber_agent.notebook import draw_trace_tree
    from cyber_agent.notebook.trees import STATUS_COLORS, VERDICT_COLORS

    store, root = recursive_store
    graph = trace_graph(store, root)
    fig = draw_trace_tree(graph)
    styles = _node_styles(fig, graph)
    assert styles[VALIDATOR][0] == VERDICT_COLORS["fail"]                     # filled with its verdict
    assert styles[CHILD][0] == STATUS_COLORS["completed"]                     # the judged trace keeps its status fill
    assert styles[CHILD][1] == VERDICT_COLORS["fail"] and styles[CHILD][2] > 2  # ... and wears the verdict as a ring
    assert styles[ROOT][2] < 1
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "verdict ✗ fail" in legend and "completed" in legend and "running" in legend


async def test_goals_left_open_by_a_stopped_or_failed_trace_take_its_status():
    from cyber_agent.notebook import draw_goal_tree
    from cyber_agent.notebook.trees import STATUS_COLORS
    from cyber_agent.trace import InMemoryTraceStore

    from nb_helpers import add_trace

    store = InMemoryTraceStore()
    await add_trace(store, ROOT, status="stopped")
    await add_trace(store, CHILD, parent=ROOT, agent_type="explore", status="failed")
    await store.add_goal(ROOT, Goal(id="2", description="done before the stop"))
    await store.update_goal(ROOT, "2", status="completed")
    frames = to_frames(store, messages=False)
    graph = goal_graph(frames, ROOT)
    assert graph.nodes["1"]["status"] == "stopped" and graph.nodes["1"]["goal_status"] != "stopped"
    assert graph.nodes["2"]["status"] == "completed"  # a finished goal keeps its own status
    assert goal_graph(frames, CHILD).nodes["1"]["status"] == "failed"
    styles = _node_styles(draw_goal_tree(graph), graph)
    assert styles["1"][0] == STATUS_COLORS["stopped"]


def test_a_single_differing_word_keeps_its_context_unless_a_stopword():
    assert distinct_titles(["Check the hardware sales", "Check the software sales"]) == ["hardware", "software"]
    assert distinct_titles(["Recompute invoice batch 1", "Recompute invoice batch 2"]) == ["batch 1", "batch 2"]


def test_a_subtree_keeps_the_paths_of_the_whole_tree():
    from cyber_agent.notebook import TraceExplorer

    (root,) = to_frames(EXPORT, messages=False).roots
    whole = trace_graph(EXPORT, root)
    explore = next(n for n, d in whole.nodes(data=True) if d["path"] == "1.2")
    part = trace_graph(EXPORT, explore)
    assert sorted(d["path"] for _, d in part.nodes(data=True)) == ["1.2", "1.2.v1", "1.2.v2"]
    assert goal_graph(EXPORT, next(iter(whole.predecessors(explore))), sub_traces=True).nodes[explore]["path"] == "1.2"
    explorer = TraceExplorer(EXPORT, explore)
    assert [label.replace("\u00a0", " ") for label, _ in explorer.rows][0] == "▾ 1.2 explore ✓ · region North"
