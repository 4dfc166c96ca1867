"""Tree alignment: planted inserts, deletes and relabels are recovered exactly; stores and frames."""

from __future__ import annotations

import random

import pytest
from tree_gen import plant, random_tree

from cyber_agent.analysis import ALIGNMENT_COLUMNS, align_trees, compare_runs, compare_trees, comparison_counts
from cyber_agent.analysis.tree import normalise_brief
from cyber_agent.errors import ConfigurationError
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocol_records import TaskReport
from cyber_agent.trace.state import Lineage, ProtocolState
from cyber_agent.trace.trace_id import new_root_trace_id, new_sub_trace_id


def _found(frame, kind: str) -> dict:
    rows = frame[frame["kind"] == kind]
    return dict(zip(rows["trace_id_a"], rows["trace_id_b"]))


@pytest.mark.parametrize(("seed", "size", "k"), [(1, 40, 1), (2, 120, 3), (3, 300, 5), (4, 600, 8), (5, 80, 0)])
def test_planted_inserts_deletes_and_relabels_are_found_exactly(seed, size, k):
    rng = random.Random(seed)
    tree_a = random_tree(rng, size)
    planted = plant(tree_a, rng, inserts=k, deletes=k, relabels=k)
    frame = align_trees(tree_a, planted.tree_b)
    assert list(frame.columns) == list(ALIGNMENT_COLUMNS)
    assert _found(frame, "matched") == planted.matched
    assert _found(frame, "relabelled") == planted.relabelled
    assert set(frame.loc[frame["kind"] == "deleted", "trace_id_a"]) == planted.deleted
    assert set(frame.loc[frame["kind"] == "inserted", "trace_id_b"]) == planted.inserted
    assert len(frame) == len(tree_a) + len(planted.inserted)  # every node of either tree once
    matched = frame[frame["kind"] == "matched"]
    assert (matched["tokens_delta"] == 7).all() and not matched["status_changed"].any()


def test_identical_trees_match_every_node_and_a_changed_root_is_relabelled():
    rng = random.Random(9)
    tree = random_tree(rng, 50)
    frame = align_trees(tree, tree)
    assert (frame["kind"] == "matched").all() and len(frame) == 50
    other = random_tree(random.Random(10), 5, prefix="c")
    assert align_trees(tree, other)["kind"].iloc[0] == "relabelled"  # roots always pair


def test_a_relabel_needs_similar_briefs_else_it_is_a_delete_and_an_insert():
    rng = random.Random(11)
    tree_a = random_tree(rng, 30, validators=False)
    planted = plant(tree_a, rng, inserts=0, deletes=0, relabels=1)
    [(a_id, b_id)] = planted.relabelled.items()
    planted.tree_b.nodes[b_id].brief = "entirely unrelated words here"
    frame = align_trees(tree_a, planted.tree_b)
    assert _found(frame, "relabelled") == {}
    assert a_id in set(frame.loc[frame["kind"] == "deleted", "trace_id_a"])
    assert b_id in set(frame.loc[frame["kind"] == "inserted", "trace_id_b"])
    with pytest.raises(ConfigurationError, match="relabel_threshold"):
        align_trees(tree_a, planted.tree_b, relabel_threshold=0)


def test_normalised_briefs_ignore_case_spacing_and_edge_punctuation():
    assert normalise_brief("  Find THE\n answer.  ") == "find the answer"
    assert normalise_brief(None) == ""


async def _store_tree(store, task: str, briefs: list[str], *, fail: str | None = None, tokens: int = 10) -> str:
    root = new_root_trace_id()
    await store.create_trace(Trace(trace_id=root, task=task, status="completed", lineage=Lineage(mode="recursive")))
    await _answer(store, root, tokens)
    for seq, text in enumerate(briefs):
        child = new_sub_trace_id(root, "agent", seq)
        outcome = "failed" if text == fail else "completed"
        await store.create_trace(Trace(
            trace_id=child, parent_trace_id=root, task=text, status="completed",
            lineage=Lineage(mode="recursive", depth=1, root_trace_id=root, created_by_tool="agent"),
            protocol=ProtocolState(report=TaskReport(outcome=outcome, summary="done"))))
        await _answer(store, child, tokens * (seq + 1))
    return root


async def _answer(store, trace_id: str, tokens: int) -> None:
    await store.add_message(Message(trace_id=trace_id, role="assistant", content="ok", completion_tokens=tokens))


async def test_compare_trees_reads_any_store_and_reports_deltas():
    store_a, store_b = InMemoryTraceStore(), InMemoryTraceStore()
    root_a = await _store_tree(store_a, "Plan the trip", ["book the flight to rome", "find a hotel near the station"])
    root_b = await _store_tree(store_b, "plan the trip.", ["book the flight to rome", "find a cheap hotel near the station",
                                                           "rent a car"], fail="rent a car", tokens=20)
    frame = await compare_trees(store_a, root_a, store_b, root_b)
    assert frame["kind"].tolist() == ["matched", "matched", "relabelled", "inserted"]
    assert frame["tokens_delta"].iloc[0] == 10 and frame["tokens_delta"].iloc[2] == 20
    assert (frame["llm_calls_delta"].iloc[:3] == 0).all() and frame["llm_calls_b"].iloc[3] == 1
    assert frame["outcome_b"].iloc[3] == "failed" and frame["outcome_a"].iloc[1] == "completed"
    runs = await compare_runs([(store_a, root_a), (store_b, root_b), (store_a, root_a)])
    counts = comparison_counts(runs)
    assert counts.loc[1].tolist() == [2, 1, 0, 1] and counts.loc[2].tolist() == [3, 0, 0, 0]
    with pytest.raises(ConfigurationError, match="at least two"):
        await compare_runs([(store_a, root_a)])
