"""Live progress of a run: what the tree is doing right now (SPEC J1).

`ProgressTracker` folds the store's event streams of every trace of a tree into counts: agents
and validators (and how deep), LLM calls, tokens, cost, and the tool each agent is running now.
One read per trace per refresh (`TraceStore.get_events(trace_id, since_event_id)`) returns all
that happened since the last one, so a snapshot is never more than one refresh behind the store:
`message_added` carries each message (calls, tokens, cost), `progress` / `tool_call_started`
the tool a call is running, `sub_trace_started` a new child, `trace_status_changed` an end.
Validators announce no events, so the runner's list of running traces is polled as well. The
runner's own iterator feeds the root's messages at once; every message counts once, whichever
source delivers it first. Views (`progress_view.py`) render the snapshots.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cyber_agent.notebook.display import RichDisplay, html_table
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocols import TraceStore

__all__ = ["AgentActivity", "ProgressSnapshot", "ProgressTracker"]

_FINAL = frozenset({"completed", "failed", "stopped"})
_SHOWN_ACTIVE = 12  # rows of the "running now" table; the rest is counted


@dataclass
class _Agent:
    trace_id: str
    label: str
    role: str
    is_validator: bool = False
    depth: int = 0
    status: str = "running"
    last_event: int = 0
    seen: set[int] = field(default_factory=set)
    calls: int = 0
    tokens: int = 0
    cost: float = 0.0
    pending: dict[str, str] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)  # tool call ids whose result is stored


@dataclass(frozen=True, kw_only=True)
class AgentActivity:
    """One trace of the tree still running: who it is and what it does now."""

    trace_id: str
    """Its trace id."""
    label: str
    """Short name (`explore 2`, `validator 1`, the root's role)."""
    role: str
    """`validator`, or the agent type (main, delegate, explore, ...)."""
    depth: int
    """Depth in the tree (root = 0)."""
    llm_calls: int
    """Its assistant messages so far."""
    tokens: int
    """Its prompt plus completion tokens so far."""
    tool: str | None
    """The tool it is running now (several: comma-separated), None between tool calls."""


@dataclass(frozen=True, kw_only=True)
class ProgressSnapshot(RichDisplay):
    """Where a run stands."""

    trace_id: str | None
    """Root trace id (None before the run created it)."""
    status: str
    """Root status: starting, running, completed, failed, stopped."""
    agents: int
    """Agents seen so far: the root and its sub-agents, not validators (`budgets.AGENTS_DEFINITION`)."""
    running: int
    """Traces still running, agents and validators."""
    depth: int
    """Deepest trace seen (root = 0)."""
    llm_calls: int
    """Assistant messages over the tree."""
    tokens: int
    """Prompt plus completion tokens over the tree."""
    cost: float
    """USD over the tree."""
    elapsed: float
    """Seconds since launch."""
    current: tuple[str, ...] = ()
    """`label: tool` for each tool call in flight, in tree order."""
    validators: int = 0
    """Validator traces seen so far (they judge reports; A10 does not count them as agents)."""
    active: tuple[AgentActivity, ...] = ()
    """Every trace still running, in tree order, with the tool it runs now."""

    def __repr__(self) -> str:
        return f"ProgressSnapshot(status={self.status!r}, agents={self.agents}, llm_calls={self.llm_calls}, tokens={self.tokens})"

    def _who(self) -> str:
        text = f"{self.agents} agent{'s' if self.agents != 1 else ''}"
        return text + (f" + {self.validators} validator{'s' if self.validators != 1 else ''}" if self.validators else "")

    def to_text(self) -> str:
        """One line: status, agents, calls, tokens, cost, time, tools in flight."""
        text = (
            f"[{self.status}] {self._who()} ({self.running} running, depth {self.depth})"
            f" · {self.llm_calls} LLM calls · {self.tokens:,} tokens · ${self.cost:.4f} · {self.elapsed:.1f} s"
        )
        return text + (f" · now: {', '.join(self.current)}" if self.current else "")

    def to_html(self) -> str:
        """A summary row, then one row per running trace with the tool it runs now."""
        summary = html_table(
            [[self.status, self._who(), self.running, self.depth, self.llm_calls, f"{self.tokens:,}", f"${self.cost:.4f}",
              f"{self.elapsed:.1f} s"]],
            ["status", "agents", "running", "depth", "LLM calls", "tokens", "cost", "elapsed"],
        )
        if not self.active:
            return summary
        shown = self.active[:_SHOWN_ACTIVE]
        rows = [[("\u2002" * a.depth) + a.label, a.depth, a.llm_calls, f"{a.tokens:,}", a.tool or "—"] for a in shown]
        more = len(self.active) - len(shown)
        caption = f"running now ({len(self.active)})" + (f" — first {len(shown)} shown" if more else "")
        return summary + html_table(rows, ["agent", "depth", "LLM calls", "tokens", "tool now"], caption=caption)


class ProgressTracker:
    """Fold the event streams of a tree into a `ProgressSnapshot`."""

    def __init__(self) -> None:
        self.root_trace_id: str | None = None
        self.status = "starting"
        self.agents: dict[str, _Agent] = {}
        self._discovered: dict[str, None] = {}  # children announced by sub_trace_started, not read yet
        self._started = time.monotonic()

    def observe_trace(self, trace: Trace) -> None:
        """Register (or refresh) a trace of the tree."""
        if self.root_trace_id is None and trace.parent_trace_id is None:
            self.root_trace_id = trace.trace_id
        agent = self.agents.get(trace.trace_id)
        if agent is None:
            role = "validator" if trace.is_validator else (trace.agent_type or "agent")
            label = role
            if "@" in trace.trace_id:
                suffix = trace.trace_id.rsplit("@", 1)[1].split("-")
                label = f"{suffix[0]} {int(suffix[-1])}" if suffix[-1].isdigit() else label
            depth = trace.lineage.depth
            agent = self.agents[trace.trace_id] = _Agent(
                trace_id=trace.trace_id, label=label, role=role, is_validator=trace.is_validator,
                depth=depth if isinstance(depth, int) else trace.trace_id.count("@"),
            )
        self._discovered.pop(trace.trace_id, None)
        self._set_status(agent, trace.status)

    def _set_status(self, agent: _Agent, status: str) -> None:
        agent.status = status
        if status in _FINAL:
            agent.pending.clear()
        if agent.trace_id == self.root_trace_id:
            self.status = status

    def observe_message(self, message: Message) -> None:
        """Count a message once (the runner yields the root's; the events carry every trace's)."""
        agent = self.agents.get(message.trace_id)
        if agent is not None:
            self._count(agent, message.sequence, message.role, message.prompt_tokens + message.completion_tokens,
                        message.cost, message.tool_call_id)

    def _count(self, agent: _Agent, sequence: int, role: str, tokens: int, cost: float, tool_call_id: str | None) -> None:
        if sequence in agent.seen:
            return
        agent.seen.add(sequence)
        if role == "assistant":
            agent.calls += 1
            agent.tokens += tokens
            agent.cost += cost
        elif role == "tool" and tool_call_id:
            agent.pending.pop(tool_call_id, None)
            # The root's results reach the tracker from the runner before its events are polled: a
            # `tool_call_started` read afterwards must not bring a finished tool back as running.
            agent.finished.add(tool_call_id)

    def observe_event(self, agent: _Agent, kind: str, payload: dict[str, Any]) -> None:
        """Fold one persisted event of `agent`'s stream (its type and JSON payload)."""
        if kind == "message_added":
            m = payload.get("message") or {}
            self._count(agent, int(m.get("sequence") or 0), str(m.get("role")),
                        int(m.get("prompt_tokens") or 0) + int(m.get("completion_tokens") or 0),
                        float(m.get("cost") or 0.0), m.get("tool_call_id"))
        elif kind == "progress" and payload.get("stage") == "tool_call_started" and payload.get("tool_call_id"):
            if str(payload["tool_call_id"]) not in agent.finished:
                agent.pending[str(payload["tool_call_id"])] = str(payload.get("tool") or "?")
        elif kind == "sub_trace_started" and isinstance(payload.get("trace_id"), str):
            if payload["trace_id"] not in self.agents:
                self._discovered[payload["trace_id"]] = None
        elif kind in ("trace_status_changed", "trace_completed"):
            status = payload.get("status") or ("completed" if kind == "trace_completed" else None)
            if isinstance(status, str):
                self._set_status(agent, status)

    async def poll(self, store: TraceStore, trace_ids: Iterable[str] = (), *, everything: bool = False) -> None:
        """Read what is new in the streams of unfinished traces, announced children and `trace_ids`.

        `everything` reads every known trace once more (the final refresh after the run ended).
        Children announced during this refresh are read in it too, not one refresh later.
        """
        wanted = list(trace_ids)
        tried: set[str] = set()  # ids looked up in this refresh (a child is announced just before it is created)
        done: set[str] = set()  # streams read in this refresh
        while True:
            for trace_id in [*self._discovered, *wanted]:
                if trace_id not in self.agents and trace_id not in tried:
                    tried.add(trace_id)
                    trace = await store.get_trace(trace_id)
                    if trace is not None:
                        self.observe_trace(trace)
            wanted = []
            todo = [a for a in self.agents.values() if a.trace_id not in done and (everything or a.status not in _FINAL)]
            if not todo:
                return
            for agent in todo:
                done.add(agent.trace_id)
                for event in await store.get_events(agent.trace_id, agent.last_event):
                    self.observe_event(agent, event.type, event.payload)
                    agent.last_event = max(agent.last_event, event.event_id)

    def snapshot(self) -> ProgressSnapshot:
        """The current counts."""
        agents = list(self.agents.values())
        running = sorted((a for a in agents if a.status not in _FINAL), key=lambda a: a.trace_id)  # T2 ids: tree order
        active = tuple(
            AgentActivity(trace_id=a.trace_id, label=a.label, role=a.role, depth=a.depth, llm_calls=a.calls,
                          tokens=a.tokens, tool=", ".join(dict.fromkeys(a.pending.values())) or None)
            for a in running
        )
        current = tuple(f"{a.label}: {name}" for a in running for name in dict.fromkeys(a.pending.values()))
        return ProgressSnapshot(
            trace_id=self.root_trace_id, status=self.status, agents=sum(1 for a in agents if not a.is_validator),
            validators=sum(1 for a in agents if a.is_validator), running=len(running),
            depth=max((a.depth for a in agents), default=0), llm_calls=sum(a.calls for a in agents),
            tokens=sum(a.tokens for a in agents), cost=sum(a.cost for a in agents),
            elapsed=time.monotonic() - self._started, current=current, active=active,
        )
