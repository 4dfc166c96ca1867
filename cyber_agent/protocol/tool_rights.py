"""Tool rights (SPEC A6): which tools a run may see and call.

Static rights are computed once per run: requested ∩ registered ∩ the trace's frozen
snapshot (children and validators) ∩ what the mode, role and depth allow; recursive revision 2
drops every `remote_*` tool. Protocol state then
tightens them turn by turn (`tighten_by_state`). The same set drives the schemas the model
sees and `ToolRegistry.execute`, so a forged call to an unexposed tool is refused before its
arguments are touched.
"""

from __future__ import annotations

from collections.abc import Iterable

from cyber_agent.protocol.mode import (
    MAX_RECURSIVE_DEPTH,
    RECURSIVE_CHILD_FORBIDDEN,
    RECURSIVE_CHILD_TOOLS,
    AgentPolicy,
)
from cyber_agent.trace.models import Trace

__all__ = [
    "PROTOCOL_ONLY_TOOLS",
    "READ_ONLY_TOOLS",
    "REMOTE_PREFIX",
    "VALIDATOR_TOOLS",
    "child_tool_snapshot",
    "runtime_tool_names",
    "tighten_by_state",
]

VALIDATOR_TOOLS = frozenset({"read_trajectory", "read_artifact", "read_file", "list_files", "submit_validation", "web_search", "fetch_page"})
PROTOCOL_ONLY_TOOLS = frozenset({"submit_report", "review_task", "read_context_ref", "read_trajectory", "read_artifact", "submit_validation", "web_search", "fetch_page"})
WEB_TOOLS = frozenset({"web_search", "fetch_page"})
READ_ONLY_TOOLS = frozenset({"read_file", "list_files", "read_context_ref"})
REMOTE_PREFIX = "remote_"
REMOTE_FREE_REVISION = 2
"""Recursive trees of this revision or later never see or run `remote_*` tools."""


def runtime_tool_names(registered: Iterable[str], requested: Iterable[str] | None, trace: Trace) -> frozenset[str]:
    """Static tool rights of a run on `trace`."""
    registered_set = set(registered)
    names = registered_set if requested is None else set(requested) & registered_set
    # Only the runner writes a snapshot or a validator role, and only on sub-traces; on a root
    # they could only come from a hand-made record, so they grant nothing there.
    is_sub_trace = trace.parent_trace_id is not None
    snapshot = trace.lineage.tool_snapshot if is_sub_trace else None
    if snapshot is not None:
        names &= set(snapshot)
    policy = AgentPolicy.of(trace)
    depth = trace.lineage.depth
    if policy.is_recursive and policy.revision >= REMOTE_FREE_REVISION:
        # Remote routing would bypass briefs, the tree budget and review (A4).
        names = {n for n in names if not n.startswith(REMOTE_PREFIX)}
    if trace.is_validator:
        names &= VALIDATOR_TOOLS
        assignment = trace.protocol.validator
        if assignment is None or not assignment.web_evidence_enabled:
            names -= WEB_TOOLS
        return frozenset(names)
    if not policy.is_recursive:
        names -= PROTOCOL_ONLY_TOOLS
        if depth >= policy.max_depth:
            names.discard("agent")
        return frozenset(names)
    names -= VALIDATOR_TOOLS - {"read_file", "list_files"}
    if trace.parent_trace_id is None:
        names.discard("submit_report")
        if "agent" in names:
            # Protocol tool, not a capability: a root that may delegate must be able to review,
            # even when its requested tool list did not name review_task.
            names |= {"review_task"} & registered_set
        return frozenset(names)
    names &= RECURSIVE_CHILD_TOOLS
    names -= RECURSIVE_CHILD_FORBIDDEN
    if depth >= MAX_RECURSIVE_DEPTH:
        names.discard("agent")
    return frozenset(names)


def child_tool_snapshot(parent_static: frozenset[str], child_depth: int, registered: Iterable[str]) -> frozenset[str]:
    """Frozen rights of a new recursive child: parent effective ∩ child-allowed ∩ depth-allowed."""
    names = set(parent_static) & RECURSIVE_CHILD_TOOLS
    names -= RECURSIVE_CHILD_FORBIDDEN
    if child_depth >= MAX_RECURSIVE_DEPTH:
        names.discard("agent")
    # Protocol tools of a child: it reports, and reviews only if it can delegate.
    registered_set = set(registered)
    names |= {"submit_report"} & registered_set
    if "agent" in names:
        names |= {"review_task"} & registered_set
    return frozenset(names)


SIDE_BRANCH_FORBIDDEN = frozenset({"agent", "submit_report", "review_task", "submit_validation"})
"""Tools that change protocol state: never run on a side branch (a reflection is not protocol work)."""


def tighten_by_state(static: frozenset[str], trace: Trace, *, side_branch: str | None = None) -> frozenset[str]:
    """Narrow static rights by protocol state: pending reviews allow only review and reading.

    On a side branch, protocol tools are withheld: the branch never touches protocol state.
    """
    if side_branch is not None:
        static = static - SIDE_BRANCH_FORBIDDEN
    if trace.protocol.pending_reviews:
        return frozenset(static & (READ_ONLY_TOOLS | {"review_task"}))
    return frozenset(static - {"review_task"})
