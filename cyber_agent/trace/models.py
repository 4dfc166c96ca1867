"""Trace and Message records (SPEC T1, T3).

A Trace is one complete LLM interaction (a single call or an agent task); every sub-agent is
its own Trace. Messages form a tree through `parent_sequence`; the main path runs from the
trace's `head_sequence` back to the first message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cyber_agent.llm.types import ToolCall

from cyber_agent.trace.clock import utc_now
from cyber_agent.trace.message_metadata import REFUSAL_FLAGS, MessageMetadata, ResultShaping, refusal_kind
from cyber_agent.trace.provenance import Provenance
from cyber_agent.trace.state import (
    Lineage,
    ProtocolState,
    RootSetup,
    RunConfigSnapshot,
    SideBranchRecord,
    migrate_context,
)
from cyber_agent.trace.sweep_records import SweepCellRecord
from cyber_agent.trace.trace_id import (
    message_id_for,
    new_root_trace_id,
    validate_trace_id,
)

MAX_STORED_TOKENS = 10**12
"""Largest token count a message stores (sums over a million messages still fit a 64-bit column)."""
MAX_STORED_COST = 10.0**9
"""Largest USD cost a message stores."""

__all__ = [
    "REFUSAL_FLAGS",
    "Message",
    "MessageContent",
    "MessageMetadata",
    "MessageRole",
    "ResultShaping",
    "Trace",
    "TraceMode",
    "TraceStatus",
    "is_refusal",
    "refusal_kind",
    "utc_now",
]

TraceMode = Literal["call", "agent"]
TraceStatus = Literal["running", "completed", "failed", "stopped", "waiting_confirmation"]
MessageRole = Literal["system", "user", "assistant", "tool"]

def is_refusal(metadata: MessageMetadata | Mapping[str, Any] | None) -> bool:
    """True when a tool message's metadata marks a refusal (one definition for the runner and the notebook)."""
    return refusal_kind(metadata) is not None


_DESCRIPTION_LIMIT = 200
_ASSIGNED = ("sequence", "message_id")


class Trace(BaseModel):
    """One persisted run: metadata, totals, main-path head and extensible context."""

    model_config = ConfigDict(extra="ignore", validate_assignment=False)

    trace_id: str
    """UUID for a root trace, `{parent}@{mode}-{timestamp}-{seq}` for a sub-trace."""
    mode: TraceMode = "agent"
    """`call` for a single LLM call, `agent` for a tool-using task."""
    task: str | None = None
    """The task as the user or parent stated it."""
    parent_trace_id: str | None = None
    """Trace that created this one (sub-traces only)."""
    parent_goal_id: str | None = None
    """Goal of the parent that triggered this sub-trace."""
    agent_type: str | None = None
    """Role of the agent: main, delegate, explore, validator, ..."""
    name: str | None = None
    """Human-readable run name."""
    uid: str | None = None
    """Id of the user who started the run."""
    project_name: str | None = None
    """Project the run belongs to."""
    model: str | None = None
    """Model the run uses."""
    status: TraceStatus = "running"
    """Lifecycle state."""
    total_messages: int = 0
    """Messages persisted so far; also the highest sequence, as sequences are dense from 1."""
    total_prompt_tokens: int = 0
    """Input tokens over all messages."""
    total_completion_tokens: int = 0
    """Output tokens over all messages."""
    total_cached_tokens: int = 0
    """Cached input tokens over all messages."""
    total_tokens: int = 0
    """Input plus output tokens."""
    total_cost: float = 0.0
    """USD cost over all messages."""
    current_goal_id: str | None = None
    """Goal currently in focus."""
    head_sequence: int = 0
    """Sequence of the main-path head; 0 when the trace has no message yet."""
    result_summary: str | None = None
    """Final answer or summary once the run ends."""
    error_message: str | None = None
    """Why the run failed or stopped."""
    context: dict[str, Any] = Field(default_factory=dict)
    """The user's own keys (e.g. `RunConfig.context`); runner state lives in the typed fields below."""
    lineage: Lineage = Field(default_factory=Lineage)
    """Mode, depth, root, creating tool, tool snapshot and child count (A2, A6)."""
    protocol: ProtocolState = Field(default_factory=ProtocolState)
    """Recursive protocol state: brief, report, validations, reviews, refs, validator assignment (A5)."""
    root_setup: RootSetup | None = None
    """Recursive roots: anchor and hash, budget limits, validator models and search, child execution."""
    run_config: RunConfigSnapshot | None = None
    """Behaviour snapshot of the run config with its hash (T7)."""
    side_branches: dict[str, SideBranchRecord] = Field(default_factory=dict)
    """The last run on each side branch (e.g. `reflection`)."""
    cost_unpriced: bool = False
    """True once a model call of this trace used tokens that no price covers (its cost is not known)."""
    unpriced_models: list[str] = Field(default_factory=list)
    """The models whose usage was unpriced (give them a price with `CYBER_AGENT_PRICES`)."""
    sweep_cell: SweepCellRecord | None = None
    """Roots run by a sweep: which cell and attempt this is, its state, score and numbers."""
    provenance: Provenance | None = None
    """Imported traces: the source format, file and ids, and what the source lacks (None: run here)."""
    created_at: datetime = Field(default_factory=utc_now)
    """Creation time (UTC)."""
    updated_at: datetime = Field(default_factory=utc_now)
    """Last update time (UTC)."""
    completed_at: datetime | None = None
    """When the run reached a final status."""

    @model_validator(mode="before")
    @classmethod
    def _typed_state(cls, data: Any) -> Any:
        # Records written before the state was typed kept it in `context` (see trace/state.py).
        return migrate_context(data) if isinstance(data, dict) else data

    @classmethod
    def create(cls, *, mode: TraceMode = "agent", task: str | None = None, **fields: Any) -> Trace:
        """Create a root trace with a fresh UUID (pass `trace_id=` to choose one)."""
        trace_id = fields.pop("trace_id", None) or new_root_trace_id()
        return cls(trace_id=validate_trace_id(trace_id), mode=mode, task=task, **fields)

    @property
    def is_root(self) -> bool:
        """True when the trace has no parent."""
        return self.parent_trace_id is None

    @property
    def root_id(self) -> str:
        """The tree's root trace id (the trace itself for a root)."""
        return self.lineage.root_trace_id or self.trace_id

    @property
    def is_validator(self) -> bool:
        """True for validator sub-traces (only the runner creates them)."""
        return self.parent_trace_id is not None and self.lineage.created_by_tool == "validator"


class MessageContent(BaseModel):
    """Assistant content: text plus the tool calls of one model turn."""

    text: str | None = None
    """Assistant text, if any."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Tool calls of this turn."""


class Message(BaseModel):
    """One LLM-API message plus metadata, linked to a goal and to its parent message."""

    model_config = ConfigDict(extra="ignore")

    message_id: str = ""
    """`{trace_id}-{sequence:04d}`; assigned by the store when the message is added."""
    trace_id: str
    """Trace the message belongs to."""
    sequence: int = 0
    """Position in the trace, dense from 1; assigned by the store."""
    role: MessageRole
    """system, user, assistant or tool."""
    goal_id: str | None = None
    """Goal the message served."""
    content: str | MessageContent | None = None
    """Text, or for an assistant turn a MessageContent with text and tool calls."""
    tool_call_id: str | None = None
    """For tool messages: the call this result answers."""
    tool_name: str | None = None
    """For tool messages: the tool that produced the result."""
    parent_sequence: int | None = None
    """Sequence of the parent message; None for the first message of a branch."""
    branch: str | None = None
    """Side-branch label (e.g. 'reflection'); side-branch messages never move the head."""
    description: str = ""
    """Short generated description (see `Message.create`)."""
    prompt_tokens: int = 0
    """Input tokens of the model call that produced this message."""
    completion_tokens: int = 0
    """Output tokens of that call."""
    cached_tokens: int = 0
    """Cached input tokens of that call."""
    cost: float = 0.0
    """USD cost of that call."""
    duration_ms: float | None = None
    """Wall time of the model call or tool execution."""
    metadata: MessageMetadata = Field(default_factory=MessageMetadata)
    """Error flag, refusal, truncation, summary, usage estimates, model, source ids, ... and any key a tool
    or user added (`cyber_agent/trace/message_metadata.py:MessageMetadata`)."""
    created_at: datetime = Field(default_factory=utc_now)
    """When the message was created (UTC)."""

    @model_validator(mode="before")
    @classmethod
    def _storable_usage(cls, data: Any) -> Any:
        # Stores never raise on usage: a count outside 0..MAX_STORED_TOKENS or a cost that is not
        # a finite non-negative number is stored as 0 and named in metadata["usage_invalid"].
        if not isinstance(data, dict):
            return data
        if "metadata" in data and data["metadata"] is None:
            data = {**data, "metadata": {}}  # a foreign or hand-made record with "metadata": null
        problems = []
        for key in ("prompt_tokens", "completion_tokens", "cached_tokens", "cost"):
            value = data.get(key)
            if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            limit = MAX_STORED_COST if key == "cost" else MAX_STORED_TOKENS
            if not (math.isfinite(value) and 0 <= value <= limit and (key == "cost" or value == int(value))):
                problems.append(f"{key}={value!r}"[:60])
        if not problems:
            return data
        data = {**data, **{k: 0 for k in ("prompt_tokens", "completion_tokens", "cached_tokens", "cost")
                           if any(p.startswith(f"{k}=") for p in problems)}}
        note = f"stored 0 for {', '.join(problems)}"
        data["metadata"] = _note_invalid_usage(data.get("metadata"), note)
        return data

    @classmethod
    def create(cls, *, trace_id: str, role: MessageRole, content: Any = None, **fields: Any) -> Message:
        """Build a message and generate its description as the seed says."""
        if isinstance(content, dict):
            content = MessageContent.model_validate(content)
        message = cls(trace_id=trace_id, role=role, content=content, **fields)
        if not message.description:
            message.description = message.describe()
        return message

    @property
    def text(self) -> str:
        """The text part of the content ('' when there is none)."""
        if isinstance(self.content, MessageContent):
            return self.content.text or ""
        return self.content or ""

    @property
    def tool_calls(self) -> list[ToolCall]:
        """Tool calls of an assistant message ([] otherwise)."""
        return self.content.tool_calls if isinstance(self.content, MessageContent) else []

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.prompt_tokens + self.completion_tokens

    def describe(self) -> str:
        """Assistant: its text, else 'tool call: a, b'. Tool: the tool name, else its text, else its call id. Others: the text."""
        if self.role == "assistant":
            if self.text:
                return _clip(self.text)
            names = ", ".join(call.name for call in self.tool_calls)
            return f"tool call: {names}" if names else ""
        if self.role == "tool":
            # A tool message without tool_name (the seed's own example) is described by its content, else its call id.
            return self.tool_name or _clip(self.text) or (f"tool result {self.tool_call_id}" if self.tool_call_id else "")
        return _clip(self.text)

    def assign(self, sequence: int) -> None:
        """Set the store-assigned sequence and message id."""
        # Straight into __dict__ (the store does this on every add; an int and a str need no validation).
        self.__dict__["sequence"] = sequence
        self.__dict__["message_id"] = message_id_for(self.trace_id, sequence)
        self.__pydantic_fields_set__.update(_ASSIGNED)

    def to_llm_message(self) -> dict[str, Any]:
        """Render in OpenAI chat format for the next model call."""
        if self.role == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": self.text or None}
            if self.tool_calls:
                out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
            return out
        if self.role == "tool":
            out = {"role": "tool", "tool_call_id": self.tool_call_id or "", "content": self.text}
            if self.metadata.is_error:
                # Anthropic sends it on the wire (`tool_result.is_error`); the OpenAI client drops the key.
                out["is_error"] = True
            return out
        return {"role": self.role, "content": self.text}


def _note_invalid_usage(metadata: Any, note: str) -> Any:
    """`metadata` (typed, a mapping or None) with `note` appended to its `usage_invalid`."""
    if isinstance(metadata, MessageMetadata):
        before = metadata.usage_invalid
        return metadata.model_copy(update={"usage_invalid": f"{before}; {note}" if before else note})
    metadata = dict(metadata or {})
    metadata["usage_invalid"] = f"{metadata['usage_invalid']}; {note}" if metadata.get("usage_invalid") else note
    return metadata


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DESCRIPTION_LIMIT else text[: _DESCRIPTION_LIMIT - 1] + "…"
