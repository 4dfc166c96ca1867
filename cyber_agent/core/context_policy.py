"""Seed path of `cyber_agent/protocol/briefs.py`: a thin re-export (the recursive protocol's home)."""

from cyber_agent.protocol.briefs import (
    MAX_REF_CHARS,
    build_child_task_message,
    grant_context_refs,
    normalize_task_brief,
    task_briefs_match,
)

__all__ = [
    "MAX_REF_CHARS",
    "build_child_task_message",
    "grant_context_refs",
    "normalize_task_brief",
    "task_briefs_match",
]
