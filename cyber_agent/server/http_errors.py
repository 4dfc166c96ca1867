"""How cyber_agent errors become HTTP answers (see docs/trace-api.md, "Errors").

    InvalidIdError, ConfigurationError, InvalidUpdateError,
    ToolArgumentError, GoalError, pydantic ValidationError   → 422 unprocessable
    NotFoundError (trace, message, goal, batch, extraction)   → 404 not_found
    ConflictError, RunError (incl. BudgetExceededError)       → 409 conflict
    LLMError                                                  → 502 model_error
    CorruptRecordError                                        → 500 corrupt_record (names the file)
    any other CyberAgentError                                 → 400 bad_request
    RequestValidationError (FastAPI, server/json_body.py)     → 422 unprocessable, one item per field
    HTTPException (unknown route, wrong method, 413, 415)     → its status, ErrorBody

Every error body is an `ErrorBody`: a machine-readable `error` code and a `detail` sentence
that names the offending value and what to do — FastAPI's own HTTP errors (unknown route,
wrong method) and the body checks of `cyber_agent/server/json_body.py` included. Request
validation keeps FastAPI's standard 422 list (`RequestValidationBody`, `{"detail": [...]}`) so
generated clients recognise it, plus `error: "unprocessable"`; each item's `input` is the
offending value as text (`show_value`: NaN, Infinity, or at most 200 characters), so a hostile
value can neither break the encoding of the answer nor be echoed back whole.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
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

__all__ = [
    "ErrorBody", "RequestValidationBody", "error_responses", "http_error", "install_error_handlers", "show_value",
    "validation_body",
]


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
    """Pydantic error type, or json_invalid / json_too_deep / finite_number / string_unicode."""
    input: str | None = None
    """The offending value as text (`show_value`); absent when the value is missing."""


class RequestValidationBody(BaseModel):
    """FastAPI's standard 422 body, for requests that fail validation before reaching an endpoint."""

    error: str = "unprocessable"
    """Always unprocessable (as in `ErrorBody`)."""
    detail: list[ValidationIssue]
    """Every problem found."""


_HTTP_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 409: "conflict",
               413: "payload_too_large", 415: "unsupported_media_type", 422: "unprocessable"}
_DESCRIPTIONS = {
    400: "A Host other than localhost/127.0.0.1 (host_not_allowed), or a body that is not JSON (bad_request).",
    403: "The Origin is neither an allowed local front end nor the API itself (origin_not_allowed).",
    404: "The trace, message, batch or extraction does not exist.",
    409: "The trace is running, waiting for approval, or fails closed; or the decision was already taken.",
    413: "The body is larger than 8 MiB (payload_too_large).",
    415: "The body's Content-Type is not application/json (unsupported_media_type).",
    422: "A value is invalid, or the body is not strict JSON (NaN, Infinity, too deep, not UTF-8); `detail` names it.",
}
_SHOWN_CHARS = 200
_REPR = reprlib.Repr()  # Python 3.11's Repr takes no keyword arguments
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxlong = 3, 6, 6, 40
_REPR.maxstring = _REPR.maxother = _SHOWN_CHARS
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def show_value(value: Any) -> str:
    """Render a request value as short, encodable text for an error answer."""
    if isinstance(value, float) and not math.isfinite(value):
        return _NON_FINITE[repr(value)]
    text = value if isinstance(value, str) else _REPR.repr(value)
    if len(text) > _SHOWN_CHARS:
        text = f"{text[:_SHOWN_CHARS]}… ({len(text)} characters)"
    # A lone surrogate cannot be encoded as UTF-8: show it escaped.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _loc(loc: Any) -> list[str | int]:
    return [part if isinstance(part, int) else show_value(str(part)) for part in loc]


def validation_body(errors: Any) -> RequestValidationBody:
    """The 422 body for FastAPI/pydantic validation errors, every value shown as safe text."""
    issues = [ValidationIssue(loc=_loc(e.get("loc", ())), msg=show_value(str(e.get("msg", ""))),
                              type=str(e.get("type", "value_error")),
                              input=None if e.get("input") is None else show_value(e["input"]))
              for e in errors]
    return RequestValidationBody(detail=issues)


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
        problems = "; ".join(f"{'.'.join(map(str, _loc(e['loc']))) or 'value'}: {e['msg']}"
                             + ("" if e["type"] == "missing" else f" (got {show_value(e.get('input'))})")
                             for e in exc.errors())
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

    async def handle_validation(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse(validation_body(exc.errors()).model_dump(exclude_none=True), status_code=422)

    app.add_exception_handler(CyberAgentError, handle)
    app.add_exception_handler(RequestValidationError, handle_validation)
    app.add_exception_handler(ValidationError, handle)
    app.add_exception_handler(HTTPException, handle_http)
