"""Typed runner-owned state of a trace (SPEC A2–A11, T7): lineage, protocol, root setup.

Each model is a field of `cyber_agent/trace/models.py:Trace`; `Trace.context` holds only the
user's own keys. A record written before the state was typed kept these values as 21 keys of
`Trace.context`; `migrate_context` lifts them into the typed fields when such a record is
loaded (`Trace`'s `mode="before"` validator), so old traces load and continue unchanged.

    Trace
    ├── lineage: Lineage            mode, revision, depth, root, created_by_tool, tool snapshot, child count
    ├── protocol: ProtocolState     brief, report, validations, reviews, pending children, context refs,
    │                               validator assignment, ended_by
    ├── root_setup: RootSetup|None  anchor + hash, budget limits, validator models/search, child execution
    ├── run_config: RunConfigSnapshot|None   behaviour snapshot with its hash (T7)
    └── side_branches: {label: SideBranchRecord}   e.g. `reflection`; never protocol state
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cyber_agent.trace.budget_limits import ResourceBudget
from cyber_agent.trace.protocol_records import (
    RootTaskAnchor,
    TaskBrief,
    TaskReport,
    TaskReview,
    ValidationResult,
    ValidationScope,
)

__all__ = [
    "RUNNER_OWNED_CONTEXT",
    "AgentMode",
    "ChildExecution",
    "ContextAccess",
    "ContextRef",
    "CreatedByTool",
    "EndedBy",
    "Lineage",
    "ProtocolState",
    "RootSetup",
    "RunConfigSnapshot",
    "SideBranchRecord",
    "ValidatorAssignment",
    "ValidatorModels",
    "ValidatorSearch",
    "migrate_context",
]

AgentMode = Literal["legacy", "recursive"]
CreatedByTool = Literal["agent", "validator"]

RUNNER_OWNED_CONTEXT = frozenset({
    "agent_mode", "agent_mode_revision", "agent_depth", "root_trace_id", "created_by_tool", "validation_scope",
    "validation_target", "validation_criteria", "web_evidence_enabled", "tool_snapshot", "task_protocol",
    "child_count", "context_access", "resource_budget", "root_task_anchor", "root_task_anchor_hash",
    "validator_models", "validator_search", "child_execution", "run_config_snapshot", "side_branches",
})
"""The context keys the runner wrote before its state was typed; never a user's key."""


class _State(BaseModel):
    # Old records may carry keys a later revision dropped; they are ignored, never an error.
    model_config = ConfigDict(extra="ignore")


class Lineage(_State):
    """Where a trace sits in its tree and what it was created as (A2, A6)."""

    mode: AgentMode = "legacy"
    """The tree's mode, frozen at the root (`AGENT_MODE` is read only for new roots)."""
    revision: int = 2
    """Protocol revision the tree was created with."""
    depth: int = 0
    """0 for the root; a validator shares its target's depth."""
    root_trace_id: str | None = None
    """The tree's root (None on records that predate it: the trace is its own root)."""
    created_by_tool: CreatedByTool | None = None
    """`agent` for sub-agents and recursive children, `validator` for validators, None for roots."""
    tool_snapshot: list[str] | None = None
    """Frozen tool rights of a sub-trace (parent effective ∩ role ∩ depth); None on roots."""
    child_count: int = Field(default=0, ge=0)
    """Direct children created so far (counted cumulatively against the quota)."""


class EndedBy(_State):
    """The protocol tool that ended a run, with the summary that becomes its answer."""

    tool: str
    summary: str


class ContextRef(_State):
    """An immutable snapshot of context a parent granted to a child (A9)."""

    ref_id: str
    kind: Literal["message", "report"]
    source: str
    """Message id or child trace id the snapshot was taken from."""
    title: str = ""
    content: str = ""
    sha256: str = ""
    chars: int = 0


class ContextAccess(_State):
    """The context refs a child may read with `read_context_ref`."""

    refs: dict[str, ContextRef] = Field(default_factory=dict)
    chars: int = 0
    """Characters granted in all."""


class ValidatorAssignment(_State):
    """What a validator trace judges (A5, A11)."""

    scope: ValidationScope
    target_trace_id: str
    criteria: list[str] = Field(default_factory=list)
    web_evidence_enabled: bool = False


class ProtocolState(_State):
    """The recursive protocol's authoritative state on one trace (A5)."""

    brief: TaskBrief | None = None
    """A child's TaskBrief."""
    report: TaskReport | None = None
    """A child's latest TaskReport (a revision clears it; history stays in messages)."""
    validations: list[ValidationResult] = Field(default_factory=list)
    """Validation results on this trace, oldest first."""
    validator_count: int = 0
    """Validators started on this trace (their ids count from it)."""
    children: list[str] = Field(default_factory=list)
    """A parent's children that reached review, in order."""
    pending_reviews: list[str] = Field(default_factory=list)
    """A parent's children whose reports wait for its review."""
    reviews: list[TaskReview] = Field(default_factory=list)
    """A parent's review decisions, oldest first."""
    review: TaskReview | None = None
    """The parent's latest decision on this child."""
    validation: ValidationResult | None = None
    """A validator's own submitted result."""
    ended_by: EndedBy | None = None
    """Set when a protocol tool (submit_report, submit_validation) ended the run."""
    context_access: ContextAccess = Field(default_factory=ContextAccess)
    """Context refs granted to a child."""
    validator: ValidatorAssignment | None = None
    """On validator traces: what they judge."""


class ValidatorModels(_State):
    """Models of the tree's validators, frozen at the root."""

    criteria: str
    root: str


class ValidatorSearch(_State):
    """The validators' web-search setting, frozen at the root (A11)."""

    provider: str | None = None
    enabled: bool = False


class ChildExecution(_State):
    """How a batch of children runs (A7)."""

    mode: Literal["sequential", "parallel"] = "sequential"
    max_parallel_children: int = 2


class RootSetup(_State):
    """What a recursive root freezes when it is created (A3, A7, A10, A11).

    The runner always writes every field; they are optional so that a record written before a
    field existed loads as it was, and the runner refuses to continue it with a clear error.
    """

    anchor: RootTaskAnchor | None = None
    """The immutable goal of the tree."""
    anchor_hash: str | None = None
    """SHA-256 of the anchor when it was frozen (a continuation checks it)."""
    resource_budget: ResourceBudget | None = None
    """The tree's budget limits (A10)."""
    validator_models: ValidatorModels | None = None
    """Models of criteria and root validators (None: the validated trace's own model)."""
    validator_search: ValidatorSearch = Field(default_factory=ValidatorSearch)
    child_execution: ChildExecution = Field(default_factory=ChildExecution)


class RunConfigSnapshot(_State):
    """The behaviour part of a run's config with its hash (T7): what a continuation restores."""

    config: dict[str, Any]
    hash: str
    legacy_inferred: bool = False
    """True when inferred once for a historic legacy trace that had none."""


class SideBranchRecord(_State):
    """The last run on a side branch (e.g. `reflection`): it never moves the head or the status."""

    status: str
    answer: str | None = None
    error: str | None = None
    head_sequence: int = 0


_LINEAGE_KEYS = {"agent_mode": "mode", "agent_mode_revision": "revision", "agent_depth": "depth",
                 "root_trace_id": "root_trace_id", "created_by_tool": "created_by_tool",
                 "tool_snapshot": "tool_snapshot", "child_count": "child_count"}
_ROOT_KEYS = {"root_task_anchor": "anchor", "root_task_anchor_hash": "anchor_hash",
              "resource_budget": "resource_budget", "validator_models": "validator_models",
              "validator_search": "validator_search", "child_execution": "child_execution"}


def migrate_context(data: dict[str, Any]) -> dict[str, Any]:
    """Lift the runner-owned keys of an untyped record's `context` into the typed fields.

    A record that has no runner-owned context keys is returned as is. A record that has both
    typed fields and runner-owned context keys was not written by the runner: that is refused
    (the caller sees which keys, and where they live now).
    """
    context = data.get("context")
    if not isinstance(context, dict):
        return data
    owned = RUNNER_OWNED_CONTEXT.intersection(context)
    if not owned:
        return data
    typed = {"lineage", "protocol", "root_setup", "run_config", "side_branches"}.intersection(data)
    if typed:
        raise ValueError(
            f"context keys {sorted(owned)} are runner-owned and live in the typed fields "
            f"{sorted(typed)} (see cyber_agent/trace/state.py); keep only your own keys in context"
        )
    old = dict(context)
    out = {**data, "context": {k: v for k, v in old.items() if k not in RUNNER_OWNED_CONTEXT}}
    out["lineage"] = {new: old[key] for key, new in _LINEAGE_KEYS.items() if old.get(key) is not None}
    protocol = dict(old.get("task_protocol") or {})
    if "context_access" in old:
        protocol["context_access"] = old["context_access"]
    if {"validation_scope", "validation_target", "validation_criteria", "web_evidence_enabled"}.intersection(old):
        protocol["validator"] = {
            "scope": old.get("validation_scope", "criteria"), "target_trace_id": old.get("validation_target", ""),
            "criteria": old.get("validation_criteria") or [],
            "web_evidence_enabled": bool(old.get("web_evidence_enabled")),
        }
    out["protocol"] = protocol
    root = {new: old[key] for key, new in _ROOT_KEYS.items() if old.get(key)}
    if root:
        out["root_setup"] = root
    if old.get("run_config_snapshot") is not None:
        out["run_config"] = old["run_config_snapshot"]
    if old.get("side_branches"):
        out["side_branches"] = old["side_branches"]
    return out
