"""What a tool function may receive from the runner besides its model-given arguments."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cyber_agent.trace.protocols import TraceStore

__all__ = ["ToolContext"]


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
    runner: Any = None
    """The AgentRunner, for tools that start sub-agents (`agent`)."""
    run_config: Any = None
    """The calling agent's RunConfig."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Runner-owned extras (policy snapshot, protocol state); never taken from model input."""
