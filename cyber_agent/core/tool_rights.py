"""Seed path of `cyber_agent/protocol/tool_rights.py`: a thin re-export (the recursive protocol's home)."""

from cyber_agent.protocol.tool_rights import (
    PROTOCOL_ONLY_TOOLS,
    READ_ONLY_TOOLS,
    REMOTE_FREE_REVISION,
    REMOTE_PREFIX,
    SIDE_BRANCH_FORBIDDEN,
    VALIDATOR_TOOLS,
    WEB_TOOLS,
    child_tool_snapshot,
    runtime_tool_names,
    tighten_by_state,
)

__all__ = [
    "PROTOCOL_ONLY_TOOLS",
    "READ_ONLY_TOOLS",
    "REMOTE_FREE_REVISION",
    "REMOTE_PREFIX",
    "SIDE_BRANCH_FORBIDDEN",
    "VALIDATOR_TOOLS",
    "WEB_TOOLS",
    "child_tool_snapshot",
    "runtime_tool_names",
    "tighten_by_state",
]
