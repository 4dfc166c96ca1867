"""Seed path of `cyber_agent/protocol/mode.py`: a thin re-export (the recursive protocol's home)."""

from cyber_agent.protocol.mode import (
    AGENT_MODE_REVISION,
    MAX_CHILDREN_PER_PARENT,
    MAX_CONTEXT_REFS,
    MAX_RECURSIVE_DEPTH,
    RECURSIVE_CHILD_FORBIDDEN,
    RECURSIVE_CHILD_TOOLS,
    AgentMode,
    AgentPolicy,
    policy_from_environment,
    validate_recursive_child_execution,
)

__all__ = [
    "AGENT_MODE_REVISION",
    "AgentMode",
    "AgentPolicy",
    "MAX_CHILDREN_PER_PARENT",
    "MAX_CONTEXT_REFS",
    "MAX_RECURSIVE_DEPTH",
    "RECURSIVE_CHILD_FORBIDDEN",
    "RECURSIVE_CHILD_TOOLS",
    "policy_from_environment",
    "validate_recursive_child_execution",
]
