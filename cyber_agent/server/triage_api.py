"""POST /api/triage: offer an external event (webhook, cron) to triage (SPEC H11).

    POST /api/triage   body: TriggerEnvelope   →   TriageResponse (decision, trace id of a started run)

`triage_router(get_triage, get_runner, get_launch=None)` builds the router; the three getters
are FastAPI dependencies, so they may take `Request` or the server's `State`. Without
`get_launch` a react/full_run run is awaited inside the request and the answer carries its
final status. With `get_launch` (the server passes its `RunManager.launch`) the run starts in
the background and the answer comes at once with status "running" and the trace id to watch.
Like `server/run_api.py`, this module sits on top of the runner and composes `core/`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from cyber_agent.core.config import RunConfig
from cyber_agent.core.triage import Triage, TriageDecision, TriggerEnvelope
from cyber_agent.server.json_body import JSONBodyRoute
from cyber_agent.trace.models import Trace

__all__ = ["Launch", "TriageResponse", "triage_router"]

Launch = Callable[[str, Callable[[], AsyncGenerator[Any, None]]], Awaitable[Trace]]
"""Starts a run in the background: `launch(trace_id, start)` → the trace as the run began
(the signature of `cyber_agent/server/runs.py:RunManager.launch`)."""


class TriageResponse(BaseModel):
    """Answer of POST /api/triage."""

    decision: TriageDecision
    """What triage decided (`cached` tells whether it came from the cache)."""
    trace_id: str | None = None
    """Trace of the run the decision started (react, full_run); None for drop and notify."""
    status: str | None = None
    """That run's status: "running" when launched in the background, else its final status."""
    answer: str | None = None
    """Its final answer when the run was awaited and completed."""


def _no_launch() -> Launch | None:
    return None


def triage_router(
    get_triage: Callable[..., Triage],
    get_runner: Callable[..., Any],
    get_launch: Callable[..., Launch | None] = _no_launch,
    *,
    config: RunConfig | None = None,
) -> APIRouter:
    """Return a router with POST /api/triage; `config` is the template of triggered runs (model, limits)."""
    router = APIRouter(tags=["triage"], route_class=JSONBodyRoute)

    @router.post("/api/triage", response_model=TriageResponse)
    async def triage_event(
        envelope: TriggerEnvelope,
        # Defaults, not Annotated: the getters are closure variables that string annotations cannot name.
        triage: Triage = Depends(get_triage),
        runner: Any = Depends(get_runner),
        launch: Launch | None = Depends(get_launch),
    ) -> TriageResponse:
        """Classify the event; start the run a react or full_run decision asks for."""
        decision = await triage.classify(envelope)
        planned = triage.plan(envelope, decision, config)
        if planned is None:
            return TriageResponse(decision=decision)
        if launch is not None:
            trace = await launch(planned.trace_id, lambda: runner.run(planned.messages, planned.config))
            return TriageResponse(decision=decision, trace_id=trace.trace_id, status=trace.status)
        result = await runner.run_result(planned.messages, planned.config)
        return TriageResponse(decision=decision, trace_id=result.trace.trace_id, status=result.status,
                              answer=result.answer)

    return router
