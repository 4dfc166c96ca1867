"""create_app: the local Trace API as one FastAPI application (seed 003; SPEC T8–T10).

    LocalOnlyMiddleware      Host localhost/127.0.0.1 only; Origin only local front-ends
      └─ CORSMiddleware      CORS headers for the allowed front-end origins
           └─ routes         server/query_api.py (query), server/run_api.py (control),
                             server/review_api.py (approvals, extractions),
                             server/watch_api.py (watch), server/triage_api.py (triage, optional),
                             server/docs_page.py (/docs with local Swagger UI assets)

Every POST body passes `server/json_body.py:check_json_body` (strict JSON) and every error
answer is built by `server/http_errors.py`.

The lifespan owns the `RunManager` (every background run) and, on start, recovers approvals:
a batch that was executing when the previous process died becomes `execution_unknown` and
its trace fails closed; pending batches stay pending; decided batches that never started
resume in the background. On shutdown every run is cancelled and recorded as stopped.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from cyber_agent.core.approvals import recover_approvals
from cyber_agent.errors import ConfigurationError, CyberAgentError
from cyber_agent.server.docs_page import install_docs_page
from cyber_agent.server.http_errors import error_responses, install_error_handlers
from cyber_agent.server.local_only import DEFAULT_ALLOWED_ORIGINS, LocalOnlyMiddleware
from cyber_agent.server.openapi_text import install_user_openapi
from cyber_agent.server.query_api import router as query_router
from cyber_agent.server.review_api import resume
from cyber_agent.server.review_api import router as review_router
from cyber_agent.server.run_api import router as run_router
from cyber_agent.server.runs import RunManager
from cyber_agent.server.state import ServerState
from cyber_agent.server.triage_api import triage_router
from cyber_agent.server.watch_api import router as watch_router
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.reflection import CognitionLog

__all__ = ["create_app"]

log = logging.getLogger("cyber_agent.server")

RunnerFactory = Callable[[TraceStore], Any]


def create_app(
    *,
    store: TraceStore,
    runner: Any = None,
    runner_factory: RunnerFactory | None = None,
    allowed_origins: Collection[str] = DEFAULT_ALLOWED_ORIGINS,
    experiences_path: str | Path = ".cache/experiences.md",
    triage: Any = None,
) -> FastAPI:
    """Build the Trace API over `store`, running with `runner` (or `runner_factory(store)`).

    Pass `triage` (a `cyber_agent/core/triage.py:Triage`) to serve `POST /api/triage`.
    """
    if (runner is None) == (runner_factory is None):
        raise ConfigurationError("runner", "pass exactly one of runner= or runner_factory=")
    if runner is None:
        runner = runner_factory(store)  # type: ignore[misc]
    if getattr(runner, "trace_store", store) is not store:
        raise ConfigurationError("runner", "the runner must write to the same store the API reads")
    origins = tuple(allowed_origins)
    experiences = Path(experiences_path)
    runs = RunManager(runner, store)
    state = ServerState(store=store, runner=runner, runs=runs, cognition=CognitionLog(experiences),
                        experiences_path=experiences)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with runs:
            await _recover(state)
            yield

    title = "cyber_agent Trace API"
    app = FastAPI(
        title=title,
        version="1",
        summary="Local-only REST + WebSocket API over a trace store.",
        description="Query traces, start, continue, rewind, stop and reflect on runs, decide tool approvals, "
                    "and watch a trace's event stream. Answers only requests to localhost / 127.0.0.1. Shell "
                    "tools of a run started here wait for your approval unless its `shell_tools` says otherwise.",
        lifespan=lifespan,
        docs_url=None,  # served by install_docs_page from local assets, never a CDN
        redoc_url=None,
        responses=error_responses(400, 403),  # any request: refused Host / Origin (LocalOnlyMiddleware)
    )
    app.state.cyber_agent = state
    install_error_handlers(app)
    install_user_openapi(app)
    install_docs_page(app, title=title)
    # /api/traces/running is declared before /api/traces/{trace_id} so it is not read as an id.
    app.include_router(run_router)
    app.include_router(query_router)
    app.include_router(review_router)
    app.include_router(watch_router)
    if triage is not None:
        # H11: POST /api/triage classifies an external event; a full run starts a normal trace.
        app.include_router(triage_router(lambda: triage, lambda: state.runner, lambda: state.runs.launch))
    # add_middleware wraps: the last one added is outermost, so Host/Origin refusals come first.
    app.add_middleware(CORSMiddleware, allow_origins=list(origins), allow_methods=["GET", "POST"],
                       allow_headers=["Content-Type"], allow_credentials=False)
    app.add_middleware(LocalOnlyMiddleware, allowed_origins=origins)
    return app


async def _recover(state: ServerState) -> None:
    """Apply `recover_approvals` and resume every decided batch that never started.

    A failure here is logged, never fatal: the server must come up to let a person look. Safety
    does not depend on recovery finishing — the runner itself refuses to continue a trace whose
    batch is `executing` or `execution_unknown`.
    """
    try:
        states = await recover_approvals(state.store)
    except CyberAgentError as exc:
        log.error("approval recovery stopped early: %s", exc)
        return
    for trace_id, status in sorted(states.items()):
        if status == "corrupt":
            log.warning("store entry %s is damaged (see GET /api/traces errors); approval recovery skipped it", trace_id)
        elif status == "execution_unknown":
            log.warning("trace %s: an approved batch was executing when the server stopped; failed closed", trace_id)
        elif status == "decided":
            try:
                await resume(state.runs, state.runner, trace_id)
                log.info("trace %s: resumed its decided approval batch", trace_id)
            except Exception as exc:  # one trace must not keep the server from starting
                log.warning("trace %s: decided approval batch could not resume: %s", trace_id, exc)
