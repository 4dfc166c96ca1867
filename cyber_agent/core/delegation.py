"""Seed path of `cyber_agent/protocol/delegation.py`: a thin re-export (the recursive protocol's home)."""

from cyber_agent.protocol.delegation import (
    continue_child,
    render_outcome,
    run_recursive_agents,
)

__all__ = [
    "continue_child",
    "render_outcome",
    "run_recursive_agents",
]
