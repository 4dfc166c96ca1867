"""Query endpoints of the Trace API (seed 003, endpoints 1–3; SPEC T9).

    GET /api/traces                      list traces (filters applied before limit)
    GET /api/traces/{trace_id}           trace + goal tree + direct sub-traces (validators included)
    GET /api/traces/{trace_id}/messages  main path (default) or all messages, optional head / goal

`cyber_agent/server/app.py:create_app` mounts this router; `cyber_agent/trace/api.py` (the seed's
path) re-exports it, and the rest of `cyber_agent.trace` never imports FastAPI. Reference:
docs/trace-api.md.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from cyber_agent.errors import ConfigurationError, TraceNotFoundError
from cyber_agent.server.http_errors import error_responses
from cyber_agent.server.json_body import JSONBodyRoute
from cyber_agent.server.state import State, TraceId
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.store_listing import DamagedEntry, list_traces_report
from cyber_agent.trace.trace_filter import TraceFilter

__all__ = ["MessagesResponse", "SubTrace", "TraceDetail", "TraceList", "TraceQuery", "router", "sub_traces_of"]

router = APIRouter(tags=["traces"], route_class=JSONBodyRoute)


class TraceList(BaseModel):
    """Traces matching the filters, newest first."""

    traces: list[Trace]
    """Root traces and sub-traces alike (filter with parent_trace_id / created_by_tool)."""
    errors: list[DamagedEntry] = []
    """Entries of the store's directory skipped as damaged or foreign, whatever the filters (docs/trace.md)."""


class SubTrace(Trace):
    """A direct child trace, with the tool that created it lifted out of its context."""

    created_by_tool: str | None = None
    """`agent` for business sub-agents, `validator` for Validator traces (`context.created_by_tool`)."""

    @classmethod
    def of(cls, trace: Trace) -> SubTrace:
        """Wrap a trace as a sub-trace entry."""
        return cls(**trace.model_dump(), created_by_tool=trace.lineage.created_by_tool)


class TraceDetail(BaseModel):
    """A trace, its goal tree and its direct sub-traces."""

    trace: Trace
    """Trace metadata, context included."""
    goal_tree: GoalTree | None
    """The trace's complete goal tree."""
    sub_traces: list[SubTrace]
    """Every trace whose parent_trace_id is this trace: sub-agents and validators."""


class MessagesResponse(BaseModel):
    """Messages of one trace."""

    trace_id: str
    """The trace."""
    mode: Literal["main_path", "all"]
    """Which messages: the main path from `head_sequence` back to the root, or all branches."""
    head_sequence: int | None
    """Head the main path was read from (None for mode=all)."""
    messages: list[Message]
    """In sequence order."""


async def sub_traces_of(store: TraceStore, trace_id: str) -> list[SubTrace]:
    """Direct children of a trace (agents and validators), oldest first."""
    # Damaged entries are reported by GET /api/traces; here they are only skipped.
    children = (await list_traces_report(store, parent_trace_id=trace_id, limit=None)).traces
    return [SubTrace.of(t) for t in sorted(children, key=lambda t: (t.created_at, t.trace_id))]


async def _require(store: TraceStore, trace_id: str) -> Trace:
    trace = await store.get_trace(trace_id)
    if trace is None:
        raise TraceNotFoundError(trace_id)
    return trace


class TraceQuery(TraceFilter):
    """The query of `GET /api/traces`: the listing filters (`TraceFilter`) and a bounded limit."""

    model_config = ConfigDict(extra="ignore", frozen=True)  # an unknown query parameter is ignored, as HTTP does

    # Over HTTP the strings and the limit are bounded (in process a filter takes any string and None).
    agent_type: str | None = Field(default=None, max_length=100)
    parent_trace_id: str | None = Field(default=None, max_length=220)
    created_by_tool: str | None = Field(default=None, max_length=100)
    uid: str | None = Field(default=None, max_length=200)
    model: str | None = Field(default=None, max_length=200)
    limit: int = Field(default=50, ge=1, le=1000)
    """At most this many traces, newest first (1..1000)."""


@router.get("/api/traces", response_model=TraceList, responses=error_responses(422))
async def list_traces(state: State, query: Annotated[TraceQuery, Query()]) -> TraceList:
    """List traces (root and sub-traces), newest first; filters apply before `limit`."""
    listing = await list_traces_report(state.store, query)
    return TraceList(traces=listing.traces, errors=listing.errors)


@router.get("/api/traces/{trace_id}", response_model=TraceDetail, responses=error_responses(404, 422))
async def get_trace(state: State, trace_id: TraceId) -> TraceDetail:
    """Return a trace, its goal tree and its direct sub-traces (validators marked by created_by_tool)."""
    trace = await _require(state.store, trace_id)
    return TraceDetail(
        trace=trace, goal_tree=await state.store.get_goal_tree(trace_id),
        sub_traces=await sub_traces_of(state.store, trace_id),
    )


@router.get("/api/traces/{trace_id}/messages", response_model=MessagesResponse, responses=error_responses(404, 422))
async def get_messages(
    state: State,
    trace_id: TraceId,
    mode: Literal["main_path", "all"] = "main_path",
    head: Annotated[int | None, Query(ge=0, description="Main-path head (default: the trace's head_sequence).")] = None,
    goal_id: Annotated[str | None, Query(max_length=100, description="Only messages recorded under this goal.")] = None,
) -> MessagesResponse:
    """Return the main path (from `head`, default the trace's head) or every message, optionally of one goal."""
    trace = await _require(state.store, trace_id)
    if mode == "all":
        messages = await state.store.get_trace_messages(trace_id)
        head_used = None
    else:
        head_used = trace.head_sequence if head is None else head
        if head_used > trace.total_messages:
            raise ConfigurationError("head", f"{head_used} is not a message of trace {trace_id!r} "
                                             f"(it has {trace.total_messages}; 0 means no message)")
        messages = await state.store.get_main_path_messages(trace_id, head_used) if head_used else []
    if goal_id is not None:
        messages = [m for m in messages if m.goal_id == goal_id]
    return MessagesResponse(trace_id=trace_id, mode=mode, head_sequence=head_used, messages=messages)
