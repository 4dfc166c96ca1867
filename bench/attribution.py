"""Attribution accuracy of `explain` on seeded failing trees: k of n named at the injected node and step.

    python bench/attribution.py               # the 12 seeded trees of tests/analysis/seeded.py, plus 2 clean runs
    python bench/attribution.py --json out.json

Each seeded tree is the demo task with one fault injected into one chosen agent (a changed number
in a recursive child's report, a changed number in a legacy sub-agent's answer, a fabricated
recursive report of one of four kinds). A case counts as named when `explain` gives exactly the
injected trace and message step; it is printed with `evidence="check"` (the default) and, to
show what the evidence signal adds, with `evidence="off"`. A clean run counts when nothing is named.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "analysis"))

from seeded import (  # noqa: E402
    REGIONS,
    FabricationInReport,
    FaultInAnswer,
    FaultInReport,
    final_answer_step,
    first_report_step,
    seeded_run,
)

from cyber_agent.analysis.explain import explain  # noqa: E402


async def cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    plans: list[tuple[str, Any, str, str]] = []
    plans += [(f"report {r}", FaultInReport(f"region {r}"), "recursive", f"region {r}") for r in REGIONS]
    plans += [(f"legacy answer {r}", FaultInAnswer(f"region {r}"), "legacy", f"region {r}") for r in REGIONS]
    plans += [(f"fabricated {k}", FabricationInReport("region West", k), "recursive", "region West")  # type: ignore[arg-type]
              for k in ("invented_id", "invented_path", "no_tool_calls", "partial_as_complete")]
    for name, model, mode, target in plans:
        run = await seeded_run(model, mode)
        node = run.node_for(target)
        step = final_answer_step(node) if mode == "legacy" else first_report_step(node)
        row: dict[str, Any] = {"case": name, "mode": mode, "injected": model.injected == 1}
        for evidence in ("check", "off"):
            found = await explain(run.store, run.root, evidence=evidence)
            row[evidence] = found.trace_id == node.trace_id and found.step == step
            row[f"{evidence}_kind"] = found.kind
        out.append(row)
    for mode in ("recursive", "legacy"):
        model = FaultInReport("no such objective") if mode == "recursive" else FaultInAnswer("no such task")
        run = await seeded_run(model, mode)
        found = await explain(run.store, run.root)
        out.append({"case": f"clean {mode}", "mode": mode, "injected": model.injected == 0, "check": found.trace_id is None,
                    "check_kind": found.kind, "off": None, "off_kind": None})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the same 14 runs (they take seconds)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    rows = asyncio.run(cases())
    seeded = [r for r in rows if not r["case"].startswith("clean")]
    clean = [r for r in rows if r["case"].startswith("clean")]
    for r in rows:
        print(f"  {r['case']:<32} named={r['check']!s:<5} kind={r['check_kind']!s:<14} "
              f"without evidence: named={r['off']!s:<5} kind={r['off_kind']}")
    k, k_off, n = sum(r["check"] for r in seeded), sum(bool(r["off"]) for r in seeded), len(seeded)
    print(f"attribution: {k} of {n} seeded trees named at the injected node and step "
          f"({k_off} of {n} with evidence='off'); clean runs with nothing named: {sum(r['check'] for r in clean)} of "
          f"{len(clean)}  ({time.perf_counter() - started:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps({"named": k, "named_without_evidence": k_off, "seeded": n,
                                         "clean_ok": sum(r["check"] for r in clean), "clean": len(clean), "cases": rows},
                                        indent=1))


if __name__ == "__main__":
    main()
