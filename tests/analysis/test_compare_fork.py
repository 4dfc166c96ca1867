"""The closing note's comparison: the recursive demo run against a fork of it and against a legacy run of the task.

Run with `-s` to see the frames (`.venv/bin/python -m pytest -s -q tests/analysis/test_compare_fork.py`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cyber_agent.analysis import compare_runs, compare_trees, comparison_counts, explain
from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.core.config import RunConfig
from cyber_agent.core.fork import ModelChange, fork
from cyber_agent.core.runner import AgentRunner
from cyber_agent.notebook.tree_diff import comparison_graph, draw_comparison
from cyber_agent.trace import InMemoryTraceStore

REPO = Path(__file__).resolve().parents[2]
SHOWN = ["kind", "role", "brief_b", "status_changed", "verdict_a", "verdict_b", "llm_calls_a", "llm_calls_b",
         "tokens_delta"]


async def _run(store: InMemoryTraceStore, mode: str) -> str:
    config = RunConfig(model="demo", workspace=str(REPO), agent_mode=mode,  # type: ignore[arg-type]
                       root_task_anchor=DEMO_ANCHOR if mode == "recursive" else None)
    result = await AgentRunner(trace_store=store).run_result([{"role": "user", "content": DEMO_TASK}], config)
    assert result.trace.status == "completed", result.trace.error_message
    return result.trace.trace_id


async def _child(store: InMemoryTraceStore, root: str, region: str) -> str:
    records = await store.read_records([root], messages=False, events=False)
    [found] = [r.trace_id for r in records if region in ((r.trace.get("protocol") or {}).get("brief") or {}).get("objective", "")]
    return found


async def test_the_demo_run_compared_with_a_fork_and_with_a_legacy_run():
    store = InMemoryTraceStore()
    demo = await _run(store, "recursive")
    west = await _child(store, demo, "region West")
    forked = await fork(store, demo, at=west, change=ModelChange(model="fallible:rate=1,seed=3"))
    assert forked.trace.status == "completed", forked.trace.error_message
    legacy = await _run(store, "legacy")

    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 48):
        vs_fork = await compare_trees(store, demo, store, forked.trace.trace_id)
        print("\n--- the demo run (a) against its fork with the West child on fallible:rate=1 (b)")
        print(vs_fork[SHOWN].to_string())
        runs = await compare_runs([(store, demo), (store, forked.trace.trace_id), (store, legacy)])
        print("\n--- counts per run (1: the fork, 2: a legacy run of the same task)")
        print(comparison_counts(runs).to_string())
        first, where = await explain(store, demo), await explain(store, forked.trace.trace_id)
        print(f"\n--- explain(demo): {first.kind} at step {first.step} of {first.trace_id[-24:]} — {first.detail}")
        print(f"--- explain(fork): {where.kind} at step {where.step} of {where.trace_id[-24:]} — {where.detail}")
        signals = where.signals.assign(node=where.signals["trace_id"].str[-24:])
        print("--- the fork's failure signals, earliest first")
        print(signals[["node", "depth", "step", "kind", "detail"]].to_string())

    # Every node before the changed child is matched unchanged; the West child now fails its validator, its
    # parent's report fails in turn and the root delegates again: a new subtree is inserted.
    west_row = vs_fork[vs_fork["trace_id_a"] == west].iloc[0]
    assert west_row["kind"] == "matched" and (west_row["verdict_a"], west_row["verdict_b"]) == ("pass", "fail")
    before = vs_fork.loc[: west_row.name - 1]
    assert set(before["kind"]) == {"matched"} and (before[before["role"] == "child"]["tokens_delta"].iloc[1:] == 0).all()
    counts = comparison_counts(runs)
    assert counts.loc[1, "relabelled"] == 0 and counts.loc[1, "inserted"] > 0
    assert (vs_fork["kind"] == "inserted").sum() == counts.loc[1, "inserted"]
    # The first fault of both runs is the demo's own (its leaves' first, partial reads fail their validators),
    # at the same aligned node; only the fork has the West child's unsupported numbers.
    pairs = dict(zip(vs_fork["trace_id_a"], vs_fork["trace_id_b"]))
    assert first.kind == where.kind == "verdict_fail" and pairs[first.trace_id] == where.trace_id
    west_b = west_row["trace_id_b"]
    fork_evidence = where.signals[where.signals["kind"] == "evidence_fail"]
    assert set(fork_evidence["trace_id"]) == {west_b} and not (first.signals["kind"] == "evidence_fail").any()
    assert comparison_graph(vs_fork).nodes[west_row["trace_id_b"]]["diff"] == "changed"
    # The legacy run of the task: the root pairs; legacy sub-agents have no briefs to match the recursive ones.
    legacy_rows = runs[runs["run"] == 2]
    assert legacy_rows.iloc[0]["kind"] == "matched" and legacy_rows.iloc[0]["role"] == "root"
    assert counts.loc[2, "deleted"] > 0 and counts.loc[2, "inserted"] > 0
    parent_of = dict(zip(vs_fork["trace_id_b"], vs_fork["parent_b"]))
    chain = [west_b]
    while isinstance(parent_of.get(chain[-1]), str):
        chain.append(parent_of[chain[-1]])
    figure = draw_comparison(vs_fork, side_by_side=True, highlight=chain[::-1], names=("demo", "fork"))
    demo_side, fork_side = figure.subfigs
    assert not any(c.get_gid() == "highlight-edges" for c in demo_side.axes[0].collections)  # not a's nodes
    [lit] = [c for c in fork_side.axes[0].collections if c.get_gid() == "highlight-edges"]
    assert len(lit.get_segments()) == len(chain) - 1 == 2
