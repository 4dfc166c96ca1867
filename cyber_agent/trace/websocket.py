"""The seed's path of the watch WebSocket (seed 003 "WebSocket 事件"): a re-export only.

The endpoint lives in `cyber_agent/server/watch_api.py`; WebSocket routing is owned by `server/`.
"""

from cyber_agent.server.watch_api import POLL_SECONDS, ConnectedMessage, router, wire_event

__all__ = ["POLL_SECONDS", "ConnectedMessage", "router", "wire_event"]
