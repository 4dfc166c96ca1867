"""The side records a store keeps beside a trace, typed at the store boundary (issue 27, item 3).

    resource_usage   cyber_agent/trace/budget_limits.py:ResourceUsage   a recursive root's live usage
    tool_approvals   ToolApprovals (batches of ApprovalBatch)            approval batches of a trace
    stop_request     StopRequest                                         a persisted stop of a trace (and its subtree)

The stores keep them as JSON objects (`resource_usage.json`, a `side_records` row, ...) in the
shape they always had; the store methods (`get_resource_usage`, `get_tool_approvals`,
`get_stop_requests`) return these models, parsed here. A record that does not fit raises
`CorruptRecordError` naming where it lives and what is wrong, so a reader never acts on a
half-read record (the budget fails closed on it).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cyber_agent.errors import CorruptRecordError
from cyber_agent.trace.approval_records import ApprovalBatch
from cyber_agent.trace.budget_limits import ResourceUsage

__all__ = ["USAGE_ADDED_FIELDS", "StopRequest", "ToolApprovals", "side_record_json", "stop_request_from",
           "tool_approvals_from", "usage_from"]

USAGE_ADDED_FIELDS = frozenset({"unpriced_calls"})
"""`ResourceUsage` fields added after records were first written: an older record without them is not corrupt."""


class StopRequest(BaseModel):
    """A persisted request to stop a trace (seen by every process that runs part of its tree)."""

    model_config = ConfigDict(extra="ignore")

    reason: str = "stop requested"
    """Why the stop was requested (the run's error message says it)."""
    subtree: bool = True
    """True: every descendant stops too."""
    requested_at: datetime | None = None
    """When it was requested (UTC)."""


class ToolApprovals(BaseModel):
    """The approval state of a trace: every batch of tool calls that waited for a human decision."""

    model_config = ConfigDict(extra="ignore")

    batches: list[ApprovalBatch] = Field(default_factory=list)
    """Oldest first; the last is the current one (`cyber_agent/core/approvals.py`)."""


_Model = TypeVar("_Model", bound=BaseModel)


def usage_from(raw: Mapping[str, Any] | None, where: str) -> ResourceUsage | None:
    """The usage record `raw` (None: never written); CorruptRecordError when a field is missing or invalid.

    Defaults would silently reset a truncated record to zero usage, so every field must be there
    (but those of `USAGE_ADDED_FIELDS`)."""
    if raw is None:
        return None
    missing = sorted(set(ResourceUsage.model_fields) - set(raw) - USAGE_ADDED_FIELDS)
    if missing:
        raise CorruptRecordError(where, f"usage record lacks {', '.join(missing)}; the tree cannot continue safely")
    return _parse(ResourceUsage, raw, where, "invalid usage record")


def tool_approvals_from(raw: Mapping[str, Any] | None, where: str) -> ToolApprovals | None:
    """The approval state `raw` (None: never written); CorruptRecordError when a batch does not fit."""
    return None if raw is None else _parse(ToolApprovals, raw, where, "invalid approval batch")


def stop_request_from(raw: Mapping[str, Any] | None, where: str) -> StopRequest | None:
    """The stop request `raw`; None when there is none (never written, or withdrawn: `{}`)."""
    return None if not raw else _parse(StopRequest, raw, where, "invalid stop request")


def side_record_json(value: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """What a store persists for a side record given typed or as a mapping (written as given)."""
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else dict(value)


def _parse(model: type[_Model], raw: Mapping[str, Any], where: str, what: str) -> _Model:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"])
        raise CorruptRecordError(where, f"{what}: {field}: {error['msg']}") from None
