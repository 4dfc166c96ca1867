"""The seed's path of the query endpoints (seed 003, endpoints 1–3): a re-export only.

The router lives in `cyber_agent/server/query_api.py`; HTTP routing is owned by `server/`.
"""

from cyber_agent.server.query_api import MessagesResponse, SubTrace, TraceDetail, TraceList, router, sub_traces_of

__all__ = ["MessagesResponse", "SubTrace", "TraceDetail", "TraceList", "router", "sub_traces_of"]
