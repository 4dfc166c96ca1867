"""RunConfig: everything that decides how one agent run behaves."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.settings import DIALECT_ENV, ProviderSettings
from cyber_agent.tools.shell_policy import ShellPolicy
from cyber_agent.trace.state import RunConfigSnapshot

__all__ = ["RunConfig", "ToolDialectName", "config_hash"]

ToolDialectName = Literal["auto", "native", "xml", "pformat"]
"""Values of `RunConfig.tool_dialect`."""

# Identity and per-call fields: not part of the behaviour snapshot (T7).
_NOT_BEHAVIOUR = {"trace_id", "after_sequence", "new_trace_id", "context", "root_task_anchor", "side_branch",
                  "parent_trace_id", "parent_goal_id", "agent_mode"}


def config_hash(data: dict[str, Any]) -> str:
    """SHA-256 of a behaviour snapshot's canonical JSON (T7): what snapshots are checked against."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


class RunConfig(BaseModel):
    """Settings of one run; persisted with its hash as the trace's run-config snapshot (T7)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "demo"
    """Model spec: `demo`, `openai:NAME`, `anthropic:NAME`, `replay:PATH`, or any name the llm_call understands."""
    temperature: float | None = None
    """Sampling temperature passed to the model."""
    max_iterations: int = 30
    """Model turns allowed in this run before it stops with a reason."""
    tools: list[str] | None = None
    """Tools exposed to the model; None means every registered tool the policy allows."""
    agent_type: str = "main"
    """Role of the agent (main, delegate, explore, validator, ...)."""
    name: str | None = None
    """Human-readable run name."""
    uid: str | None = None
    """User id."""
    project_name: str | None = None
    """Project the run belongs to."""
    system_prompt: str | None = None
    """Custom system prompt; None builds one from the task and tools."""
    trace_id: str | None = None
    """Continue this existing trace instead of creating one."""
    parent_trace_id: str | None = None
    """Parent trace of a sub-agent run."""
    parent_goal_id: str | None = None
    """Goal of the parent that started this sub-agent."""
    new_trace_id: str | None = None
    """Id to give a new trace (sub-agents get T2 ids from their parent)."""
    after_sequence: int | None = None
    """Rewind: continue after this main-path message (the head moves; nothing is deleted)."""
    side_branch: str | None = None
    """Continue on a side branch with this label (e.g. "reflection"): the main head does not move."""
    workspace: str | None = None
    """Directory file and shell tools are confined to (default: current directory)."""
    context: dict[str, Any] = Field(default_factory=dict)
    """Extra context stored on a new trace (runner-owned keys are overwritten by the runner)."""
    agent_mode: Literal["legacy", "recursive"] | None = None
    """Mode of a new root; None reads `AGENT_MODE` from the environment (A1). Ignored for existing trees."""
    root_task_anchor: dict[str, Any] | None = None
    """Recursive roots: {objective, completion_criteria, constraints} (A3)."""
    tool_dialect: ToolDialectName = "auto"
    """How tool calls travel (H3): auto picks per provider and model; an injected llm_call is native unless set.
    Unset, `CYBER_AGENT_DIALECT` decides when the run starts."""
    provider: ProviderSettings = Field(default_factory=ProviderSettings)
    """Timeouts, retries, streaming, output cap, headers and prices of the model calls; fields left unset
    come from `CYBER_AGENT_*` variables when the run starts (`with_environment`) and the snapshot records them all."""
    context_window: int = 128_000
    """Tokens the model can take; the context guard compacts near it (0 disables the guard)."""
    tool_result_max_bytes: int = 16_384
    """Byte budget of one tool result as the model sees it (0: no budget)."""
    summarize_tool_results: bool = True
    """Summarize results over the budget with a summarizer call before truncating (H5)."""
    child_execution_mode: Literal["sequential", "parallel"] = "sequential"
    """Recursive: how one batch of children runs."""
    max_parallel_children: int = 2
    """Recursive: concurrency of a parallel batch (1..2)."""
    shell_tools: ShellPolicy = "allow"
    """Shell tools (`bash_command`): `off` hides them, `confirm` puts each call before a reviewer (T8),
    `allow` runs them as registered (`cyber_agent/tools/shell_policy.py`). The CLI's `run` sets `off`
    unless `--allow-shell`; the server's `POST /api/traces` defaults to `confirm`."""

    @model_validator(mode="before")
    @classmethod
    def _removed_fields(cls, data: Any) -> Any:
        if isinstance(data, dict) and "root_completion_criteria" in data:
            raise ConfigurationError(
                "root_completion_criteria",
                "was removed; pass root_task_anchor={'objective': ..., 'completion_criteria': [...], 'constraints': [...]}",
            )
        return data

    @field_validator("max_iterations")
    @classmethod
    def _positive_iterations(cls, value: int) -> int:
        if value < 1:
            raise ConfigurationError("max_iterations", f"must be >= 1, got {value}")
        return value

    @field_validator("temperature")
    @classmethod
    def _temperature_range(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 <= value <= 2.0:
            raise ConfigurationError("temperature", f"must be between 0 and 2, got {value}")
        return value

    @field_validator("model")
    @classmethod
    def _model_named(cls, value: str) -> str:
        if not value.strip():
            raise ConfigurationError("model", "must not be empty; use 'demo' for the offline model")
        return value

    def with_environment(self, env: Mapping[str, str] | None = None) -> RunConfig:
        """This config with the provider settings and dialect it leaves unset taken from the environment.

        Idempotent: a resolved config (every provider field set) resolves to itself, so a child
        built from its parent's config, or a config restored from a snapshot, keeps its values.
        """
        env = os.environ if env is None else env
        update: dict[str, Any] = {"provider": self.provider.resolved(env)}
        dialect = env.get(DIALECT_ENV, "").strip().lower()
        if dialect and "tool_dialect" not in self.model_fields_set:
            if dialect not in get_args(ToolDialectName):
                raise ConfigurationError(DIALECT_ENV, f"unknown dialect {dialect!r}; use auto, native, xml or pformat")
            update["tool_dialect"] = dialect
        resolved = self.model_copy(update=update)
        return resolved

    def restored(self, snapshot: RunConfigSnapshot) -> RunConfig:
        """This call's ids and rewind point on top of the persisted behaviour snapshot (overrides ignored)."""
        keep = {k: getattr(self, k) for k in ("trace_id", "after_sequence", "side_branch")}
        return RunConfig(**snapshot.config, **keep)

    def behaviour_snapshot(self) -> RunConfigSnapshot:
        """The fields that decide behaviour (ids and rewind points excluded), with their hash."""
        data = self.model_dump(mode="json", exclude=_NOT_BEHAVIOUR)
        return RunConfigSnapshot(config=data, hash=config_hash(data))
