"""Claims with citations and the evidence check's per-claim verdicts (records of issue [evidence]).

A report's results are claims; each claim names the evidence it rests on: references into the
reporter's persisted trajectory and its descendants'. The deterministic evidence check
(`cyber_agent/protocol/evidence_check.py:check_report`) judges every claim against those
records and writes one `ClaimVerdict` per claim (and one per whole-report signal) into a
`ValidationResult` of scope `evidence`. Both are persisted on the trace, so the trace package
owns them, like the other protocol records (`trace/protocol_records.py`).

    EvidenceRef.kind
    ├── message       trace_id (default: the reporter) + sequence [+ quote]
    ├── tool_result   trace_id + tool_call_id [+ quote] [+ expression over numbers of the result]
    ├── child_report  trace_id of a child (or deeper descendant) whose report the claim repeats
    └── artifact      path of a workspace file, or message_id of an artifact message [+ sha256]
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["CheckCode", "Claim", "ClaimVerdict", "EvidenceKind", "EvidenceRef", "MAX_CLAIMS", "MAX_EVIDENCE"]

EvidenceKind = Literal["message", "tool_result", "child_report", "artifact"]
CheckCode = Literal[
    "supported", "uncited",
    "unknown_trace", "unreachable_trace", "unknown_message", "unknown_tool_call", "cites_error",
    "quote_not_found", "number_not_found", "expression_mismatch",
    "child_not_returned", "child_rejected", "repeats_rejected",
    "artifact_missing", "artifact_untouched", "artifact_changed",
    "no_tool_calls", "completed_over_errors",
]
"""Why a claim (or the whole report) got its verdict; docs/recursive-protocol.md has an example of each."""

MAX_CLAIMS = 20
MAX_EVIDENCE = 8
MAX_QUOTE = 500


class EvidenceRef(BaseModel):
    """One citation: where in the persisted tree a claim's support is, and what it quotes there."""

    model_config = ConfigDict(extra="forbid")

    kind: EvidenceKind
    """message | tool_result | child_report | artifact."""
    trace_id: str | None = None
    """The cited trace (default: the reporting trace); for child_report, the child's trace id."""
    sequence: int | None = Field(default=None, ge=1)
    """message: the cited message's sequence in that trace."""
    tool_call_id: str | None = None
    """tool_result: the id of the call whose result is cited."""
    quote: str = Field(default="", max_length=MAX_QUOTE)
    """A span that occurs verbatim (up to whitespace) in the cited text."""
    expression: str = Field(default="", max_length=2000)
    """tool_result/message: arithmetic over numbers of the cited text whose value the claim states."""
    path: str | None = None
    """artifact: a workspace file the claim says was produced."""
    message_id: str | None = None
    """artifact: a message of the tree holding the artifact."""
    sha256: str = ""
    """artifact: hash of the file or message when the report was submitted (filled by the runner)."""

    @model_validator(mode="after")
    def _needs_its_fields(self) -> EvidenceRef:
        missing = {
            "message": self.sequence is None,
            "tool_result": not self.tool_call_id,
            "child_report": not self.trace_id,
            "artifact": not (self.path or self.message_id),
        }[self.kind]
        if missing:
            need = {"message": "sequence", "tool_result": "tool_call_id", "child_report": "trace_id",
                    "artifact": "path or message_id"}[self.kind]
            raise ValueError(f"evidence of kind {self.kind!r} needs {need}")
        return self

    def location(self, reporter: str) -> str:
        """Where this citation points, as a reader would write it."""
        trace = self.trace_id or reporter
        if self.kind == "message":
            return f"{trace} message {self.sequence}"
        if self.kind == "tool_result":
            return f"{trace} tool call {self.tool_call_id}"
        if self.kind == "child_report":
            return f"report of {trace}"
        return f"artifact {self.path or self.message_id}"


class Claim(BaseModel):
    """One result of a report and the evidence it rests on (none for an implicit report's claims)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=1000)
    """The claim as the parent reads it (e.g. 'Region North: revenue 402.50')."""
    evidence: list[EvidenceRef] = Field(default_factory=list, max_length=MAX_EVIDENCE)
    """Citations into the reporter's trajectory and its descendants'."""


class ClaimVerdict(BaseModel):
    """The evidence check's verdict on one claim, or on the whole report (`claim` None)."""

    claim: int | None
    """0-based index of the claim in the report; None for a whole-report signal."""
    text: str
    """The claim's text (or the signal's name)."""
    verdict: Literal["pass", "fail", "unknown"]
    code: CheckCode
    reason: str = ""
    """What was checked and what was found, naming the offending value."""
    location: str = ""
    """Where: the cited trace, message, tool call or path."""
    excerpt: str = ""
    """The cited text around the quote or number (what a validator and a reader see)."""
    evidence: list[EvidenceRef] = Field(default_factory=list)
    """The claim's citations as the report gave them (so a reader needs no other record)."""
