"""Rows of the recursive protocol's frames: reports, validations (per criterion) and verdicts (per validation).

Pure functions over `TraceRecord`s, like `frame_rows.py`: each reads `trace.protocol` (briefs,
reports, the validations a trace received, the reviews a parent wrote) and returns the columns
of its schema as a dict of lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cyber_agent.notebook.frame_rows import Columns, TreeIndex, trace_role
from cyber_agent.notebook.records import TraceRecord

__all__ = ["claim_rows", "report_rows", "validation_rows", "verdict_rows"]


def _columns(names: Sequence[str]) -> Columns:
    return {name: [] for name in names}


def _protocol(record: TraceRecord) -> dict[str, Any]:
    return record.protocol


def report_rows(records: Sequence[TraceRecord], index: TreeIndex, names: Sequence[str]) -> Columns:
    """One row per trace holding a TaskBrief or TaskReport (recursive mode), with the parent's review."""
    cols = _columns(names)
    reviews: dict[str, dict[str, Any]] = {}
    for record in records:
        for review in _protocol(record).get("reviews") or []:
            if isinstance(review, dict) and review.get("child_trace_id"):
                reviews[review["child_trace_id"]] = review
    for record in records:
        protocol = _protocol(record)
        brief, report = protocol.get("brief"), protocol.get("report")
        if not isinstance(brief, dict) and not isinstance(report, dict):
            continue
        brief, report = brief if isinstance(brief, dict) else {}, report if isinstance(report, dict) else {}
        review = reviews.get(record.trace_id, {})
        values = {
            "trace_id": record.trace_id, "parent_trace_id": record.trace.get("parent_trace_id"),
            "root_trace_id": index.root[record.trace_id], "depth": index.depth[record.trace_id],
            "role": trace_role(record.trace), "objective": brief.get("objective"), "brief": brief,
            "outcome": report.get("outcome"), "summary": report.get("summary"),
            "outputs": list(report.get("outputs") or []), "evidence": list(report.get("evidence") or []),
            "open_issues": list(report.get("open_issues") or []), "artifacts": list(report.get("artifacts") or []),
            "submitted_by": report.get("submitted_by"),
            "review_decision": review.get("decision"), "review_feedback": review.get("feedback"),
        }
        for name in names:
            cols[name].append(values[name])
    return cols


def validation_rows(records: Sequence[TraceRecord], names: Sequence[str]) -> Columns:
    """One row per judged criterion (one row with no criterion for a validation without any)."""
    cols = _columns(names)
    for record in records:
        for number, validation in enumerate(_protocol(record).get("validations") or []):
            if not isinstance(validation, dict):
                continue
            criteria: list[dict[str, Any] | None] = [c for c in validation.get("criteria") or [] if isinstance(c, dict)] or [None]
            for position, criterion in enumerate(criteria):
                criterion = criterion or {}
                values = {
                    "trace_id": validation.get("target_trace_id") or record.trace_id,
                    "validator_trace_id": validation.get("validator_trace_id"),
                    "validation_index": number, "scope": validation.get("scope"), "verdict": validation.get("verdict"),
                    "summary": validation.get("summary"),
                    "criterion_index": position if criterion else None, "criterion": criterion.get("criterion"),
                    "criterion_verdict": criterion.get("verdict"), "criterion_evidence": criterion.get("evidence"),
                    "created_at": validation.get("created_at"),
                }
                for name in names:
                    cols[name].append(values[name])
    return cols


def verdict_rows(records: Sequence[TraceRecord], names: Sequence[str]) -> Columns:
    """One row per validation (a verdict on one report or one root answer), with its criteria counted."""
    cols = _columns(names)
    for record in records:
        for number, validation in enumerate(_protocol(record).get("validations") or []):
            if not isinstance(validation, dict):
                continue
            verdicts = [c.get("verdict") for c in validation.get("criteria") or [] if isinstance(c, dict)]
            values = {
                "trace_id": validation.get("target_trace_id") or record.trace_id,
                "validator_trace_id": validation.get("validator_trace_id"), "validation_index": number,
                "scope": validation.get("scope"), "verdict": validation.get("verdict"), "summary": validation.get("summary"),
                "criteria": len(verdicts), "passed": verdicts.count("pass"), "failed": verdicts.count("fail"),
                "unknown": verdicts.count("unknown"), "created_at": validation.get("created_at"),
            }
            for name in names:
                cols[name].append(values[name])
    return cols


def claim_rows(records: Sequence[TraceRecord], names: Sequence[str]) -> Columns:
    """One row per claim (or whole-report signal) an evidence check judged: text, citations, verdict, reason, location."""
    cols = _columns(names)
    for record in records:
        for number, validation in enumerate(_protocol(record).get("validations") or []):
            if not isinstance(validation, dict) or validation.get("scope") != "evidence":
                continue
            for item in validation.get("claims") or []:
                if not isinstance(item, dict):
                    continue
                values = {
                    "trace_id": validation.get("target_trace_id") or record.trace_id, "validation_index": number,
                    "claim_index": item.get("claim"), "claim": item.get("text"), "evidence": list(item.get("evidence") or []),
                    "check_verdict": item.get("verdict"), "code": item.get("code"), "reason": item.get("reason"),
                    "location": item.get("location"), "excerpt": item.get("excerpt"),
                    "report_verdict": validation.get("verdict"), "created_at": validation.get("created_at"),
                }
                for name in names:
                    cols[name].append(values[name])
    return cols
