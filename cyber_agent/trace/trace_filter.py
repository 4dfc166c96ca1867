"""Which traces a listing returns: one typed filter for every reader (issue 27, item 7).

    await store.list_traces(TraceFilter(status="failed", roots_only=True, limit=5))
    await store.list_traces(status="failed", limit=5)          # the same, as keywords

`TraceFilter` is the one declaration of the listing filters; the stores
(`cyber_agent/trace/store_base.py:BaseTraceStore.list_traces`), the notebook's read-only view
(`cyber_agent/notebook/store_view.py:RecordStore.list_traces`), the CLI's `list` and the
server's `GET /api/traces` all build one and apply it with `TraceFilter.matches` /
`TraceFilter.select`. Every filter is applied before `limit`; traces come newest first.
A bad value raises `InvalidUpdateError` naming the filter, the value and what it accepts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cyber_agent.errors import InvalidUpdateError
from cyber_agent.trace.models import Trace, TraceMode, TraceStatus
from cyber_agent.trace.state import AgentMode

__all__ = ["TraceFilter"]


class TraceFilter(BaseModel):
    """Filters of a trace listing (None: not filtered) and its limit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: TraceMode | None = None
    """Only traces of this `Trace.mode` (`call` or `agent`)."""
    status: TraceStatus | None = None
    """Only traces with this status."""
    agent_type: str | None = None
    """Only traces of this role (`main`, `delegate`, `validator`, ...)."""
    parent_trace_id: str | None = None
    """Only direct children of this trace."""
    created_by_tool: str | None = None
    """Only traces created by this tool (`agent` for sub-agents, `validator` for validators)."""
    uid: str | None = None
    """Only traces started by this user."""
    roots_only: bool = False
    """True: only root traces (no parent)."""
    agent_mode: AgentMode | None = None
    """Only trees of this mode (`legacy` or `recursive`, `Trace.lineage.mode`)."""
    model: str | None = None
    """Only traces run with this model spec (e.g. `demo`, `openai:gpt-4o`)."""
    since: datetime | None = None
    """Only traces created at or after this time (a time without a zone is UTC)."""
    limit: int | None = Field(default=50, ge=0)
    """At most this many traces, newest first (None: all)."""

    @field_validator("since")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value

    @classmethod
    def of(cls, where: TraceFilter | None = None, filters: Mapping[str, Any] | None = None) -> TraceFilter:
        """The filter `where` with keyword `filters` laid over it; InvalidUpdateError for a bad name or value."""
        if where is not None and not isinstance(where, TraceFilter):
            raise InvalidUpdateError(f"a trace listing takes a TraceFilter (or keyword filters), got {where!r}")
        if not filters:
            return where if where is not None else _DEFAULT
        try:
            return cls.model_validate({**(where.model_dump(exclude_unset=True) if where else {}), **filters})
        except ValidationError as exc:
            raise InvalidUpdateError(_explain(exc)) from None

    def matches(self, trace: Trace) -> bool:
        """True when `trace` passes every filter (the limit aside)."""
        return ((self.mode is None or trace.mode == self.mode)
                and (self.status is None or trace.status == self.status)
                and (self.agent_type is None or trace.agent_type == self.agent_type)
                and (self.parent_trace_id is None or trace.parent_trace_id == self.parent_trace_id)
                and (self.created_by_tool is None or trace.lineage.created_by_tool == self.created_by_tool)
                and (self.uid is None or trace.uid == self.uid)
                and (not self.roots_only or trace.parent_trace_id is None)
                and (self.agent_mode is None or trace.lineage.mode == self.agent_mode)
                and (self.model is None or trace.model == self.model)
                and (self.since is None or trace.created_at >= self.since))

    def select(self, traces: Iterable[Trace]) -> list[Trace]:
        """The matching traces, newest first (ties by trace id), at most `limit` of them."""
        out = sorted((t for t in traces if self.matches(t)), key=lambda t: (t.created_at, t.trace_id), reverse=True)
        return out if self.limit is None else out[:self.limit]


def _explain(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        name = ".".join(str(p) for p in error["loc"]) or "filter"
        if error["type"] == "extra_forbidden":
            known = ", ".join(TraceFilter.model_fields)
            parts.append(f"unknown trace filter {name!r}; the filters are: {known}")
        else:
            parts.append(f"trace filter {name}={error.get('input')!r}: {error['msg']}")
    return "; ".join(parts)


_DEFAULT = TraceFilter()
