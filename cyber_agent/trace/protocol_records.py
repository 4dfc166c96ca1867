"""Records of the recursive task protocol (SPEC A3, A5): anchor, brief, report, validation, review.

All are pydantic models because they are persisted on the trace (`Trace.protocol`,
`Trace.root_setup`, see `trace/state.py`) and read from model input. They live in `trace/`
because the trace owns what it persists; `core/task_protocol.py` re-exports them at the seed's
path. See docs/recursive-protocol.md for the flow they belong to.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationInfo, field_validator, model_serializer, model_validator

from cyber_agent.trace.claim_records import MAX_CLAIMS, Claim, ClaimVerdict
from cyber_agent.trace.clock import utc_now

__all__ = [
    "ArtifactRef",
    "ValidationScope",
    "CriterionVerdict",
    "Outcome",
    "ReviewDecision",
    "RootTaskAnchor",
    "TaskBrief",
    "TaskReport",
    "TaskReview",
    "ValidationResult",
    "Verdict",
    "aggregate_verdict",
]

Verdict = Literal["pass", "fail", "unknown"]
Outcome = Literal["completed", "partial", "failed"]
ReviewDecision = Literal["accept", "revise", "replan", "split", "fail"]
ValidationScope = Literal["criteria", "root", "evidence"]

MAX_TEXT = 4000
MAX_ITEM = 1000
MAX_ITEMS = 20


def _clean_items(values: list[str], field: str) -> list[str]:
    out: list[str] = []
    for value in values:
        text = " ".join(str(value).split())
        if not text:
            raise ValueError(f"{field} must not contain empty items")
        if len(text) > MAX_ITEM:
            raise ValueError(f"{field} items must be at most {MAX_ITEM} characters (got {len(text)})")
        if text not in out:
            out.append(text)
    if len(out) > MAX_ITEMS:
        raise ValueError(f"{field} may hold at most {MAX_ITEMS} items (got {len(out)})")
    return out


class RootTaskAnchor(BaseModel):
    """The immutable goal of a recursive tree: objective, completion criteria, hard constraints."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    objective: str = Field(min_length=1, max_length=MAX_TEXT)
    """What the whole tree must achieve."""
    completion_criteria: list[str] = Field(min_length=1)
    """Checkable statements the root validator judges the final answer against."""
    constraints: list[str] = Field(default_factory=list)
    """Hard constraints every agent of the tree inherits."""

    @field_validator("objective")
    @classmethod
    def _objective(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("objective must not be blank")
        return value

    @field_validator("completion_criteria", "constraints")
    @classmethod
    def _items(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return _clean_items(value, info.field_name or "items")

    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON of the anchor."""
        return hashlib.sha256(json.dumps(self.model_dump(), sort_keys=True).encode()).hexdigest()


class TaskBrief(BaseModel):
    """What a parent asks a child to do."""

    model_config = ConfigDict(extra="forbid")

    objective: str = Field(min_length=1, max_length=MAX_TEXT)
    """What the child must achieve."""
    reason: str = Field(default="", max_length=MAX_TEXT)
    """Why the parent delegates it."""
    completion_criteria: list[str] = Field(min_length=1)
    """Checkable statements the child's validator judges."""
    expected_outputs: list[str] = Field(default_factory=list)
    """What the report should contain."""
    constraints: list[str] = Field(default_factory=list)
    """Hard constraints (the parent's are appended by normalization)."""
    context_refs: list[str | dict[str, str]] = Field(default_factory=list)
    """Context the parent grants: a ref id it holds, {"message_id": ...} or {"report_of": child id}."""

    @field_validator("objective", "reason")
    @classmethod
    def _text(cls, value: str, info: ValidationInfo) -> str:
        value = " ".join(value.split())
        if info.field_name == "objective" and not value:
            raise ValueError("objective must not be blank")
        return value

    @field_validator("completion_criteria", "expected_outputs", "constraints")
    @classmethod
    def _items(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return _clean_items(value, info.field_name or "items")


class ArtifactRef(BaseModel):
    """A pointer to something a child produced: a message of a trace in the same tree, with its hash."""

    model_config = ConfigDict(extra="forbid")

    message_id: str
    """The message holding the artifact (usually a tool result)."""
    sha256: str = ""
    """Hash of the message text when the report was submitted (filled by the runner)."""
    title: str = ""
    """What the artifact is."""


class TaskReport(BaseModel):
    """What a child reports back."""

    model_config = ConfigDict(extra="forbid")

    outcome: Outcome
    """completed, partial or failed (a stopped child reports failed)."""
    summary: str = Field(min_length=1, max_length=MAX_TEXT)
    """The result in a few sentences."""
    outputs: list[str] = Field(default_factory=list)
    """The concrete results (numbers, findings)."""
    artifacts: list[ArtifactRef] = Field(default_factory=list)
    """References to produced material."""
    evidence: list[str] = Field(default_factory=list)
    """How the child knows (claims a validator can check against the trajectory)."""
    open_issues: list[str] = Field(default_factory=list)
    """What is left or doubtful."""
    submitted_by: Literal["tool", "implicit", "runner"] = "tool"
    """`tool`: submit_report; `implicit`: a final text turned into a report; `runner`: stop/failure."""
    claims: list[Claim] = Field(default_factory=list, max_length=MAX_CLAIMS)
    """The results with their citations (`trace/claim_records.py`); `outputs` holds their texts."""

    @model_validator(mode="before")
    @classmethod
    def _claims_of_old_reports(cls, data: Any) -> Any:
        # A report written before claims existed (or given only outputs) gets one uncited claim per
        # output; one given only claims gets their texts as outputs. Stored fields stay as they were.
        if not isinstance(data, dict):
            return data
        outputs, claims = data.get("outputs") or [], data.get("claims") or []
        if outputs and not claims:
            return {**data, "claims": [{"text": str(o)[:1000]} for o in outputs if str(o).strip()][:MAX_CLAIMS]}
        if claims and not outputs:
            texts = [c.text if isinstance(c, Claim) else str(dict(c).get("text", "")) for c in claims]
            return {**data, "outputs": [t for t in texts if t.strip()]}
        return data

    DUMP_MAY_DROP: ClassVar[frozenset[str]] = frozenset({"claims"})
    """Keys the serializer below may leave out (a projected read walks the other fields, trace/record_fields.py)."""

    @model_serializer(mode="wrap")
    def _without_derived_claims(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Claims the before-validator would derive again (uncited, one per output) are not written:
        # a report without citations is stored exactly as before claims existed.
        data = handler(self)
        derived = [str(o)[:1000] for o in self.outputs if str(o).strip()][:MAX_CLAIMS]
        if isinstance(data, dict) and all(not c.evidence for c in self.claims) and [c.text for c in self.claims] == derived:
            data.pop("claims", None)
        return data


class CriterionVerdict(BaseModel):
    """A validator's verdict on one completion criterion."""

    criterion: str
    verdict: Verdict
    evidence: str = ""


class ValidationResult(BaseModel):
    """A validator's judgement of a report against the persisted trajectory."""

    scope: ValidationScope
    """criteria | root | evidence."""
    target_trace_id: str
    """The trace that was validated."""
    validator_trace_id: str | None = None
    """The validator's own trace."""
    verdict: Verdict
    """Aggregate: fail if any criterion fails, pass if all pass, else unknown."""
    criteria: list[CriterionVerdict] = Field(default_factory=list)
    summary: str = ""
    claims: list[ClaimVerdict] = Field(default_factory=list)
    """Scope `evidence`: the verdict per claim and per whole-report signal, with reason and location."""

    DUMP_MAY_DROP: ClassVar[frozenset[str]] = frozenset({"claims"})
    """Keys the serializer below may leave out (a projected read walks the other fields, trace/record_fields.py)."""

    @model_serializer(mode="wrap")
    def _without_empty_claims(self, handler: SerializerFunctionWrapHandler) -> Any:
        # A validator's result has no per-claim verdicts: it is stored exactly as before they existed.
        data = handler(self)
        if isinstance(data, dict) and not self.claims:
            data.pop("claims", None)
        return data
    created_at: datetime = Field(default_factory=utc_now)


class TaskReview(BaseModel):
    """A parent's decision on one child report."""

    child_trace_id: str
    decision: ReviewDecision
    feedback: str = ""
    created_at: datetime = Field(default_factory=utc_now)


def aggregate_verdict(verdicts: list[Verdict]) -> Verdict:
    """Fail if any fails, pass if all pass (and there is at least one), else unknown."""
    if any(v == "fail" for v in verdicts):
        return "fail"
    if verdicts and all(v == "pass" for v in verdicts):
        return "pass"
    return "unknown"
