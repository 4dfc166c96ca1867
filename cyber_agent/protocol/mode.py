"""Agent modes (SPEC A1, A2, A4, A7, A12): legacy vs recursive, as policy over one runner.

`policy_from_environment` reads `AGENT_MODE` once, when a new root trace is created, before
any model call. The root freezes the policy into its `Trace.lineage`; descendants inherit it from the
persisted root, never from the current environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from cyber_agent.errors import ConfigurationError
from cyber_agent.trace.models import Trace
from cyber_agent.trace.state import AgentMode, CreatedByTool, Lineage

__all__ = [
    "AGENT_MODE_REVISION",
    "AgentMode",
    "AgentPolicy",
    "MAX_CHILDREN_PER_PARENT",
    "MAX_RECURSIVE_DEPTH",
    "policy_from_environment",
    "validate_recursive_child_execution",
]

AGENT_MODE_REVISION = 2
MAX_RECURSIVE_DEPTH = 5
MAX_CHILDREN_PER_PARENT = 6
MAX_CONTEXT_REFS = 8

# Tools a recursive child may ever hold (before intersection with what its parent has).
RECURSIVE_CHILD_TOOLS = frozenset({
    "goal", "read_file", "list_files", "agent", "read_context_ref", "submit_report", "review_task",
})
# Never granted to recursive children (A6).
RECURSIVE_CHILD_FORBIDDEN = frozenset({"evaluate", "bash_command"})


@dataclass(frozen=True, kw_only=True)
class AgentPolicy:
    """The frozen mode policy of one task tree."""

    mode: AgentMode = "legacy"
    """`legacy` (one level of sub-agents) or `recursive` (governed task tree)."""
    revision: int = AGENT_MODE_REVISION
    """Protocol revision the tree was created with."""

    @property
    def is_recursive(self) -> bool:
        """True for recursive trees."""
        return self.mode == "recursive"

    @property
    def max_depth(self) -> int:
        """Deepest local sub-agent allowed (root is depth 0)."""
        return MAX_RECURSIVE_DEPTH if self.is_recursive else 1

    @property
    def child_quota(self) -> int | None:
        """Local direct children per parent, counted cumulatively (None: unlimited)."""
        return MAX_CHILDREN_PER_PARENT if self.is_recursive else None

    @property
    def cascade_completion(self) -> bool:
        """Legacy completes parents automatically and advances focus; recursive reviews instead."""
        return not self.is_recursive

    @property
    def propagate_stop(self) -> bool:
        """A stop reaches every registered descendant, in both modes (legacy sub-agents too)."""
        return True

    def lineage(self, *, root_trace_id: str, depth: int, created_by_tool: CreatedByTool | None = None,
                tool_snapshot: list[str] | None = None) -> Lineage:
        """The lineage a trace of this tree carries (A2)."""
        return Lineage(mode=self.mode, revision=self.revision, depth=depth, root_trace_id=root_trace_id,
                       created_by_tool=created_by_tool, tool_snapshot=tool_snapshot)

    @classmethod
    def of(cls, trace: Trace) -> AgentPolicy:
        """Read the persisted policy of a trace; a historic trace without it is legacy."""
        return cls(mode=trace.lineage.mode, revision=trace.lineage.revision)


def policy_from_environment(environ: Mapping[str, str] | None = None, *, override: str | None = None) -> AgentPolicy:
    """Read `AGENT_MODE` (default legacy) for a new root; `override` (e.g. RunConfig.agent_mode) wins."""
    env = os.environ if environ is None else environ
    if "AGENT_RECURSION_ENABLED" in env:
        raise ConfigurationError(
            "AGENT_RECURSION_ENABLED", "was removed; unset it and set AGENT_MODE=recursive (or legacy) instead"
        )
    raw = override if override is not None else env.get("AGENT_MODE", "legacy")
    # The values are exact: "Recursive " is refused, never folded to a mode the user did not write.
    if raw == "legacy":
        return AgentPolicy(mode="legacy")
    if raw == "recursive":
        return AgentPolicy(mode="recursive")
    setting = "agent_mode" if override is not None else "AGENT_MODE"
    raise ConfigurationError(setting, f"must be exactly 'legacy' or 'recursive' (lower case, no spaces), got {raw!r}")


def validate_recursive_child_execution(child_execution_mode: str, max_parallel_children: int) -> None:
    """Check the batch scheduling settings of a recursive run (A7)."""
    if child_execution_mode not in ("sequential", "parallel"):
        raise ConfigurationError(
            "child_execution_mode", f"must be 'sequential' or 'parallel', got {child_execution_mode!r}"
        )
    # bool is an int subclass; True must not pass as 1.
    if (not isinstance(max_parallel_children, int) or isinstance(max_parallel_children, bool)
            or not 1 <= max_parallel_children <= 2):
        raise ConfigurationError("max_parallel_children", f"must be 1 or 2, got {max_parallel_children!r}")
