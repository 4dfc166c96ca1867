"""Trigger triage: classify an external event before any agent runs (SPEC H11).

    TriggerEnvelope ──► Triage.classify ──► TriageDecision ──► Triage.handle
                          │                                      ├─ drop      nothing
                          │  cheap model, strict JSON            ├─ notify    nothing (notify_text for the caller)
                          │  → fallback model on failure         ├─ react     short run of `trigger_reactor`
                          │  → safe default (notify) if both fail└─ full_run  normal run of `orchestrator`
                          └─ LRU cache of decisions for identical events

The cache key is a hash of source, kind, name and the canonical JSON of the payload (never
`received_at`), so a repeated event is classified once. Only model decisions are cached; the
safe default is not, so the next identical event asks the models again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, UTC
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cyber_agent.core.config import RunConfig
from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.types import LLMCall, LLMResponse

if TYPE_CHECKING:
    from cyber_agent.core.runner import AgentRunner

__all__ = [
    "FULL_RUN_AGENT",
    "MAX_PAYLOAD_PROMPT_BYTES",
    "REACT_AGENT",
    "REACT_MAX_ITERATIONS",
    "TRIAGE_SYSTEM_PROMPT",
    "PlannedRun",
    "Triage",
    "TriageAction",
    "TriageDecision",
    "TriageOutcome",
    "TriggerEnvelope",
    "parse_decision",
]

TriageAction = Literal["drop", "notify", "react", "full_run"]
"""What to do with an event: ignore it, tell the user, react briefly, or run the full agent."""
# Names the original harness used (acknowledge, escalate) and common spellings map onto ours.
_ACTION_ALIASES = {"acknowledge": "notify", "ack": "notify", "escalate": "full_run", "fullrun": "full_run"}

REACT_MAX_ITERATIONS = 3
"""Model turns of a `react` run: one tool call, its observation, the answer, and one spare."""
REACT_AGENT = "trigger_reactor"
"""agent_type of a `react` run (a built-in archetype)."""
FULL_RUN_AGENT = "orchestrator"
"""agent_type of a `full_run` run (a built-in archetype)."""
MAX_PAYLOAD_PROMPT_BYTES = 8192
"""Payload bytes shown to the triage model; the rest is cut with a marker."""
_MAX_ERROR_CHARS = 300
_MAX_PARSE_CHARS = 8_000
_MAX_CANDIDATES = 32

TRIAGE_SYSTEM_PROMPT = """You triage external events (webhooks, scheduled jobs) for an agent system. Most events are \
noise; some deserve a notification; few deserve work.

Choose one action:
- "drop": noise, duplicates, heartbeats, events nobody needs to see.
- "notify": a person should know, but no agent work is needed. Give notify_text.
- "react": a small, single-step reaction (one or two tool calls). Give task.
- "full_run": multi-step work for the main agent. Give task.

Answer with one JSON object and nothing else:
{"action": "drop" | "notify" | "react" | "full_run", "reason": "<why, one sentence>", \
"task": "<self-contained instructions, for react and full_run>", "notify_text": "<message, for notify>"}"""
"""System prompt of the triage model."""


class TriggerEnvelope(BaseModel):
    """An external event offered to triage."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(min_length=1, max_length=200)
    """Who sent it (e.g. "github", "scheduler")."""
    kind: Literal["webhook", "cron"]
    """How it arrived."""
    name: str = Field(min_length=1, max_length=200)
    """Event or job name (e.g. "push", "nightly-report")."""
    payload: dict[str, Any] = Field(default_factory=dict)
    """The event's JSON body (a cron job's output goes under "output")."""
    received_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """When it arrived; not part of the cache key."""

    @property
    def label(self) -> str:
        """Short display label: `{kind}/{source}/{name}`."""
        return f"{self.kind}/{self.source}/{self.name}"

    def cache_key(self) -> str:
        """SHA-256 of source, kind, name and the canonical JSON of the payload."""
        canonical = json.dumps([self.source, self.kind, self.name, self.payload], sort_keys=True,
                               separators=(",", ":"), ensure_ascii=False, default=str)
        return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class TriageDecision(BaseModel):
    """What triage decided for one event."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    action: TriageAction
    """drop, notify, react or full_run."""
    reason: str = Field(min_length=1)
    """Why, in the deciding model's words (or why the safe default was used)."""
    task: str | None = None
    """Instructions for the run (react and full_run only; required there)."""
    notify_text: str | None = None
    """Message for the user (notify; defaults to the reason)."""
    model_used: str | None = None
    """Model that decided; None for the safe default."""
    cached: bool = False
    """True when this decision came from the cache."""

    @field_validator("action", mode="before")
    @classmethod
    def _normalize_action(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        action = re.sub(r"[\s-]+", "_", value.strip().lower())
        return _ACTION_ALIASES.get(action.replace("_", ""), _ACTION_ALIASES.get(action, action))

    @field_validator("reason", "task", "notify_text", mode="before")
    @classmethod
    def _strip(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _needs_task(self) -> TriageDecision:
        if self.action in ("react", "full_run") and not self.task:
            raise ValueError(f"action {self.action!r} needs a non-blank task")
        if self.action == "notify" and not self.notify_text:
            return self.model_copy(update={"notify_text": self.reason})
        return self


def parse_decision(text: str) -> TriageDecision:
    """Read a decision from model text (the last fenced block, else the text; last JSON object wins).

    Tolerant like the original: any fence language, prose around the JSON, trailing commas,
    any case of the action. Raises ValueError saying what was wrong.
    """
    fences = re.findall(r"```[^\n`]*\n(.*?)```", text, re.S)
    bodies = [fences[-1], text] if fences else [text]  # the whole text too, when the fence held no decision
    decoder = json.JSONDecoder()
    problem = "no JSON object in the reply"
    for body in bodies:
        body = body[-_MAX_PARSE_CHARS:]
        starts = [m.start() for m in re.finditer(r"\{", body)][-_MAX_CANDIDATES:]
        # From the last "{" backwards: the first candidate that decodes and validates wins, so a
        # nested object or a stray brace in prose cannot hide the decision around it.
        for start in reversed(starts):
            try:
                data, _ = decoder.raw_decode(_strip_trailing_commas(body[start:]))
            except (json.JSONDecodeError, RecursionError) as exc:
                problem = f"invalid JSON: {exc}"
                continue
            if not isinstance(data, dict):
                continue
            data = {k: v for k, v in data.items() if k not in ("model_used", "cached")}  # ours, not the model's
            try:
                return TriageDecision.model_validate(data)
            except ValidationError as exc:
                problem = "invalid decision: " + "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'decision'}: {e['msg']}" for e in exc.errors())
    raise ValueError(problem)


def _strip_trailing_commas(blob: str) -> str:
    """Drop a comma that directly precedes a closing brace or bracket, outside strings."""
    out: list[str] = []
    in_string = escaped = False
    for ch in blob:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "}]":
            j = len(out) - 1
            while j >= 0 and out[j].isspace():
                j -= 1
            if j >= 0 and out[j] == ",":
                del out[j]
        out.append(ch)
    return "".join(out)


def _prompt(envelope: TriggerEnvelope) -> str:
    payload = json.dumps(envelope.payload, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    raw = payload.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_PAYLOAD_PROMPT_BYTES:
        cut = raw[:MAX_PAYLOAD_PROMPT_BYTES].decode("utf-8", "ignore")  # cut on a character boundary
        payload = f"{cut}\n[...truncated {len(raw) - len(cut.encode('utf-8', 'surrogatepass'))} bytes]"
    return f"SOURCE: {envelope.source}\nKIND: {envelope.kind}\nNAME: {envelope.name}\nPAYLOAD:\n{payload}"


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS - 1] + "…"


@dataclass(frozen=True, kw_only=True)
class PlannedRun:
    """The run a react or full_run decision starts: its task messages and config."""

    messages: list[dict[str, Any]]
    """The user message holding the decision's task."""
    config: RunConfig
    """Config of the new root trace (its id is assigned in advance)."""

    @property
    def trace_id(self) -> str:
        """Id the new trace will have."""
        assert self.config.new_trace_id is not None
        return self.config.new_trace_id


@dataclass(frozen=True, kw_only=True)
class TriageOutcome:
    """What `Triage.handle` did with one event."""

    envelope: TriggerEnvelope
    """The event."""
    decision: TriageDecision
    """The decision taken."""
    trace_id: str | None = None
    """Trace of the run started (react, full_run), else None."""
    status: str | None = None
    """Final status of that run."""
    answer: str | None = None
    """Final answer of that run, when it completed."""


class Triage:
    """Classify trigger envelopes with a cheap model, a fallback model and an LRU cache of decisions."""

    def __init__(
        self, cheap: LLMCall, cheap_model: str, fallback: LLMCall | None = None, fallback_model: str | None = None,
        cache_size: int = 256, *, system_prompt: str = TRIAGE_SYSTEM_PROMPT,
    ) -> None:
        if (fallback is None) != (fallback_model is None):
            raise ConfigurationError("fallback_model", "pass both fallback and fallback_model, or neither")
        if cache_size < 0:
            raise ConfigurationError("cache_size", f"must be >= 0 (0 disables the cache), got {cache_size}")
        self._models: list[tuple[LLMCall, str]] = [(cheap, cheap_model)]
        if fallback is not None and fallback_model is not None:
            self._models.append((fallback, fallback_model))
        self._cache: OrderedDict[str, TriageDecision] = OrderedDict()
        self._cache_size = cache_size
        self._system_prompt = system_prompt

    async def classify(self, envelope: TriggerEnvelope) -> TriageDecision:
        """Decide what to do with `envelope`; never raises for bad model output or failing models."""
        key = envelope.cache_key()
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit.model_copy(update={"cached": True})
        messages = [{"role": "system", "content": self._system_prompt}, {"role": "user", "content": _prompt(envelope)}]
        failures: list[str] = []
        for llm, model in self._models:
            try:
                response = LLMResponse.coerce(await llm(messages, model, None, 0.0))
                decision = parse_decision(response.content)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any model or parse failure moves on to the next model
                failures.append(f"{model}: {_clip(f'{type(exc).__name__}: {exc}')}")
                continue
            decision = decision.model_copy(update={"model_used": model, "cached": False})
            self._remember(key, decision)
            return decision
        reason = "triage failed, defaulting to notify: " + " / ".join(failures)
        return TriageDecision(action="notify", reason=reason, notify_text=f"Unclassified event {envelope.label}: {reason}")

    def _remember(self, key: str, decision: TriageDecision) -> None:
        if self._cache_size == 0:
            return
        self._cache[key] = decision
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def clear_cache(self) -> None:
        """Forget every cached decision."""
        self._cache.clear()

    def plan(self, envelope: TriggerEnvelope, decision: TriageDecision, config: RunConfig | None = None) -> PlannedRun | None:
        """Return the run a decision starts (None for drop and notify), built on the template `config`.

        react: agent_type `trigger_reactor`, at most REACT_MAX_ITERATIONS turns, legacy mode unless
        the template sets a mode. full_run: agent_type `orchestrator` with the template's limits and
        mode; a recursive root gets a root task anchor derived from the task when the template has none.
        """
        if decision.action in ("drop", "notify") or not decision.task:
            return None
        from cyber_agent.trace.trace_id import new_root_trace_id

        template = config or RunConfig()
        explicit = template.model_fields_set
        trigger = {"source": envelope.source, "kind": envelope.kind, "name": envelope.name,
                   "received_at": envelope.received_at.isoformat(), "action": decision.action,
                   "reason": decision.reason, "model_used": decision.model_used, "cache_key": envelope.cache_key()}
        update: dict[str, Any] = {
            "new_trace_id": new_root_trace_id(),
            "context": {**template.context, "trigger": trigger},
            "name": template.name or f"{decision.action}: {envelope.label}"[:200],
        }
        if decision.action == "react":
            update["agent_type"] = REACT_AGENT
            update["max_iterations"] = min(template.max_iterations, REACT_MAX_ITERATIONS)
            if "agent_mode" not in explicit:
                update["agent_mode"] = "legacy"  # a reaction is one short loop, not a validated tree
        else:
            update["agent_type"] = template.agent_type if "agent_type" in explicit else FULL_RUN_AGENT
            if template.root_task_anchor is None:
                update["root_task_anchor"] = {
                    "objective": decision.task,
                    "completion_criteria": [f"The event {envelope.label} has been handled as the task asks, "
                                            "and the answer says what was done."],
                    "constraints": [],
                }
        data = {**template.model_dump(exclude_unset=True), **update}
        for key in ("trace_id", "after_sequence", "side_branch", "parent_trace_id", "parent_goal_id"):
            data.pop(key, None)  # a triggered run always starts a new root trace
        return PlannedRun(messages=[{"role": "user", "content": decision.task}], config=RunConfig.model_validate(data))

    async def handle(self, envelope: TriggerEnvelope, runner: AgentRunner, config: RunConfig | None = None) -> TriageOutcome:
        """Classify `envelope` and act: drop/notify start nothing; react and full_run run to the end."""
        decision = await self.classify(envelope)
        planned = self.plan(envelope, decision, config)
        if planned is None:
            return TriageOutcome(envelope=envelope, decision=decision)
        result = await runner.run_result(planned.messages, planned.config)
        return TriageOutcome(envelope=envelope, decision=decision, trace_id=result.trace.trace_id,
                             status=result.status, answer=result.answer)

    def cached_decision(self, envelope: TriggerEnvelope) -> TriageDecision | None:
        """The cached decision for `envelope`, if any (does not refresh its LRU position)."""
        return self._cache.get(envelope.cache_key())

    @property
    def cache_len(self) -> int:
        """Number of cached decisions."""
        return len(self._cache)

