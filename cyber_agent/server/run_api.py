"""Control endpoints of the Trace API (seed 003, endpoints 4–9; SPEC T7, T9).

    POST /api/traces                  create a root trace and run it in the background
    POST /api/traces/{id}/run         continue / rewind (after_message_id) / regenerate
    POST /api/traces/{id}/stop        stop (recursive: the subtree); cancels a pending approval
    GET  /api/traces/running          traces running in this server
    POST /api/traces/{id}/reflect     reflection side branch; lessons go to the review log
    GET  /api/experiences             the experiences file

Runs execute in the server's `cyber_agent/server/runs.py:RunManager`; everything that can
refuse a run is checked before the endpoint answers, so refusals are HTTP errors (409 while
an approval is pending or the trace is running, 422 for invalid values, 404 for unknown ids)
and a 202 means the run has started. Continue, rewind and reflect take their behaviour only
from the trace's run-config snapshot (T7); the request cannot override it.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from cyber_agent.core.approvals import cancel_batch
from cyber_agent.core.config import RunConfig
from cyber_agent.errors import ConfigurationError, TraceNotFoundError
from cyber_agent.server.http_errors import error_responses
from cyber_agent.server.json_body import JSONBodyRoute
from cyber_agent.server.run_models import (
    CreateTraceRequest,
    ReflectRequest,
    ReflectStarted,
    RunningTraces,
    RunRequest,
    RunStarted,
    StopResult,
)
from cyber_agent.server.state import ServerState, State, TraceId
from cyber_agent.trace.models import Trace
from cyber_agent.trace.reflection import extract_lessons, read_experiences, reflection_prompt
from cyber_agent.trace.trace_id import new_root_trace_id, parse_message_id

__all__ = ["Experiences", "router"]

router = APIRouter(tags=["runs"], route_class=JSONBodyRoute)

STOP_REASON = "stopped through the API"


class Experiences(BaseModel):
    """Answer of GET /api/experiences."""

    path: str
    """The experiences file (approved reflection lessons)."""
    content: str
    """Its text ('' before the first lesson is approved)."""


async def _require(state: ServerState, trace_id: str) -> Trace:
    trace = await state.store.get_trace(trace_id)
    if trace is None:
        raise TraceNotFoundError(trace_id)
    return trace


def _started(trace: Trace) -> RunStarted:
    return RunStarted(trace_id=trace.trace_id, status=trace.status, head_sequence=trace.head_sequence, trace=trace)


@router.get("/api/traces/running", response_model=RunningTraces)
async def running_traces(state: State) -> RunningTraces:
    """List the traces running in this server (sub-traces included)."""
    ids = state.runs.running()
    traces = [t for t in [await state.store.get_trace(i) for i in ids] if t is not None]
    return RunningTraces(trace_ids=ids, traces=traces)


def _provider_fields(body: CreateTraceRequest) -> dict[str, Any]:
    # Only what the client sent: unset fields stay unset so the server's environment fills them.
    fields: dict[str, Any] = {}
    if body.tool_dialect is not None:
        fields["tool_dialect"] = body.tool_dialect
    if body.provider is not None:
        fields["provider"] = body.provider
    return fields


@router.post("/api/traces", status_code=202, response_model=RunStarted, responses=error_responses(409, 422))
async def create_trace(state: State, body: CreateTraceRequest) -> RunStarted:
    """Create a root trace and run it in the background; answer with its id at once."""
    trace_id = new_root_trace_id()
    config = RunConfig(
        model=body.model, temperature=body.temperature, max_iterations=body.max_iterations, tools=body.tools,
        name=body.name, uid=body.uid, project_name=body.project_name, agent_mode=body.agent_mode,
        root_task_anchor=body.root_task_anchor.model_dump() if body.root_task_anchor is not None else None,
        child_execution_mode=body.child_execution_mode, max_parallel_children=body.max_parallel_children,
        new_trace_id=trace_id, shell_tools=body.shell_tools, **_provider_fields(body),
    )
    messages = [m.model_dump() for m in body.messages]
    trace = await state.runs.launch(trace_id, lambda: state.runner.run(messages, config))
    return _started(trace)


@router.post("/api/traces/{trace_id}/run", status_code=202, response_model=RunStarted,
             responses=error_responses(404, 409, 422))
async def run_trace(state: State, trace_id: TraceId, body: RunRequest) -> RunStarted:
    """Continue after the head, or rewind to `after_message_id` (a main-path message before the head) and run."""
    trace = await _require(state, trace_id)
    if any(m.role == "system" for m in body.messages):
        raise ConfigurationError("messages", "a system message only starts a new trace; the system prompt of "
                                             f"{trace_id!r} is fixed (send user messages)")
    after_sequence = None
    if body.after_message_id is not None:
        after_sequence = await _rewind_point(state, trace, body.after_message_id)
    config = RunConfig(trace_id=trace_id, after_sequence=after_sequence)
    messages = [m.model_dump() for m in body.messages]
    started = await state.runs.launch(trace_id, lambda: state.runner.run(messages, config))
    return _started(started)


async def _rewind_point(state: ServerState, trace: Trace, message_id: str) -> int | None:
    """The sequence to rewind to, or None when `message_id` is the head itself (a plain continue)."""
    owner, sequence = parse_message_id(message_id)
    if owner != trace.trace_id:
        raise ConfigurationError("after_message_id", f"{message_id!r} belongs to trace {owner!r}, not {trace.trace_id!r}")
    if sequence == trace.head_sequence:
        return None
    if sequence > trace.head_sequence:
        raise ConfigurationError("after_message_id", f"{message_id!r} is after the head ({trace.head_sequence}); "
                                                     "rewind only to a main-path message before the head")
    path = await state.store.get_main_path_messages(trace.trace_id, trace.head_sequence)
    if sequence not in {m.sequence for m in path}:
        raise ConfigurationError("after_message_id", f"{message_id!r} is not on the main path of {trace.trace_id!r} "
                                                     f"(head {trace.head_sequence}); list it with GET .../messages")
    return sequence


@router.post("/api/traces/{trace_id}/stop", response_model=StopResult, responses=error_responses(404, 422))
async def stop_trace(state: State, trace_id: TraceId) -> StopResult:
    """Stop a trace: persist the stop of its subtree, flag its run here, cancel a pending approval batch."""
    trace = await _require(state, trace_id)
    # Persisted first: runs of this subtree in other processes sharing the store halt at their next check.
    await state.store.request_stop(trace_id, STOP_REASON, subtree=True)
    flagged = state.runs.request_stop(trace_id, STOP_REASON)
    batch = await cancel_batch(state.store, trace_id, reason=STOP_REASON)
    idle = not flagged and not state.runs.is_running(trace_id)
    if idle and (batch is not None or trace.status in ("running", "waiting_confirmation")):
        # Nothing in this process runs it (waiting for approval, or left `running` by a killed server).
        trace = await state.store.update_trace(trace_id, status="stopped", error_message=STOP_REASON)
    else:
        trace = await _require(state, trace_id)
    return StopResult(trace_id=trace_id, stopped=flagged, cancelled_batch_id=batch.batch_id if batch else None,
                      status=trace.status)


@router.post("/api/traces/{trace_id}/reflect", status_code=202, response_model=ReflectStarted,
             responses=error_responses(404, 409, 422))
async def reflect(state: State, trace_id: TraceId, body: ReflectRequest | None = None) -> ReflectStarted:
    """Reflect on a trace on its `reflection` side branch; extracted lessons wait for review."""
    await _require(state, trace_id)
    focus = body.focus if body is not None else None
    reflection_id = uuid.uuid4().hex[:12]
    config = RunConfig(trace_id=trace_id, side_branch="reflection")
    prompt = [{"role": "user", "content": reflection_prompt(focus)}]

    async def extract() -> None:
        trace = await _require(state, trace_id)
        record = trace.side_branches.get("reflection")
        status = record.status if record is not None else None
        lessons = extract_lessons(record.answer) if record is not None and status == "completed" else []
        entries = state.cognition.add(trace_id=trace_id, reflection_id=reflection_id, lessons=lessons, focus=focus)
        await state.store.append_event(trace_id, "progress", {
            "stage": "reflection_extracted", "reflection_id": reflection_id,
            "reflection_status": status, "extraction_ids": [e.extraction_id for e in entries],
        })

    await state.runs.launch(trace_id, lambda: state.runner.run(prompt, config), on_done=extract, owns_status=False)
    return ReflectStarted(trace_id=trace_id, reflection_id=reflection_id)


@router.get("/api/experiences", response_model=Experiences)
async def experiences(state: State) -> Experiences:
    """Return the experiences file (lessons approved from reflections)."""
    return Experiences(path=str(state.experiences_path), content=read_experiences(state.experiences_path))
