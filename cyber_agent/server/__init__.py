"""The local Trace API server (the `server` extra: fastapi, uvicorn, websockets).

`cyber_agent.trace` never imports this package; the API modules named by seed 003
(`trace/api.py`, `trace/run_api.py`, `trace/websocket.py`) and the helpers here sit on top of
the runner. Reference: docs/trace-api.md.
"""

from cyber_agent.server.app import create_app
from cyber_agent.server.serve import ServeSettings, serve

__all__ = ["ServeSettings", "create_app", "serve"]
