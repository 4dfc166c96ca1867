"""Request and response bodies of the control endpoints (`cyber_agent/server/run_api.py`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cyber_agent.llm.settings import ProviderSettings
from cyber_agent.trace.models import Trace, TraceStatus

__all__ = [
    "ChatMessage",
    "CreateTraceRequest",
    "ReflectRequest",
    "ReflectStarted",
    "RootTaskAnchorBody",
    "RunRequest",
    "RunStarted",
    "RunningTraces",
    "StopResult",
]

_TEXT = 200_000


class ChatMessage(BaseModel):
    """One input message in OpenAI chat form."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    """`system` replaces the built system prompt (new traces only); tool results come from tools, not clients."""
    content: str = Field(max_length=_TEXT)
    """Message text."""


class RootTaskAnchorBody(BaseModel):
    """The root task of a recursive tree (A3); the runner checks it is complete."""

    model_config = ConfigDict(extra="forbid")

    objective: str = Field(max_length=_TEXT)
    """What the whole tree must achieve (not blank)."""
    completion_criteria: list[str] = Field(max_length=50)
    """At least one checkable statement the root validator judges the answer against."""
    constraints: list[str] = Field(default_factory=list, max_length=50)
    """Hard constraints every agent of the tree inherits."""


class CreateTraceRequest(BaseModel):
    """Body of POST /api/traces: a new root trace and how to run it."""

    model_config = ConfigDict(extra="forbid")

    messages: list[ChatMessage] = Field(min_length=1, max_length=200)
    """The task: at least one user message; an optional first system message replaces the built prompt."""
    model: str = Field("demo", min_length=1, max_length=200)
    """Model spec (`demo`, `openai:NAME`, `anthropic:NAME`, ...), resolved by the server's runner."""
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    """Sampling temperature."""
    max_iterations: int = Field(30, ge=1, le=1000)
    """Model turns before the run stops with a reason."""
    tools: list[str] | None = Field(None, max_length=100)
    """Tools exposed to the model; null means every tool the mode's policy allows."""
    name: str | None = Field(None, max_length=200)
    """Human-readable run name."""
    uid: str | None = Field(None, max_length=200)
    """User id."""
    project_name: str | None = Field(None, max_length=200)
    """Project the run belongs to."""
    agent_mode: Literal["legacy", "recursive"] | None = None
    """Mode of the new tree; null reads the server's AGENT_MODE (default legacy)."""
    root_task_anchor: RootTaskAnchorBody | None = None
    """Required in recursive mode; ignored in legacy mode."""
    child_execution_mode: Literal["sequential", "parallel"] = "sequential"
    """Recursive: how one batch of children runs."""
    max_parallel_children: int = Field(2, ge=1, le=2)
    """Recursive: concurrency of a parallel batch."""
    tool_dialect: Literal["auto", "native", "xml", "pformat"] | None = None
    """How tool calls travel; null: the server's CYBER_AGENT_DIALECT, else auto."""
    provider: ProviderSettings | None = None
    """Timeouts, retries, stream, max_tokens, extra headers, prices; fields left out come from the server's
    CYBER_AGENT_* variables. `price_file` is refused: send `prices` (the server reads no path a client names)."""
    shell_tools: Literal["off", "confirm", "allow"] = Field("confirm", description=(
        "Shell tools (bash_command): `confirm` (default) makes each call wait for your decision at "
        "/api/traces/{trace_id}/tool-approvals, `off` hides them from the agent, `allow` runs them as the "
        "server's runner registered them (the default runner still asks). Recorded in the trace's run config."))
    root_completion_criteria: Any = Field(
        None, deprecated=True,
        description="Removed. Sending it (even null) is refused with 422; use root_task_anchor.completion_criteria.",
    )

    @field_validator("provider")
    @classmethod
    def _no_price_file(cls, value: ProviderSettings | None) -> ProviderSettings | None:
        if value is not None and "price_file" in value.model_fields_set:
            raise ValueError("provider.price_file is not accepted over HTTP; send provider.prices, "
                             "or set CYBER_AGENT_PRICES where the server runs")
        return value

    @field_validator("root_completion_criteria")
    @classmethod
    def _removed(cls, value: Any) -> Any:
        raise ValueError(
            "root_completion_criteria was removed; send root_task_anchor="
            "{objective, completion_criteria: [...], constraints: [...]} instead"
        )


class RunRequest(BaseModel):
    """Body of POST /api/traces/{id}/run: continue, rewind or regenerate."""

    model_config = ConfigDict(extra="forbid")

    messages: list[ChatMessage] = Field(default_factory=list, max_length=200)
    """New messages to append (user messages, usually); [] with after_message_id regenerates."""
    after_message_id: str | None = Field(None, max_length=260)
    """null: continue after the head. A main-path message id before the head: rewind to it and run."""


class RunStarted(BaseModel):
    """Answer of an endpoint that started a background run."""

    trace_id: str
    """The trace the run works on."""
    status: TraceStatus
    """Trace status as the run began (usually `running`)."""
    head_sequence: int
    """Main-path head as the run began (after a rewind: the rewind point plus new messages)."""
    trace: Trace
    """The whole trace record as the run began."""


class StopResult(BaseModel):
    """Answer of POST /api/traces/{id}/stop."""

    trace_id: str
    """The trace asked to stop."""
    stopped: list[str]
    """Running traces flagged to stop (recursive: the registered subtree); [] if none was running."""
    cancelled_batch_id: str | None
    """The approval batch cancelled by this stop, if one was open."""
    status: TraceStatus
    """Trace status now; a running trace reaches `stopped` at its next checkpoint (watch for it)."""


class RunningTraces(BaseModel):
    """Answer of GET /api/traces/running."""

    trace_ids: list[str]
    """Ids of the traces running in this server, sub-traces included."""
    traces: list[Trace]
    """Their records."""


class ReflectRequest(BaseModel):
    """Body of POST /api/traces/{id}/reflect."""

    model_config = ConfigDict(extra="forbid")

    focus: str | None = Field(None, max_length=2000)
    """Optional focus of the reflection."""


class ReflectStarted(BaseModel):
    """Answer of POST /api/traces/{id}/reflect."""

    trace_id: str
    """The reflected trace."""
    reflection_id: str
    """Id the lessons of this reflection carry in the cognition log."""
    side_branch: Literal["reflection"] = "reflection"
    """The side branch the reflection runs on (the main head does not move)."""
