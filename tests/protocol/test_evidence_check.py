"""The deterministic evidence check: every fabrication kind of the seeded model is caught, honest demo children pass."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fabricating import FabricatingModel
from cyber_agent.llm.fallible import FallibleModel
from cyber_agent.protocol.evidence_check import check_claims, render_evidence
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.store import FileSystemTraceStore

REPO = Path(__file__).resolve().parents[2]
LOOKUP = "Compute the revenue (units × unit_price) of region North from data/sales.csv"
LOOKUP_ANCHOR = {"objective": LOOKUP, "completion_criteria": ["the answer states the revenue of region North in data/sales.csv"]}


@pytest.fixture(autouse=True)
def _no_agent_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGENT_MODE", "AGENT_RECURSION_ENABLED", "AGENT_VALIDATOR_MODEL", "AGENT_ROOT_VALIDATOR_MODEL"):
        monkeypatch.delenv(name, raising=False)


async def _tree(model: object, *, task: str = DEMO_TASK, anchor: dict | None = None, store: TraceStore | None = None,
                mode: str = "recursive") -> tuple[TraceStore, Trace]:
    store = store if store is not None else InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=model, workspace=str(REPO))  # type: ignore[arg-type]
    config = RunConfig(model="demo", agent_mode=mode, root_task_anchor=(anchor or DEMO_ANCHOR) if mode == "recursive" else None,
                       max_iterations=30, workspace=str(REPO))
    result = await runner.run_result([{"role": "user", "content": task}], config)
    return store, result.trace


async def _children(store: TraceStore) -> list[Trace]:
    return [t for t in await store.list_traces(limit=None) if t.protocol.brief is not None and not t.is_validator]


def _first_checks(trace: Trace) -> list[list[str]]:
    """The failing codes of each evidence check on `trace`, oldest first."""
    return [[c.code for c in v.claims if c.verdict == "fail"] for v in trace.protocol.validations if v.scope == "evidence"]


async def test_the_demos_honest_children_pass_the_check_and_still_meet_their_validator():
    store, root = await _tree(None)
    assert root.status == "completed"
    children = await _children(store)
    assert len(children) == 5  # one mid-level child and one leaf per region
    for child in children:
        checks = [v for v in child.protocol.validations if v.scope == "evidence"]
        assert checks and all(v.verdict == "pass" for v in checks), render_evidence(checks[-1])
        assert all(c.evidence for c in child.protocol.report.claims)  # every claim cites something
    # The documented first-read shortcut is still the validator's to catch: the check passes what was read.
    assert any(v.scope == "criteria" and v.verdict == "fail" for c in children for v in c.protocol.validations)


LEAF_CASES = {
    "no_tool_calls": {"no_tool_calls", "number_not_found"},
    "invented_id": {"unknown_tool_call"},
    "invented_path": {"artifact_missing"},
    "changed_number": {"number_not_found"},
    "partial_as_complete": {"cites_error", "completed_over_errors"},
}


@pytest.mark.parametrize("kind", sorted(LEAF_CASES))
async def test_each_leaf_fabrication_is_caught_and_costs_no_validator_call(kind):
    model = FabricatingModel(1.0, seed=1, kinds=(kind,), first_attempt_only=True)
    store, root = await _tree(model, task=LOOKUP, anchor=LOOKUP_ANCHOR)
    (leaf,) = await _children(store)
    assert [f.kind for f in model.ledger][0] == kind
    first = leaf.protocol.validations[0]
    assert first.scope == "evidence" and first.verdict == "fail"
    assert set(_first_checks(leaf)[0]) == LEAF_CASES[kind]
    # Failed without a validator: the next validation is the revised report's evidence check.
    assert leaf.protocol.validations[1].scope == "evidence"
    assert root.status == "completed" and "revenue" in (root.result_summary or "")


async def test_an_invented_child_id_is_an_unknown_trace():
    model = FabricatingModel(1.0, seed=2, kinds=("invented_id",), leaf_kinds=(), first_attempt_only=True)
    store, _ = await _tree(model)
    mid = next(t for t in await _children(store) if "every region" in t.protocol.brief.objective)
    assert _first_checks(mid)[0] == ["unknown_trace"]


async def test_a_claim_about_a_child_that_failed_is_caught():
    model = FabricatingModel(1.0, seed=3, kinds=("unreturned_child",), leaf_kinds=(), fail_rate=0.5, first_attempt_only=True)
    store, _ = await _tree(model)
    mid = next(t for t in await _children(store) if "every region" in t.protocol.brief.objective)
    assert "unreturned_child" in [f.kind for f in model.ledger]
    assert _first_checks(mid)[0] == ["child_not_returned"]


async def test_repeating_a_childs_rejected_claim_is_caught():
    model = FabricatingModel(1.0, seed=3, kinds=("repeats_rejected",), leaf_kinds=("changed_number",), first_attempt_only=True)
    store, _ = await _tree(model)
    mid = next(t for t in await _children(store) if "every region" in t.protocol.brief.objective)
    assert "repeats_rejected" in [f.kind for f in model.ledger]
    check = mid.protocol.validations[0]
    (finding,) = [c for c in check.claims if c.verdict == "fail"]
    assert finding.code == "repeats_rejected" and "rejected report" in finding.reason
    assert finding.location.startswith("report of ")


async def test_the_check_reads_only_persisted_records_in_another_process(tmp_path):
    model = FabricatingModel(1.0, seed=5, kinds=("changed_number", "invented_path", "invented_id"))
    store, _ = await _tree(model, task=LOOKUP, anchor=LOOKUP_ANCHOR, store=FileSystemTraceStore(tmp_path))
    ids = [t.trace_id for t in await store.list_traces(limit=None) if not t.is_validator]
    here = {i: (await check_claims(store, i)).model_dump(mode="json", exclude={"created_at"}) for i in ids}
    code = (
        "import asyncio, json, sys\n"
        "from cyber_agent.trace.store import FileSystemTraceStore\n"
        "from cyber_agent.protocol.evidence_check import check_claims\n"
        "store = FileSystemTraceStore(sys.argv[1])\n"
        "async def main():\n"
        "    return {i: (await check_claims(store, i, workspace=sys.argv[2])).model_dump(mode='json', exclude={'created_at'})"
        " for i in json.loads(sys.argv[3])}\n"
        "print(json.dumps(asyncio.run(main())))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(REPO), json.dumps(ids)], capture_output=True,
                         text=True, check=True, cwd=tmp_path)
    assert json.loads(out.stdout) == here
    assert any(v["verdict"] == "fail" for v in here.values())  # the seeded model did fabricate


async def test_legacy_sub_agents_answers_are_checked_against_their_own_tool_results():
    store, root = await _tree(None, mode="legacy")
    subs = [t for t in await store.list_traces(limit=None) if t.parent_trace_id == root.trace_id]
    assert subs
    for sub in subs:
        result = await check_claims(store, sub.trace_id)
        assert result.verdict == "pass", render_evidence(result)
    lying_store, lying = await _tree(FallibleModel(1.0, seed=0), task=LOOKUP, mode="legacy")
    result = await check_claims(lying_store, lying.trace_id)
    assert result.verdict == "fail"
    assert any(c.code == "number_not_found" for c in result.claims)


async def test_check_claims_names_a_missing_trace():
    with pytest.raises(LookupError, match="nope"):
        await check_claims(InMemoryTraceStore(), "nope")
