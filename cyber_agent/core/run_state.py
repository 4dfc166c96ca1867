"""The state of one run and the services its collaborators may use.

`RunState` is what the loop and its collaborators (`core/trace_setup.py`, `core/turn.py`,
`core/turn_tools.py`, `core/protocol_flow.py`) read and update during one run; `RunServices`
is what they may call: the store, the tool registry, the halt check, progress and message
persistence. Neither holds the `AgentRunner`: a collaborator that needs the runner's public
API gets `core/runner_api.py:RunnerHandle`.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cyber_agent.protocol.mode import AgentMode, AgentPolicy
from cyber_agent.core.approvals import ApprovalBatch
from cyber_agent.core.harness import RunHarness
from cyber_agent.core.hooks import PostTurnHook, ProgressEvent, ProgressKind, StopHook
from cyber_agent.core.resource_budget import ResourceBudgetController
from cyber_agent.core.stop import StopRegistry, persisted_stop_reason
from cyber_agent.errors import RunError
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.models import Message, MessageMetadata, Trace
from cyber_agent.trace.protocols import TraceStore

__all__ = ["BudgetLookup", "RunServices", "RunState"]

BudgetLookup = Callable[[Trace], Awaitable[ResourceBudgetController]]
"""Return the budget controller of the tree a trace belongs to (`AgentRunner.budget_for`)."""


@dataclass(kw_only=True)
class RunState:
    """Mutable state of one run: built by `prepare_run`, updated by the loop and its collaborators."""

    trace: Trace
    """The run's trace as last read or written by this run."""
    history: list[dict[str, Any]]
    """The provider-format history the next model call sees (loaded once, then only appended to)."""
    head: int
    """Sequence of the last message on this run's path."""
    goal_id: str | None
    """Goal in focus; new messages are attached to it."""
    root_goal_id: str | None
    """The trace's root goal, completed with the answer."""
    allowed: frozenset[str]
    """Tools the model may see and call now (tightened by protocol state)."""
    depth: int
    """Depth in the agent tree (0 for a root)."""
    policy: AgentPolicy
    """Mode and limits of the tree."""
    new_messages: list[Message] = field(default_factory=list)
    """Messages persisted while preparing the run (yielded before the loop)."""
    budget: ResourceBudgetController | None = None
    """The tree budget (recursive runs only)."""
    root_validations: int = 0
    """Root validator verdicts that did not pass in this run."""
    static_allowed: frozenset[str] = frozenset()
    """Tool rights of the run before protocol state tightens them."""
    schemas: list[dict[str, Any]] | None = None
    """Tool schemas the next model call offers (None when no tool is allowed)."""
    fixed_schemas: list[dict[str, Any]] | None = None
    """Under a text dialect: the schemas of the static rights, sent on every call so the system prompt never changes (H2)."""
    announced: frozenset[str] | None = None
    """Under a text dialect: the tightened tool set last told to the model in a message (None: none in force)."""
    branch: str | None = None
    """Side branch (reflection) this run writes to, or None for the main path."""
    resume_batch: ApprovalBatch | None = None
    """A decided approval batch to execute before the next model call."""
    iterations: int = 0
    """Model turns taken."""
    prompt_tokens: int = 0
    """Prompt tokens of this run's model turns."""
    completion_tokens: int = 0
    """Completion tokens of this run's model turns."""
    cost: float = 0.0
    """USD spent by this run (model turns and helper calls)."""
    tool_names: list[str] = field(default_factory=list)
    """Names of the tools called, in order."""
    workspace: Path | None = None
    """Directory tools are confined to (resolved on the first tool call)."""
    harness: RunHarness | None = None
    """Context guard and tool-result shaping (set when the loop starts)."""
    ancestry: tuple[str, ...] = ()
    """This trace's id and its ancestors' ids, nearest first: whose persisted stops reach this run."""

    @property
    def mode(self) -> AgentMode:
        """legacy or recursive."""
        return self.policy.mode

    @property
    def is_validator(self) -> bool:
        """True for validator traces."""
        return self.trace.is_validator

    @property
    def run_harness(self) -> RunHarness:
        """The harness, which exists once the loop has started."""
        if self.harness is None:
            raise RunError(f"run {self.trace.trace_id!r} has no harness: the loop has not started")
        return self.harness

    def record(self, message: Message) -> Message:
        """Move the head to a message just persisted and append it to the history."""
        self.head = message.sequence
        self.history.append(message.to_llm_message())
        return message


@dataclass(frozen=True, kw_only=True)
class RunServices:
    """What a run's collaborators may use besides its state (built by the runner for each run)."""

    store: TraceStore
    """Store the run persists to."""
    registry: ToolRegistry
    """The runner's tools."""
    stops: StopRegistry
    """Stop flags of the runs in this process."""
    fences: Mapping[str, str]
    """Interrupt fences by root id (a live view: `AgentRunner.interrupt` adds to it)."""
    budget_for: BudgetLookup
    """The budget controller of a trace's tree."""
    stop_hooks: Sequence[StopHook] = ()
    """Checked between iterations."""
    post_turn_hooks: Sequence[PostTurnHook] = ()
    """Run with a snapshot when the run ends."""
    on_progress: Callable[[ProgressEvent], None] | None = None
    """Live progress observer."""
    workspace: Path | None = None
    """The runner's workspace, used when the run config names none."""
    observer_failures: set[str] = field(default_factory=set)
    """Traces whose progress observer has raised (reported once each)."""

    async def halt_reason(self, state: RunState) -> str | None:
        """Why the run must halt now (a stop request here or persisted by any process, or the interrupt fence), or None."""
        trace_id = state.trace.trace_id
        if self.stops.is_stopped(trace_id):
            return self.stops.stop_reason(trace_id)
        fence = self.fences.get(state.trace.root_id)
        if fence is not None:
            return f"interrupt: {fence}"
        return await persisted_stop_reason(self.store, state.ancestry or (trace_id,))

    def progress(self, kind: ProgressKind, state: RunState, **data: Any) -> None:
        """Notify the progress observer, if any; an observer that raises never fails the run.

        Its first failure in a run is reported once with `warnings.warn` (RuntimeWarning); later
        ones are dropped silently. The observer is still called for later events.
        """
        if self.on_progress is None:
            return
        trace_id = state.trace.trace_id
        try:
            self.on_progress(ProgressEvent(kind=kind, trace_id=trace_id, iteration=state.iterations, data=data))
        except Exception as exc:  # noqa: BLE001 - observers never fail a run (STYLE)
            if trace_id not in self.observer_failures:
                self.observer_failures.add(trace_id)
                warnings.warn(f"progress observer failed on {kind!r} of {trace_id}: {type(exc).__name__}: {exc}; "
                              "the run goes on", RuntimeWarning, stacklevel=2)

    async def persist(self, state: RunState, message: Message) -> Message:
        """Store a message of this run and move the run's head to it."""
        await self.store.add_message(message)
        return state.record(message)

    async def append_user_message(self, state: RunState, text: str) -> Message:
        """Append a runner-authored user message (protocol feedback) to the running trace."""
        message = Message.create(
            trace_id=state.trace.trace_id, role="user", goal_id=state.goal_id, content=text,
            parent_sequence=state.head or None, metadata=MessageMetadata(protocol=True), branch=state.branch,
        )
        return await self.persist(state, message)
