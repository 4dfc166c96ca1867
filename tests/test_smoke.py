"""The offline demo runs end to end in both modes and its answer is computed from data/sales.csv."""

import asyncio
import csv
from collections import defaultdict
from pathlib import Path

import pytest

from cyber_agent.cli import main
from cyber_agent.trace import FileSystemTraceStore

ROOT = Path(__file__).resolve().parent.parent


def expected_totals() -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    with open(ROOT / "data" / "sales.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            totals[row["region"]] += int(row["units"]) * float(row["unit_price"])
    return totals


@pytest.mark.parametrize("mode", ["legacy", "recursive"])
def test_demo_answer_is_correct(mode, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("AGENT_MODE", raising=False)
    assert main(["--store", str(tmp_path), "demo", "--mode", mode]) == 0
    out = capsys.readouterr().out
    totals = expected_totals()
    for region, value in totals.items():
        assert f"{region}: {value:.2f}" in out
    best = max(totals, key=totals.get)
    assert f"Top region: {best} with revenue {totals[best]:.2f}" in out


def test_recursive_demo_shows_the_whole_protocol(tmp_path, monkeypatch):
    """Depth >= 2, at least one validator rejection followed by a revision, and a root validation."""
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("AGENT_MODE", raising=False)
    assert main(["--store", str(tmp_path), "demo"]) == 0
    store = FileSystemTraceStore(tmp_path)
    traces = asyncio.run(store.list_traces(limit=None))
    business = [t for t in traces if not t.is_validator]
    assert max(t.lineage.depth for t in business) >= 2
    validations = [v for t in business for v in t.protocol.validations]
    assert any(v.verdict == "fail" for v in validations)
    revised = [t for t in business
               if [v.verdict for v in t.protocol.validations if v.scope != "evidence"][:2] == ["fail", "pass"]]
    assert revised, "a rejected child was revised and then passed"
    root = next(t for t in traces if t.parent_trace_id is None)
    root_validators = [t for t in traces if t.parent_trace_id == root.trace_id and t.protocol.validator is not None
                       and t.protocol.validator.scope == "root"]
    final = root_validators[-1].protocol.validation if root_validators else None
    assert final is not None and final.verdict == "pass"
    assert root.status == "completed"
