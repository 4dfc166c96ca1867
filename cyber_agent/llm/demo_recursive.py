"""The demo model's recursive roles: planner (root), worker child, reviewer and validator.

Kept apart from `demo.py` (dispatch and legacy tasks). Every number is computed from tool
results in the conversation. One behaviour is a deliberate, documented shortcut: a leaf child's
*first* attempt reads only the first lines of the CSV (`FIRST_READ_LINES`), as a hurried
agent might; the independent validator recomputes from the whole file, rejects the report,
the parent sends it back with the validator's evidence, and the revised report is correct.

A root asked for one region's revenue delegates that region alone and reports it; a root asked
for an arithmetic value computes it with `evaluate`, and its validator recomputes the expression
the criterion names (`cyber_agent/llm/demo_checks.py:arithmetic_value`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from cyber_agent.llm.demo_checks import arithmetic_value, numbers_in

__all__ = ["FIRST_READ_LINES", "RECURSIVE_HELP", "recursive_step"]

FIRST_READ_LINES = 12
RECURSIVE_HELP = (
    "I am the offline demo model. In recursive mode I can report the revenue (units × unit_price) "
    "per region of a CSV file in data/ and name the top region, e.g. 'Report the revenue per region "
    "from data/sales.csv and name the top region.' with cyber_agent.cli.DEMO_ANCHOR as the root task "
    "anchor, compute one region's revenue, or compute an arithmetic expression. This task is none of "
    "those; configure a real provider (openai:..., anthropic:...) for it. The tasks I know are listed "
    "in docs/notebook.md."
)
"""The recursive root's answer to a task it does not know (its validator fails it at once, saying why)."""
Step = tuple[str, list[tuple[str, dict[str, Any]]]]

_CLAIM = re.compile(r"(?:Region\s+)?([A-Z][\w-]*):\s*(?:revenue\s+)?(-?\d+(?:\.\d+)?)")
_CHILD_BLOCK = re.compile(r"Child (\S+) \[(\w+)\] outcome=(\w+):")
_SINGLE_REGION = re.compile(r"region\s+['\"]?([A-Z][\w-]*)")
_EXPRESSION = re.compile(r"(\d[\d\s.+\-*/()%]*[\d)])")


def recursive_step(state: Any, rows_of: Any, csv_path: str | None) -> Step | None:
    """Return the next step when the conversation is a recursive role, else None."""
    if "submit_validation" in state.tools:
        return _validator(state, rows_of)
    if "review_task" in state.tools:
        return _reviewer(state)
    if "submit_report" in state.tools and "# Task brief" in state.task:
        return _child(state, rows_of, csv_path)
    if "# Root task" in state.all_user_text:
        if csv_path and ("per region" in state.task.lower() or _SINGLE_REGION.search(state.task)):
            return _root(state, csv_path)
        if not csv_path and _EXPRESSION.search(state.task) and "evaluate" in state.tools:
            return None  # an arithmetic root computes as a legacy agent does; its validator recomputes
        return RECURSIVE_HELP, []
    return None


def _totals(rows: list[dict[str, str]]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for row in rows:
        totals[row["region"]] = totals.get(row["region"], 0.0) + int(row["units"]) * float(row["unit_price"])
    return totals


def _claims(text: str) -> dict[str, float]:
    return {region: float(value) for region, value in _CLAIM.findall(text) if region not in ("Objective", "Child")}


# ---- root: plan, delegate, answer -------------------------------------------------------------
def _root(state: Any, path: str) -> Step:
    single = _SINGLE_REGION.search(state.task)
    lowered = state.task.lower()
    if single and "per region" not in lowered and "every region" not in lowered:
        return _root_one_region(state, path, single.group(1))
    if "goal" in state.tools and not state.made("goal"):
        return "", [("goal", {"add": "Compute revenue per region (delegated); Report the top region"}), ("goal", {"focus": "2"})]
    if not state.made("agent"):
        brief = {
            "objective": f"Compute the revenue (units × unit_price) of every region in {path}",
            "reason": "The root needs verified per-region totals before it can name the top region",
            "completion_criteria": [f"every region in {path} has its revenue reported as the sum of units × unit_price over all of its rows"],
            "expected_outputs": ["one output per region: 'Region R: revenue N'"],
            "constraints": [f"numbers come only from {path}"],
        }
        return "", [("agent", {"task_brief": brief})]
    accepted = _accepted_outputs(state)
    if accepted is None:
        return "", [("agent", {"task_brief": {"objective": f"Compute the revenue (units × unit_price) of every region in {path}",
                                              "completion_criteria": [f"every region in {path} has its revenue reported as the sum of units × unit_price over all of its rows"]}})]
    best = max(accepted, key=accepted.__getitem__)
    summary = f"Top region: {best} with revenue {accepted[best]:.2f}"
    if "goal" in state.tools and not state.made("goal", done=summary):
        return "", [("goal", {"done": f"Revenue verified for {len(accepted)} regions"}), ("goal", {"focus": "3"}),
                    ("goal", {"done": summary})]
    lines = [f"- {region}: {value:.2f}" for region, value in accepted.items()]
    return f"Revenue per region from {path} (verified by validators):\n" + "\n".join(lines) + f"\n{summary}.", []


def _region_brief(path: str, region: str) -> dict[str, Any]:
    return {
        "objective": f"Compute the revenue (units × unit_price) of region {region} in {path}",
        "completion_criteria": [f"the revenue of region {region} equals the sum of units × unit_price over every row of region {region} in {path}"],
        "expected_outputs": [f"Region {region}: revenue N"],
    }


def _root_one_region(state: Any, path: str, region: str) -> Step:
    """A root asked for one region's revenue: one child computes it, its validator checks it, the root reports it."""
    accepted = _accepted_outputs(state) if state.made("agent") else None
    if accepted is None or region not in accepted:
        brief = {**_region_brief(path, region), "constraints": [f"numbers come only from {path}"],
                 "reason": f"The root needs a verified revenue of region {region}"}
        return "", [("agent", {"task_brief": brief})]
    return f"Region {region}: revenue {accepted[region]:.2f} (verified by a validator).", []


def _accepted_outputs(state: Any) -> dict[str, float] | None:
    """Per-region totals from the latest child report that this agent accepted."""
    accepted = {args.get("child_trace_id") for name, args, _ in state.calls if name == "review_task" and args.get("decision") == "accept"}
    found: dict[str, float] | None = None
    for name, _, result in state.calls:
        if name not in ("agent", "review_task"):
            continue
        for block in _blocks(result):
            if block["child"] in accepted:
                outputs = _claims("\n".join(line for line in block["text"].splitlines() if "output:" in line))
                if outputs:
                    found = {**(found or {}), **outputs}
    return found


def _blocks(text: str) -> list[dict[str, str]]:
    matches = list(_CHILD_BLOCK.finditer(text))
    out = []
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        chunk = text[match.start():end]
        verdict = re.search(r"Validation \[\w+\] verdict: (\w+)", chunk)
        out.append({"child": match.group(1), "verdict": verdict.group(1) if verdict else "unknown", "text": chunk})
    return out


# ---- reviewer: accept what passed, send back what failed --------------------------------------
def _reviewer(state: Any) -> Step:
    reviewed = {args.get("child_trace_id"): args.get("decision") for name, args, _ in state.calls if name == "review_task"}
    latest: dict[str, dict[str, str]] = {}
    for name, _, result in state.calls:
        if name in ("agent", "review_task"):
            for block in _blocks(result):
                latest[block["child"]] = block
    revisions = [args.get("child_trace_id") for name, args, _ in state.calls if name == "review_task" and args.get("decision") == "revise"]
    for child, block in latest.items():
        if reviewed.get(child) in ("accept", "replan", "split", "fail"):
            continue
        if block["verdict"] == "pass":
            return "", [("review_task", {"child_trace_id": child, "decision": "accept", "feedback": "validator passed every criterion"})]
        if revisions.count(child) >= 2:
            return "", [("review_task", {"child_trace_id": child, "decision": "fail", "feedback": "still failing after two revisions"})]
        failed = [line.strip() for line in block["text"].splitlines() if re.match(r"\s*\d+\. \[(fail|unknown)\]", line)]
        feedback = "The validator did not accept your report: " + " ".join(failed)[:600]
        return "", [("review_task", {"child_trace_id": child, "decision": "revise", "feedback": feedback})]
    return "All reports reviewed.", []


# ---- child: delegate regions (depth 1) or compute one region (leaf) ---------------------------
def _child(state: Any, rows_of: Any, path: str | None) -> Step:
    objective = re.search(r"Objective: (.*)", state.task)
    region = re.search(r"region ([A-Z][\w-]*)", objective.group(1)) if objective else None
    path = path or "data/sales.csv"
    if region:
        return _leaf(state, rows_of, path, region.group(1))
    reads = state.results("read_file")
    if not reads:
        return "", [("read_file", {"path": path})]
    regions = list(dict.fromkeys(row["region"] for row in rows_of(reads[0])))
    if "agent" in state.tools and not state.made("agent"):
        briefs = [_region_brief(path, r) for r in regions]
        return "", [("agent", {"task_brief": briefs})]
    totals = _accepted_outputs(state) if state.made("agent") else _totals(rows_of(reads[0]))
    if not totals:
        return "", [("submit_report", {"outcome": "failed", "summary": "no region report was accepted"})]
    outputs = [f"Region {r}: revenue {v:.2f}" for r, v in totals.items()]
    return "", [("submit_report", {
        "outcome": "completed", "summary": f"Revenue of {len(totals)} regions, each verified by its own validator",
        "outputs": outputs, "evidence": ["each region was computed by a child whose report passed validation and my review"],
    })]


def _leaf(state: Any, rows_of: Any, path: str, region: str) -> Step:
    revising = "[parent review] Revise" in state.all_user_text
    reads = state.results("read_file")
    wanted_full = revising and not any(args.get("limit") is None for name, args, _ in state.calls if name == "read_file")
    if not reads or wanted_full:
        args: dict[str, Any] = {"path": path}
        if not revising:
            args["limit"] = FIRST_READ_LINES  # the documented first-attempt shortcut
        return "", [("read_file", args)]
    rows = [r for r in rows_of(reads[-1]) if r["region"] == region]
    total = sum(int(r["units"]) * float(r["unit_price"]) for r in rows)
    return "", [("submit_report", {
        "outcome": "completed", "summary": f"Region {region}: revenue {total:.2f} from {len(rows)} rows",
        "outputs": [f"Region {region}: revenue {total:.2f}"],
        "evidence": [f"summed units × unit_price over {len(rows)} rows of region {region} read from {path}"],
    })]


# ---- validator: recompute from the source, compare with the claim ------------------------------
def _validator(state: Any, rows_of: Any) -> Step:
    task = state.task
    path_match = re.search(r"(?<![\w./-])[\w./-]+\.csv", task)
    if not state.made("read_trajectory"):
        calls: list[tuple[str, dict[str, Any]]] = [("read_trajectory", {})]
        if path_match:
            calls.append(("read_file", {"path": path_match.group(0)}))
        return "", calls
    criteria = re.findall(r"^(\d+)\. (.+)$", task.split("Completion criteria:")[1].split("\n\n")[0], re.M)
    claim_text = task.split("(claim):", 1)[1].split("\n\nFinish with", 1)[0] if "(claim):" in task else ""
    if claim_text.strip().startswith("{"):
        claim_text = "\n".join(json.loads(claim_text).get("outputs", []))
    if RECURSIVE_HELP[:40] in claim_text:
        evidence = "the answer is the offline demo model saying it cannot do this task (see its text)"
        verdicts = [{"criterion": int(number), "verdict": "fail", "evidence": evidence} for number, _ in criteria]
        summary = "the offline demo model does not know this task (docs/notebook.md lists the tasks it knows)"
        return "", [("submit_validation", {"verdicts": verdicts, "summary": summary})]
    if path_match is None:
        verdicts = [_judge_arithmetic(int(number), criterion, claim_text) for number, criterion in criteria]
        summary = "; ".join(f"{v['criterion']}: {v['verdict']}" for v in verdicts)
        return "", [("submit_validation", {"verdicts": verdicts, "summary": summary})]
    claims = _claims(claim_text)
    reads = state.results("read_file")
    truth = _totals(rows_of(reads[-1])) if reads else {}
    trajectory = state.results("read_trajectory")[-1]
    partial = "truncated" in trajectory
    verdicts = []
    for number, criterion in criteria:
        verdict, evidence = _judge(criterion, claims, truth, partial)
        verdicts.append({"criterion": int(number), "verdict": verdict, "evidence": evidence})
    summary = "; ".join(f"{v['criterion']}: {v['verdict']}" for v in verdicts)
    return "", [("submit_validation", {"verdicts": verdicts, "summary": summary})]


def _judge_arithmetic(number: int, criterion: str, claim: str) -> dict[str, Any]:
    """Recompute the expression a criterion names and compare it with the claimed value."""
    found = [m for m in _EXPRESSION.findall(criterion) if any(op in m for op in "+-*/%")]
    value = arithmetic_value(found[0]) if found else None
    if value is None:
        return {"criterion": number, "verdict": "unknown", "evidence": "the criterion names no arithmetic expression to recompute"}
    stated = re.search(r"=\s*(-?\d+(?:\.\d+)?)", claim)
    numbers = numbers_in(claim)
    claimed = float(stated.group(1)) if stated else (numbers[-1] if numbers else None)
    if claimed is None:
        return {"criterion": number, "verdict": "fail", "evidence": f"the answer states no value; {found[0].strip()} = {value:g}"}
    ok = abs(claimed - value) <= 1e-9 * max(1.0, abs(value))
    return {"criterion": number, "verdict": "pass" if ok else "fail",
            "evidence": f"claimed {claimed:g}, recomputed {found[0].strip()} = {value:g}"}


def _judge(criterion: str, claims: dict[str, float], truth: dict[str, float], partial_read: bool) -> tuple[str, str]:
    if not truth:
        return "unknown", "could not read the source file to recompute"
    lowered = criterion.lower()
    note = " The trajectory shows a truncated read of the file." if partial_read else ""
    single = re.search(r"region ([A-Z][\w-]*)", criterion)
    if single and "every region" not in lowered:
        region = single.group(1)
        if region not in claims:
            return "fail", f"no revenue claimed for region {region}"
        ok = abs(claims[region] - truth.get(region, float("nan"))) < 0.005
        return ("pass" if ok else "fail"), f"claimed {claims[region]:.2f}, recomputed {truth.get(region, 0):.2f} from the whole file.{'' if ok else note}"
    if "every region" in lowered or "each region" in lowered:
        wrong = [r for r in truth if r not in claims or abs(claims[r] - truth[r]) >= 0.005]
        if wrong:
            return "fail", f"missing or wrong: {', '.join(wrong)} (recomputed from the whole file).{note}"
        return "pass", f"all {len(truth)} regions match the recomputed totals"
    if "highest" in lowered or "top region" in lowered:
        best = max(truth, key=truth.__getitem__)
        named = claims.get(best)
        ok = named is not None and abs(named - truth[best]) < 0.005
        return ("pass" if ok else "fail"), f"recomputed top region {best} ({truth[best]:.2f})"
    return "unknown", "the demo validator cannot check this criterion"
