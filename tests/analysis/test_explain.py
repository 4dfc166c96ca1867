"""Failure attribution on seeded failing trees: one known fault injected into one chosen agent (`seeded.py`).

Attribution accuracy on the seeded trees is every parametrised case here: 4 reports changed by
the fallible model, 4 legacy answers changed by it, 4 fabrications — explain must name the
injected node and step in each (12 of 12), and nothing in the runs without a fault.
"""

from __future__ import annotations

import pytest
from seeded import (
    REGIONS,
    FabricationInReport,
    FaultInAnswer,
    FaultInReport,
    final_answer_step,
    first_report_step,
    seeded_run,
)

from cyber_agent.analysis.explain import SIGNAL_COLUMNS, explain
from cyber_agent.errors import ConfigurationError


@pytest.mark.parametrize("region", REGIONS)
async def test_explain_names_the_child_whose_report_was_changed(region):
    run = await seeded_run(FaultInReport(f"region {region}"))
    assert run.model.injected == 1
    injected = run.node_for(f"region {region}")
    found = await explain(run.store, run.root)
    # The recorded evidence check failed the report before any validator ran.
    assert (found.trace_id, found.step, found.kind) == (injected.trace_id, first_report_step(injected), "evidence_fail")
    assert "number_not_found" in found.detail
    assert found.chain == run.chain_to(injected.trace_id) and found.chain[0] == run.root
    assert list(found.signals.columns) == list(SIGNAL_COLUMNS) and found.signals["trace_id"].iloc[0] == injected.trace_id
    # Without the evidence check nothing names the fault: the revision that followed passed its validator.
    blind = await explain(run.store, run.root, evidence="off")
    assert blind.trace_id is None and blind.signals.empty


@pytest.mark.parametrize("region", REGIONS)
async def test_explain_checks_the_evidence_of_a_legacy_answer(region):
    run = await seeded_run(FaultInAnswer(f"region {region}"), mode="legacy")
    assert run.model.injected == 1
    injected = run.node_for(f"region {region}")
    found = await explain(run.store, run.root)
    assert (found.trace_id, found.step, found.kind) == (injected.trace_id, final_answer_step(injected), "evidence_fail")
    assert found.chain == run.chain_to(injected.trace_id) and len(found.chain) == 2
    # Legacy mode records no check and runs no validator: only the check explain runs sees the fault.
    assert (await explain(run.store, run.root, evidence="recorded")).trace_id is None


@pytest.mark.parametrize("kind", ["invented_id", "invented_path", "no_tool_calls", "partial_as_complete"])
async def test_explain_names_a_fabricated_report_only_the_evidence_check_catches(kind):
    run = await seeded_run(FabricationInReport("region West", kind))
    assert run.model.injected == 1
    injected = run.node_for("region West")
    found = await explain(run.store, run.root)
    assert (found.trace_id, found.step, found.kind) == (injected.trace_id, first_report_step(injected), "evidence_fail")
    assert found.chain == run.chain_to(injected.trace_id)
    assert (await explain(run.store, run.root, evidence="off")).trace_id is None


@pytest.mark.parametrize("mode", ["recursive", "legacy"])
async def test_a_run_without_a_fault_has_nothing_to_explain(mode):
    model = FaultInReport("no such objective") if mode == "recursive" else FaultInAnswer("no such task")
    run = await seeded_run(model, mode=mode)
    assert run.model.injected == 0
    found = await explain(run.store, run.root)
    assert found.trace_id is None and found.chain == [] and found.signals.empty


async def test_bad_arguments_are_refused():
    run = await seeded_run(FaultInAnswer("no such task"), mode="legacy")
    with pytest.raises(ConfigurationError, match="root"):
        await explain(run.store, "")
    with pytest.raises(ConfigurationError, match="evidence"):
        await explain(run.store, run.root, evidence="sometimes")  # type: ignore[arg-type]
