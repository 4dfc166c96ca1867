"""Records of the recursive task protocol (SPEC A3, A5), at the seed's path.

The models are persisted on the trace, so `trace/` owns them: see
`cyber_agent/trace/protocol_records.py`. This module re-exports them unchanged.
"""

from __future__ import annotations

from cyber_agent.trace.protocol_records import (
    MAX_ITEM,
    MAX_ITEMS,
    MAX_TEXT,
    ArtifactRef,
    CriterionVerdict,
    Outcome,
    ReviewDecision,
    RootTaskAnchor,
    TaskBrief,
    TaskReport,
    TaskReview,
    ValidationResult,
    ValidationScope,
    Verdict,
    aggregate_verdict,
)

__all__ = [
    "MAX_ITEM",
    "MAX_ITEMS",
    "MAX_TEXT",
    "ArtifactRef",
    "CriterionVerdict",
    "Outcome",
    "ReviewDecision",
    "RootTaskAnchor",
    "TaskBrief",
    "TaskReport",
    "TaskReview",
    "ValidationResult",
    "ValidationScope",
    "Verdict",
    "aggregate_verdict",
]
