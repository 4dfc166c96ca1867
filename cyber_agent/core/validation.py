"""Seed path of `cyber_agent/protocol/validation.py`: a thin re-export (the recursive protocol's home)."""

from cyber_agent.protocol.validation import (
    VALIDATOR_MAX_ITERATIONS,
    render_validation,
    run_validation,
)

__all__ = [
    "VALIDATOR_MAX_ITERATIONS",
    "render_validation",
    "run_validation",
]
