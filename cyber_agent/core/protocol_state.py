"""Seed path of `cyber_agent/protocol/state.py`: a thin re-export (the recursive protocol's home)."""

from cyber_agent.protocol.state import (
    append_review,
    append_validation,
    report_changes,
    store_report,
    update_protocol,
    with_protocol,
)

__all__ = [
    "append_review",
    "append_validation",
    "report_changes",
    "store_report",
    "update_protocol",
    "with_protocol",
]
