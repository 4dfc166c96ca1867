"""Claims on TaskReport: old reports load unchanged, the citations' fields are checked, text helpers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cyber_agent.protocol.claims import claim_numbers, claims_from_text, has_number, has_quote, quoted_names
from cyber_agent.trace.claim_records import EvidenceRef
from cyber_agent.trace.protocol_records import TaskReport


def test_an_old_report_loads_unchanged_with_one_uncited_claim_per_output():
    stored = {"outcome": "completed", "summary": "checksum is 7781", "outputs": ["7781", "file data.bin"],
              "evidence": ["read the file"], "submitted_by": "tool"}
    report = TaskReport.model_validate(stored)
    assert report.outputs == ["7781", "file data.bin"] and report.evidence == ["read the file"]
    assert [(c.text, c.evidence) for c in report.claims] == [("7781", []), ("file data.bin", [])]
    assert TaskReport.model_validate(report.model_dump(mode="json")) == report  # a round trip changes nothing


def test_claims_alone_fill_the_outputs_a_parent_reads():
    report = TaskReport.model_validate({"outcome": "completed", "summary": "s", "claims": [
        {"text": "Region East: revenue 152.00", "evidence": [{"kind": "child_report", "trace_id": "r@delegate-1-001"}]}]})
    assert report.outputs == ["Region East: revenue 152.00"]
    assert report.claims[0].evidence[0].location("r") == "report of r@delegate-1-001"


@pytest.mark.parametrize(("ref", "needs"), [
    ({"kind": "message"}, "sequence"), ({"kind": "tool_result"}, "tool_call_id"),
    ({"kind": "child_report"}, "trace_id"), ({"kind": "artifact"}, "path or message_id"),
])
def test_a_citation_without_its_fields_is_refused_naming_them(ref, needs):
    with pytest.raises(ValidationError, match=needs):
        EvidenceRef.model_validate(ref)


def test_numbers_are_compared_at_the_precision_the_claim_writes():
    assert has_number("total: 402.5", "402.50") and has_number("402.499", "402.50")
    assert not has_number("total: 402.6", "402.50") and not has_number("4025", "402.50")
    assert claim_numbers("Region East: revenue 152.00 from 3 rows in 2026") == ["152.00", "2026"]


def test_quotes_and_quoted_names_ignore_case_and_spacing():
    assert has_quote("2026-01-01,East,Gadget,26,4.00\n", "east,gadget,26") and not has_quote("East", "West")
    assert quoted_names('the file "sales.csv" and `data/x.csv`, it\'s fine') == ["sales.csv", "data/x.csv"]


def test_an_implicit_reports_claims_are_its_lines_that_state_something():
    claims = claims_from_text("Revenue per region:\n- East: 152.00\n- North: 951.75\n\nTop region: North.")
    assert [c.text for c in claims] == ["East: 152.00", "North: 951.75", "Top region: North."]
    assert all(c.evidence == [] for c in claims)
