"""The local Trace API server (the `server` extra: fastapi, uvicorn, websockets).

Every HTTP and WebSocket route lives here: `query_api.py` (seed 003 endpoints 1–3),
`run_api.py` (4–9), `review_api.py` (approvals, extractions), `watch_api.py` (the WebSocket),
`triage_api.py` (H11). They sit on top of the runner and compose `core/`. `cyber_agent.trace`
never imports this package, except the seed's paths `trace/api.py` and `trace/websocket.py`,
which only re-export `query_api` and `watch_api`. Reference: docs/trace-api.md.
"""

from cyber_agent.server.app import create_app
from cyber_agent.server.serve import ServeSettings, serve

__all__ = ["ServeSettings", "create_app", "serve"]
