"""What the protocol asks of the runner: `ProtocolRunner`, `ChildSpec`, `ChildSetup`, `TreeBudget`.

The protocol package sits below `core/`: it never imports the runner. Delegation, validation
and the protocol tools describe the child they want (`ChildSpec`) and hand it to the runner
through `ProtocolRunner`, a protocol that `cyber_agent/core/runner.py:AgentRunner` satisfies.
The runner decides how: config inheritance, the started/completed event pair, stop
registration (`cyber_agent/core/child_run.py`).

A tool reaches the runner through `ToolContext.runner` (typed by the tools layer as
`cyber_agent/tools/context.py:ToolRunner`); `protocol_runner(ctx)` narrows it to this port.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from cyber_agent.errors import ToolError
from cyber_agent.tools.context import RunSettings, ToolContext
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.state import CreatedByTool, ProtocolState

__all__ = ["ChildResult", "ChildSetup", "ChildSpec", "Completion", "child_summary", "ProtocolRunner", "TreeBudget", "protocol_runner"]


@dataclass(frozen=True, kw_only=True)
class ChildSetup:
    """Runner-owned state of a new sub-trace (child or validator)."""

    tool_snapshot: frozenset[str]
    """The frozen tool rights of the sub-trace (parent effective ∩ allowed for its role and depth)."""
    created_by_tool: CreatedByTool = "agent"
    """`agent` for sub-agents and recursive children, `validator` for validators."""
    protocol: ProtocolState = field(default_factory=ProtocolState)
    """Initial protocol state: a child's brief and context refs, a validator's assignment."""
    parent: Trace | None = None
    """The parent as the caller already read it (saves a read; only its fixed lineage is used)."""
    root: Trace | None = None
    """The tree's root as the caller already read it (same)."""

    @property
    def is_validator(self) -> bool:
        """True for validator runs."""
        return self.created_by_tool == "validator"


@dataclass(frozen=True, kw_only=True)
class ChildSpec:
    """One child run the protocol wants: who it is, what it is given, what it inherits.

    New children (`setup` set) inherit the behaviour settings of `inherit`; a revision
    (`revision=True`, no setup) continues an existing trace under its persisted snapshot.
    """

    parent_trace_id: str
    """The parent whose event stream gets the started/completed pair."""
    trace_id: str
    """The child's id: a new sub-trace id, or the existing child's for a revision."""
    agent_type: str
    """The child's role or archetype (`delegate`, `explore`, `validator`, an archetype id)."""
    messages: Sequence[Mapping[str, Any]]
    """What the child is given: its task (new child) or the parent's note (revision)."""
    inherit: RunSettings | Mapping[str, Any] | None = None
    """The config a new child inherits from: the caller's run config, or a persisted snapshot (validators)."""
    parent_goal_id: str | None = None
    """The parent's goal the child works for."""
    setup: ChildSetup | None = None
    """Runner-owned state of a new child; None when continuing an existing one."""
    tools: Sequence[str] | None = None
    """Requested tools of a new child (None: its rights decide)."""
    workspace: str | None = None
    """Workspace of a new child (None: inherited)."""
    role_fields: frozenset[str] = frozenset()
    """Settings left to the child's role (e.g. an archetype's own `max_iterations`)."""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """Settings set explicitly (a validator's model and iteration cap)."""
    task: str = ""
    """Short task text for the `sub_trace_started` event."""
    revision: bool = False
    """True when an existing child continues (no new id, no new quota)."""
    events: bool = True
    """False for validators: they are not agent children of the trace they judge."""


class ChildResult(Protocol):
    """What a finished child run produced (`cyber_agent/core/runner_api.py:RunResult` satisfies it)."""

    @property
    def trace(self) -> Trace:
        """The child's trace as persisted at the end of its run."""
        ...

    @property
    def answer(self) -> str | None:
        """Its final answer (None when it did not complete)."""
        ...


def child_summary(result: ChildResult) -> str:
    """What a parent is told of a finished child: its answer, else its status and reason."""
    if result.answer is not None:
        return result.answer
    return f"({result.trace.status}: {result.trace.error_message or 'no answer'})"


Completion = Callable[[ChildResult], Awaitable[dict[str, Any]]]
"""Computes the completed event's `summary` and extra fields once the child's run has ended."""


class TreeBudget(Protocol):
    """The tree budget as the protocol uses it (`cyber_agent/core/resource_budget.py:ResourceBudgetController`)."""

    async def reserve_agents(self, count: int) -> None:
        """Reserve `count` new agents, all or nothing (BudgetExceededError when refused)."""
        ...

    async def release_agents(self, count: int) -> None:
        """Roll back reservations of children that were never created."""
        ...

    async def record_validation_work(self, *, tool_calls: int = 0, material_chars: int = 0, cost_usd: float = 0.0) -> None:
        """Count validator work against the tree budget (BudgetExceededError past a limit)."""
        ...


@runtime_checkable
class ProtocolRunner(Protocol):
    """The runner's services the recursive protocol and the `agent` tool use."""

    @property
    def trace_store(self) -> TraceStore:
        """Store the runner persists to."""
        ...

    def lock(self, key: str) -> asyncio.Lock:
        """A process-wide asyncio lock for `key`."""
        ...

    async def budget_for(self, trace: Trace) -> TreeBudget:
        """The budget of the tree `trace` belongs to."""
        ...

    def tool_names(self) -> list[str]:
        """Names of the runner's registered tools."""
        ...

    def register_recursive_child(self, trace_id: str, parent_id: str, *, queued: bool = True) -> None:
        """Register a child before it runs so a stop of any ancestor reaches it."""
        ...

    def release_child(self, trace_id: str) -> None:
        """Forget a child's stop registration once its run is over."""
        ...

    async def check_spawn(self, parent: Trace, *, workspace: str | None, agent_type: str | None) -> int:
        """Check that `parent` may start children (of `agent_type`); return the child depth, else ToolError."""
        ...

    async def run_child(
        self, spec: ChildSpec, *, complete: Completion | None = None, on_started: Callable[[], None] | None = None,
    ) -> ChildResult:
        """Run one child with its started/completed events in a pair; `on_started` right before it is created."""
        ...

    async def note_waiting_child(self, parent_trace_id: str, child: Trace) -> str | None:
        """A sub-agent ended waiting for an approval: hold the parent; return the child's pending batch id."""
        ...


def protocol_runner(ctx: ToolContext) -> ProtocolRunner:
    """The runner behind a tool call, as the protocol's port; ToolError when the call has none."""
    runner = ctx.runner
    if not isinstance(runner, ProtocolRunner):
        raise ToolError("this tool starts or judges sub-agents and needs the AgentRunner (ToolContext.runner); "
                        f"got {type(runner).__name__}")
    return runner
