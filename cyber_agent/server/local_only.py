"""Keep the Trace API local (seed 003 "运行边界"): Host and Origin checks for HTTP and WebSocket.

The API has no accounts or tokens; what keeps other parties out is that it only answers
local clients:

- **Host**: every request (HTTP and WebSocket) must carry `Host: localhost` or
  `Host: 127.0.0.1`, optionally with a port. Anything else — a public name, an IP, a DNS
  rebinding name, a missing header — is refused with 400 `host_not_allowed`.
- **Origin**: a request that carries an `Origin` header (every browser request that could be
  cross-site does) must come from an allowed local front-end origin or from the API's own
  origin (`http://{Host}`, e.g. the /docs page); otherwise 403 `origin_not_allowed`. This also
  closes the "simple request" hole that CORS leaves open: a foreign page cannot POST /stop.
  A request without `Origin` (curl, httpx, the `websockets` client, the CLI) is allowed: such
  clients run on this machine already, and browsers always send the header.

A refused WebSocket handshake gets the same JSON answer as an HTTP request, as an HTTP
response to the upgrade (ASGI `websocket.http.response`), or a 1008 close when the server
lacks that extension.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

__all__ = ["DEFAULT_ALLOWED_ORIGINS", "LOCAL_HOSTS", "LocalOnlyMiddleware", "refusal"]

DEFAULT_ALLOWED_ORIGINS: tuple[str, ...] = ("http://localhost:3000", "http://127.0.0.1:3000")
"""The local front-end origins allowed by default (seed 003: the front end listens on :3000)."""
LOCAL_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1")
"""Host names the API answers to."""

_HOST_RE = re.compile(r"^(?P<name>[^:\[\]]+)(?::(?P<port>\d{1,5}))?$")


def refusal(headers: Headers, allowed_origins: Collection[str], allowed_hosts: Collection[str] = LOCAL_HOSTS) -> tuple[int, str, str] | None:
    """Return (status, error, detail) when the request must be refused, else None."""
    host = headers.get("host")
    if host is None:
        return 400, "host_not_allowed", "the request has no Host header; use http://127.0.0.1:PORT or http://localhost:PORT"
    match = _HOST_RE.match(host.strip())
    if match is None or match.group("name").lower() not in allowed_hosts:
        return 400, "host_not_allowed", (
            f"Host {host!r} is not allowed; this API only answers local clients "
            f"({' or '.join(allowed_hosts)}, optionally with a port)"
        )
    origin = headers.get("origin")
    if origin is None:
        return None
    if origin in allowed_origins or origin.lower() == f"http://{host.strip().lower()}":
        return None
    shown = ", ".join(allowed_origins) or "none"
    return 403, "origin_not_allowed", (
        f"Origin {origin!r} is not an allowed front-end origin (allowed: {shown}); "
        "start the server with --allow-origin to add one"
    )


class LocalOnlyMiddleware:
    """Refuse HTTP requests and WebSocket handshakes whose Host or Origin is not local."""

    def __init__(self, app: ASGIApp, *, allowed_origins: Collection[str], allowed_hosts: Collection[str] = LOCAL_HOSTS) -> None:
        self.app = app
        self.allowed_origins = tuple(dict.fromkeys(allowed_origins))
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        problem = refusal(Headers(scope=scope), self.allowed_origins, self.allowed_hosts)
        if problem is None:
            await self.app(scope, receive, send)
            return
        status, error, detail = problem
        response = JSONResponse({"error": error, "detail": detail}, status_code=status)
        if scope["type"] == "http":
            await response(scope, receive, send)
            return
        websocket = WebSocket(scope, receive, send)
        if "websocket.http.response" in scope.get("extensions", {}):
            await websocket.send_denial_response(response)
        else:  # pragma: no cover - servers without the denial-response extension
            await websocket.close(code=1008, reason=detail[:120])
