"""The offline demo runs end to end and its answer is computed from data/sales.csv."""

import csv
from collections import defaultdict
from pathlib import Path

from cyber_agent.cli import main

ROOT = Path(__file__).resolve().parent.parent


def expected_totals() -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    with open(ROOT / "data" / "sales.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            totals[row["region"]] += int(row["units"]) * float(row["unit_price"])
    return totals


def test_demo_answer_is_correct(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["--store", str(tmp_path), "demo"]) == 0
    out = capsys.readouterr().out
    totals = expected_totals()
    for region, value in totals.items():
        assert f"{region}: {value:.2f}" in out
    best = max(totals, key=totals.get)
    assert f"Top region: {best} with revenue {totals[best]:.2f}" in out
    assert "@explore-" in out  # sub-agents ran as their own traces
