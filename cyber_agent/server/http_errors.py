"""How cyber_agent errors become HTTP answers (see docs/trace-api.md, "Errors").

    InvalidIdError, ConfigurationError, InvalidUpdateError,
    ToolArgumentError, GoalError, pydantic ValidationError   → 422 unprocessable
    NotFoundError (trace, message, goal, batch, extraction)   → 404 not_found
    ConflictError, RunError (incl. BudgetExceededError)       → 409 conflict
    LLMError                                                  → 502 model_error
    CorruptRecordError                                        → 500 corrupt_record (names the file)
    any other CyberAgentError                                 → 400 bad_request

Every error body is an `ErrorBody`: a machine-readable `error` code and a `detail` sentence
that names the offending value and what to do — FastAPI's own HTTP errors (unknown route,
wrong method, a body that is not JSON) included. Request validation keeps FastAPI's standard
422 body (`RequestValidationBody`, `{"detail": [...]}`) so generated clients recognise it.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException

from cyber_agent.errors import (
    ConfigurationError,
    ConflictError,
    CorruptRecordError,
    CyberAgentError,
    GoalError,
    InvalidIdError,
    InvalidUpdateError,
    LLMError,
    NotFoundError,
    RunError,
    ToolArgumentError,
)

__all__ = ["ErrorBody", "RequestValidationBody", "error_responses", "http_error", "install_error_handlers"]


class ErrorBody(BaseModel):
    """The JSON body of every error the server itself reports."""

    error: str
    """Machine-readable code: not_found, conflict, unprocessable, host_not_allowed, ..."""
    detail: str
    """What went wrong, naming the offending value and what to do."""
    path: str | None = None
    """For corrupt_record: the file that could not be read."""


class ValidationIssue(BaseModel):
    """One problem FastAPI found in a request (its standard 422 item)."""

    loc: list[str | int]
    """Where: ["body", "messages", 0, "role"], ["query", "limit"], ..."""
    msg: str
    """What is wrong."""
    type: str
    """Pydantic error type."""


class RequestValidationBody(BaseModel):
    """FastAPI's standard 422 body, for requests that fail validation before reaching an endpoint."""

    detail: list[ValidationIssue]
    """Every problem found."""


_HTTP_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 409: "conflict", 422: "unprocessable"}
_DESCRIPTIONS = {
    400: "A Host other than localhost/127.0.0.1 (host_not_allowed), or a body that is not JSON (bad_request).",
    403: "The Origin is neither an allowed local front end nor the API itself (origin_not_allowed).",
    404: "The trace, message, batch or extraction does not exist.",
    409: "The trace is running, waiting for approval, or fails closed; or the decision was already taken.",
    422: "A value is invalid; `detail` names it.",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries for the listed error codes (all share `ErrorBody`)."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        # A 422 comes from FastAPI's request validation or from the runner's checks: two shapes.
        model: Any = ErrorBody | RequestValidationBody if code == 422 else ErrorBody
        out[code] = {"model": model, "description": _DESCRIPTIONS[code]}
    return out


def http_error(exc: Exception) -> tuple[int, ErrorBody]:
    """Map an exception raised while serving a request to a status code and body."""
    detail = str(exc)
    if isinstance(exc, CorruptRecordError):
        return 500, ErrorBody(error="corrupt_record", detail=detail, path=str(exc.path))
    if isinstance(exc, (InvalidIdError, ConfigurationError, InvalidUpdateError, ToolArgumentError, GoalError)):
        return 422, ErrorBody(error="unprocessable", detail=detail)
    if isinstance(exc, ValidationError):
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
        return 422, ErrorBody(error="unprocessable", detail=problems)
    if isinstance(exc, NotFoundError):
        return 404, ErrorBody(error="not_found", detail=detail)
    if isinstance(exc, (ConflictError, RunError)):
        return 409, ErrorBody(error="conflict", detail=detail)
    if isinstance(exc, LLMError):
        return 502, ErrorBody(error="model_error", detail=detail)
    return 400, ErrorBody(error="bad_request", detail=detail)


def install_error_handlers(app: FastAPI) -> None:
    """Answer cyber_agent errors (and pydantic errors from building a RunConfig) as JSON."""

    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        status, body = http_error(exc)
        return JSONResponse(body.model_dump(exclude_none=True), status_code=status)

    async def handle_http(_request: Request, exc: Exception) -> JSONResponse:
        # FastAPI's own HTTP errors (unknown route, wrong method, unparseable body) in the same shape.
        assert isinstance(exc, HTTPException)
        code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
        body = ErrorBody(error=code, detail=str(exc.detail))
        return JSONResponse(body.model_dump(exclude_none=True), status_code=exc.status_code, headers=exc.headers)

    app.add_exception_handler(CyberAgentError, handle)
    app.add_exception_handler(ValidationError, handle)
    app.add_exception_handler(HTTPException, handle_http)
