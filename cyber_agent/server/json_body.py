"""Strict request bodies: every POST body is UTF-8 JSON, at most 8 MiB, 64 levels deep, finite numbers.

FastAPI parses bodies with `json.loads`, which takes `NaN`, `Infinity` and `1e400` (as inf) —
none of them JSON (RFC 8259) — and lets them reach the endpoint or its 422 answer, which then
cannot be encoded (a 500). `JSONBodyRoute` checks the body before FastAPI reads it and raises
the errors `cyber_agent/server/http_errors.py` answers:

    body larger than MAX_BODY_BYTES                      → 413 payload_too_large
    a body whose Content-Type is not JSON                → 415 unsupported_media_type
    not UTF-8, not JSON, NaN / Infinity / 1e400, deeper
    than MAX_DEPTH, a lone surrogate, a 5000-digit int   → 422 (FastAPI's shape, naming the field)

Every router of the server is built with `route_class=JSONBodyRoute`, which also documents those
answers on each POST operation; a test posts hostile bodies to every POST route of the app.
"""

from __future__ import annotations

import email.message
import json
import math
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from cyber_agent.server.http_errors import error_responses

__all__ = ["MAX_BODY_BYTES", "MAX_DEPTH", "JSONBodyRoute", "check_json_body"]

MAX_BODY_BYTES = 8 * 1024 * 1024
"""Largest request body accepted, in bytes."""
MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in a body."""
_THREAD_THRESHOLD = 64 * 1024  # parse bigger bodies off the event loop

Loc = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class _NonFinite:
    """A number JSON cannot carry (NaN, Infinity, 1e400), kept as the text the client sent."""

    text: str


def _float(text: str) -> float | _NonFinite:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def _invalid(loc: Loc, kind: str, msg: str, value: str | None = None) -> RequestValidationError:
    return RequestValidationError([{"type": kind, "loc": loc, "msg": msg, "input": value}])


def _is_json(content_type: str) -> bool:
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def _parse(body: bytes) -> None:
    """Raise RequestValidationError unless `body` is strict JSON (see the module docstring)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid(("body",), "json_invalid", f"the body is not UTF-8 (byte {exc.start} is invalid)",
                       repr(body[exc.start:exc.start + 4])) from None
    try:
        value = json.loads(text, parse_constant=_NonFinite, parse_float=_float)
    except json.JSONDecodeError as exc:
        raise _invalid(("body", exc.pos), "json_invalid", f"JSON decode error: {exc.msg}") from None
    except RecursionError:
        raise _invalid(("body",), "json_too_deep", f"arrays and objects nest deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise _invalid(("body",), "json_invalid", f"JSON decode error: {exc}") from None
    _walk(value)


def _walk(root: Any) -> None:
    """Find the first non-finite number, too-deep container or unencodable string; name its place."""
    stack: list[tuple[Any, Loc]] = [(root, ("body",))]
    while stack:
        value, loc = stack.pop()
        if isinstance(value, _NonFinite):
            raise _invalid(loc, "finite_number", "JSON numbers must be finite: NaN, Infinity and numbers "
                           "beyond ±1.8e308 are not JSON; send a finite number or null", value.text)
        if isinstance(value, str):
            _check_text(value, loc)
        elif isinstance(value, (list, dict)):
            if len(loc) > MAX_DEPTH:
                raise _invalid(loc, "json_too_deep",
                               f"arrays and objects nest deeper than {MAX_DEPTH} levels")
            if isinstance(value, list):
                stack.extend((item, (*loc, index)) for index, item in enumerate(value))
            else:
                for key, item in value.items():
                    _check_text(key, loc)
                    stack.append((item, (*loc, key)))


def _check_text(text: str, loc: Loc) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _invalid(loc, "string_unicode", f"the string holds a lone surrogate (\\u{ord(text[exc.start]):04x}) "
                       f"at character {exc.start}; send valid Unicode") from None


async def check_json_body(request: Request) -> None:
    """Raise the 413 / 415 / 422 error a non-empty body of `request` deserves, or return."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise HTTPException(413, f"the body has {int(length)} bytes; the limit is {MAX_BODY_BYTES}")
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise HTTPException(413, f"the body has {len(body)} bytes; the limit is {MAX_BODY_BYTES}")
    if not body:
        return  # the endpoint's own validation says whether a body is required
    content_type = request.headers.get("content-type")
    if content_type is None or not _is_json(content_type):
        raise HTTPException(415, f"Content-Type {content_type!r} is not JSON; send Content-Type: application/json")
    if len(body) > _THREAD_THRESHOLD:
        await run_in_threadpool(_parse, body)
    else:
        _parse(body)


class JSONBodyRoute(APIRoute):
    """An APIRoute that checks a POST body with `check_json_body` before FastAPI parses it."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        if "POST" in (kwargs.get("methods") or ()):
            kwargs["responses"] = {**error_responses(413, 415, 422), **(kwargs.get("responses") or {})}
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            if request.method == "POST":
                await check_json_body(request)
            return await handler(request)

        return checked
