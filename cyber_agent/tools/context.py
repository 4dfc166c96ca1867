"""What a tool function may receive from the runner besides its model-given arguments."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cyber_agent.trace.state import AgentMode

if TYPE_CHECKING:
    from cyber_agent.trace.protocols import TraceStore

__all__ = ["RunSettings", "ToolContext", "ToolRunner"]


class ToolRunner(Protocol):
    """The runner as the tools layer sees it: its store.

    `cyber_agent/core/runner.py:AgentRunner` satisfies it; the protocol tools narrow it to
    their port with `cyber_agent/protocol/ports.py:protocol_runner`.
    """

    @property
    def trace_store(self) -> TraceStore:
        """Store the runner persists to."""
        ...


class RunSettings(Protocol):
    """The calling run's config as the tools layer sees it (`cyber_agent/core/config.py:RunConfig` satisfies it)."""

    @property
    def workspace(self) -> str | None:
        """Workspace directory of the run (None: the runner's)."""
        ...


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """Injected into a tool function that declares a parameter annotated `ToolContext`.

    The runner builds it; the model can neither see nor forge it.
    """

    trace_id: str
    """Trace of the calling agent."""
    store: TraceStore
    """Store the run persists to."""
    goal_id: str | None = None
    """Goal in focus when the call was made."""
    tool_call_id: str = ""
    """Id of the call being executed."""
    workspace: Path = field(default_factory=Path.cwd)
    """Directory that file and shell tools are confined to."""
    allowed_tools: frozenset[str] = frozenset()
    """Runtime-allowed tool snapshot of the calling agent."""
    runner: ToolRunner | None = None
    """The AgentRunner, for tools that start sub-agents (`agent`) or validators."""
    run_config: RunSettings | None = None
    """The calling agent's effective RunConfig."""
    agent_mode: AgentMode = "legacy"
    """Mode of the calling agent's tree (frozen on its root)."""
    agent_depth: int = 0
    """Depth of the calling agent in its tree (the root is 0)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Caller-owned extras for custom tools; the runner puts nothing here and never takes it from model input."""
