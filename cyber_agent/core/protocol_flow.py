"""Seed path of `cyber_agent/protocol/flow.py`: a thin re-export (the recursive protocol's home)."""

from cyber_agent.protocol.flow import (
    MAX_ROOT_ATTEMPTS,
    STATE_TOOLS,
    FinalTextDecision,
    RunView,
    on_final_text,
)

__all__ = [
    "FinalTextDecision",
    "MAX_ROOT_ATTEMPTS",
    "RunView",
    "STATE_TOOLS",
    "on_final_text",
]
