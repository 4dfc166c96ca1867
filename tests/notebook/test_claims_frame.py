"""The claims frame, the stepper's claim steps and the tree drawing's mark on a child with unsupported claims."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fabricating import FabricatingModel
from cyber_agent.notebook import ReportStepper, draw_trace_tree, to_frames, trace_graph
from cyber_agent.trace import InMemoryTraceStore

REPO = Path(__file__).resolve().parents[2]
LOOKUP = "Compute the revenue (units × unit_price) of region North from data/sales.csv"
ANCHOR = {"objective": LOOKUP, "completion_criteria": ["the answer states the revenue of region North in data/sales.csv"]}


@pytest.fixture(scope="module")
def caught() -> tuple[InMemoryTraceStore, str]:
    """A one-child tree whose child changes the number of its first report (caught), then reports honestly."""
    store = InMemoryTraceStore()
    model = FabricatingModel(1.0, seed=1, kinds=("changed_number",), first_attempt_only=True)
    config = RunConfig(model="x", agent_mode="recursive", root_task_anchor=ANCHOR, workspace=str(REPO))
    result = asyncio.run(AgentRunner(trace_store=store, llm_call=model, workspace=str(REPO)).run_result(
        [{"role": "user", "content": LOOKUP}], config))
    return store, result.trace.trace_id


def test_the_claims_frame_has_a_row_per_judged_claim(caught):
    store, root = caught
    claims = to_frames(store, root).claims
    assert list(claims["check_verdict"]) == ["fail", "pass"]
    assert list(claims["code"]) == ["number_not_found", "supported"]
    first = claims.iloc[0]
    assert "its expression gives 951.75" in first["reason"] and first["evidence"][0]["kind"] == "tool_result"
    assert str(claims["claim_index"].dtype) == "Int64" and list(claims["validation_index"]) == [0, 1]


def test_the_stepper_shows_each_claim_with_its_verdict_and_cited_excerpt(caught):
    store, root = caught
    stepper = ReportStepper(store, root)
    checks = [item for item in stepper.items if "evidence check" in item.title]
    assert [item.verdict for item in checks] == ["fail", "pass"]
    assert checks[0].title.endswith("evidence check: fail — claim 1: Region North: revenue 921.75")
    assert any(line.startswith("cited excerpt: ") and "North,Widget,35,2.50" in line for line in checks[0].lines)
    # No validator ran on the caught report: its round goes from the check to the parent's review.
    after = stepper.items[stepper.items.index(checks[0]) + 1]
    assert after.kind == "review" and after.title.endswith("revise")


def test_the_tree_drawing_marks_the_child_with_unsupported_claims(caught):
    store, root = caught
    graph = trace_graph(store, root)
    marked = {node: data["unsupported_claims"] for node, data in graph.nodes(data=True) if data["unsupported_claims"]}
    assert list(marked.values()) == [1] and graph.nodes[next(iter(marked))]["role"] != "validator"
    figure = draw_trace_tree(graph)
    legend = figure.axes[0].get_legend()
    assert "unsupported claims" in [text.get_text() for text in legend.get_texts()]
