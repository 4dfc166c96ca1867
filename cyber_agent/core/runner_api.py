"""The runner's public face for its collaborators: `RunResult`, `RunnerHandle`, `RunContext`.

Validation, delegation and the loop's collaborators type against `RunnerHandle` (a protocol
that `core/runner.py:AgentRunner` satisfies) instead of importing `core/runner.py`, so no
module of `core/` imports the runner back (`tests/test_layout.py` checks the graph).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cyber_agent.core.archetypes import ArchetypeRegistry
from cyber_agent.core.config import RunConfig
from cyber_agent.core.resource_budget import ResourceBudgetController
from cyber_agent.core.run_state import RunServices
from cyber_agent.core.stop import StopRegistry
from cyber_agent.llm.pricing import ModelPrice
from cyber_agent.llm.types import LLMCall
from cyber_agent.protocol.ports import ChildSetup, ProtocolRunner
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.models import Message, Trace, is_refusal
from cyber_agent.trace.protocols import TraceStore

__all__ = ["RunContext", "RunEvent", "RunResult", "RunnerHandle", "last_refusal"]

RunEvent = Trace | Message
"""What `AgentRunner.run` yields: the Trace at start and end (or when it waits), every new Message."""


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """What a finished run produced."""

    trace: Trace
    """The trace as persisted at the end of the run."""
    answer: str | None
    """Final answer text (None when the run did not complete)."""
    messages: list[Message] = field(default_factory=list)
    """Messages persisted by this run, in order."""

    @property
    def status(self) -> str:
        """Final status of the trace."""
        return self.trace.status

    @property
    def reason(self) -> str | None:
        """Why the run did not complete (the trace's error message); None when it completed."""
        if self.status == "completed":
            return None
        return self.trace.error_message or f"the run ended {self.status}"

    @property
    def refusal(self) -> str | None:
        """The last refused tool call of this run (a child quota, the tree budget, a cap), often the cause of `reason`."""
        return last_refusal(self.messages)

    def __repr__(self) -> str:
        # Short on purpose: asyncio builds the repr of a run's result, and a full one costs seconds on big runs.
        head = f"RunResult(trace_id={self.trace.trace_id!r}, status={self.status!r}, messages={len(self.messages)}"
        if self.status != "completed":
            return head + f", reason={(self.reason or '')[:80]!r})"
        return head + f", answer={(self.answer or '')[:60]!r})"


def last_refusal(messages: Sequence[Message]) -> str | None:
    """The text of the last tool message marked as a refusal (`cyber_agent/trace/models.py:is_refusal`), or None."""
    for message in reversed(messages):
        if message.role == "tool" and is_refusal(message.metadata):
            return message.content if isinstance(message.content, str) else str(message.content)
    return None


class RunnerHandle(ProtocolRunner, Protocol):
    """The public API of `AgentRunner` that the loop's collaborators use.

    It extends the protocol package's port (`cyber_agent/protocol/ports.py:ProtocolRunner`),
    which is all that validation, delegation and the protocol tools see of it.
    """

    @property
    def trace_store(self) -> TraceStore:
        """Store the runner persists to."""
        ...

    @property
    def tool_registry(self) -> ToolRegistry:
        """The runner's tools."""
        ...

    @property
    def stops(self) -> StopRegistry:
        """Stop flags of the runs in this process."""
        ...

    def run(
        self, messages: Sequence[dict[str, Any]] = (), config: RunConfig | None = None, *, child: ChildSetup | None = None
    ) -> AsyncIterator[RunEvent]:
        """Run (or continue) a trace, yielding its events."""
        ...

    async def run_result(
        self, messages: Sequence[dict[str, Any]] = (), config: RunConfig | None = None, *, child: ChildSetup | None = None
    ) -> RunResult:
        """Run to the end and return the final trace, answer and new messages."""
        ...

    def lock(self, key: str) -> asyncio.Lock:
        """A process-wide asyncio lock for `key`."""
        ...

    async def budget_for(self, trace: Trace) -> ResourceBudgetController:
        """The budget controller of the tree `trace` belongs to."""
        ...

    def register_recursive_child(self, trace_id: str, parent_id: str, *, queued: bool = True) -> None:
        """Register a child before it runs so a stop of any ancestor reaches it."""
        ...

    def hold_for_child(self, trace_id: str, child_trace_id: str) -> None:
        """End the running `trace_id` `waiting_confirmation` after its current turn: a sub-agent awaits an approval."""
        ...

    def interrupt_reason(self, trace_id: str) -> str | None:
        """The reason of the interrupt fence of `trace_id`'s tree, or None when it is not interrupted."""
        ...

    def archetypes_for(self, workspace: str | Path | None) -> ArchetypeRegistry:
        """The archetypes a run in `workspace` sees."""
        ...


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """What stays fixed during one run: services, the runner's handle, the model and the effective config."""

    services: RunServices
    """Store, registry, halt check, progress and persistence."""
    runner: RunnerHandle
    """The runner, for validators and for tools that start sub-agents (`ToolContext.runner`)."""
    llm: LLMCall
    """The model call (dialect-wrapped)."""
    model: str
    """Model name passed to `llm`."""
    config: RunConfig
    """The run's effective config."""
    prices: Mapping[str, ModelPrice] | None = None
    """The price table of the run's replies (`ProviderSettings.price_table` as the run starts, else the built-in
    one; None: looked up on each reply)."""
