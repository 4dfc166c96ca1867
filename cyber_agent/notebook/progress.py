"""Live progress of a run: what the tree is doing right now (SPEC J1).

`ProgressTracker` folds the messages of every trace of a tree into counts: agents (and how
deep), LLM calls, tokens, cost and the tool each agent is running. It is fed the messages the
runner yields (the root's) and polls the store for the other traces (sub-agents and
validators run inside tool calls, so their messages are not yielded to the caller).
A view renders snapshots: an ipywidgets HTML in a kernel, text lines elsewhere.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from cyber_agent.notebook.display import RichDisplay, html_table
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.trace_id import message_id_for

__all__ = ["ProgressSnapshot", "ProgressTracker", "ProgressView", "make_view"]

_FINAL = frozenset({"completed", "failed", "stopped"})


@dataclass
class _Agent:
    trace_id: str
    label: str
    is_validator: bool = False
    depth: int = 0
    status: str = "running"
    seen: int = 0
    calls: int = 0
    tokens: int = 0
    cost: float = 0.0
    pending: dict[str, str] = field(default_factory=dict)


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
    """Deepest agent seen (root = 0)."""
    llm_calls: int
    """Assistant messages over the tree."""
    tokens: int
    """Prompt plus completion tokens over the tree."""
    cost: float
    """USD over the tree."""
    elapsed: float
    """Seconds since launch."""
    current: tuple[str, ...] = ()
    """`agent: tool` for each tool call in flight."""
    validators: int = 0
    """Validator traces seen so far (they judge reports; A10 does not count them as agents)."""

    def __repr__(self) -> str:
        return f"ProgressSnapshot(status={self.status!r}, agents={self.agents}, llm_calls={self.llm_calls}, tokens={self.tokens})"

    def to_text(self) -> str:
        """One line: status, agents, calls, tokens, cost, time, tools in flight."""
        text = (
            f"[{self.status}] {self.agents} agent{'s' if self.agents != 1 else ''}"
            + (f" + {self.validators} validator{'s' if self.validators != 1 else ''}" if self.validators else "")
            + f" ({self.running} running, depth {self.depth})"
            f" · {self.llm_calls} LLM calls · {self.tokens:,} tokens · ${self.cost:.4f} · {self.elapsed:.1f} s"
        )
        return text + (f" · now: {', '.join(self.current)}" if self.current else "")

    def to_html(self) -> str:
        """A one-row table."""
        now = ", ".join(self.current) or "—"
        return html_table(
            [[self.status, f"{self.agents} ({self.running} running)", self.depth, self.llm_calls, f"{self.tokens:,}",
              f"${self.cost:.4f}", f"{self.elapsed:.1f} s", now]],
            ["status", "agents", "depth", "LLM calls", "tokens", "cost", "elapsed", "tool in flight"],
        )


class ProgressTracker:
    """Fold messages of a tree into a `ProgressSnapshot`."""

    def __init__(self) -> None:
        self.root_trace_id: str | None = None
        self.status = "starting"
        self.agents: dict[str, _Agent] = {}
        self._started = time.monotonic()

    def observe_trace(self, trace: Trace) -> None:
        """Register (or refresh) a trace of the tree."""
        if self.root_trace_id is None and trace.parent_trace_id is None:
            self.root_trace_id = trace.trace_id
        agent = self.agents.get(trace.trace_id)
        if agent is None:
            label = "validator" if trace.is_validator else (trace.agent_type or "agent")
            if "@" in trace.trace_id:
                suffix = trace.trace_id.rsplit("@", 1)[1].split("-")
                label = f"{suffix[0]} {int(suffix[-1])}" if suffix[-1].isdigit() else label
            depth = trace.lineage.depth
            agent = self.agents[trace.trace_id] = _Agent(
                trace_id=trace.trace_id, label=label, is_validator=trace.is_validator,
                depth=depth if isinstance(depth, int) else trace.trace_id.count("@"),
            )
        agent.status = trace.status
        if trace.trace_id == self.root_trace_id:
            self.status = trace.status

    def observe_message(self, message: Message) -> None:
        """Count a message once (messages arrive from the runner and from polling)."""
        agent = self.agents.get(message.trace_id)
        if agent is None or message.sequence <= agent.seen:
            return
        agent.seen = message.sequence
        if message.role == "assistant":
            agent.calls += 1
            agent.tokens += message.prompt_tokens + message.completion_tokens
            agent.cost += message.cost
            agent.pending = {call.id: call.name for call in message.tool_calls}
        elif message.role == "tool" and message.tool_call_id:
            agent.pending.pop(message.tool_call_id, None)

    async def poll(self, store: TraceStore, trace_ids: Iterable[str]) -> None:
        """Read traces not final yet (plus `trace_ids`) and their messages not seen yet."""
        wanted = [a.trace_id for a in self.agents.values() if a.status not in _FINAL] + list(trace_ids)
        for trace_id in dict.fromkeys(wanted):
            trace = await store.get_trace(trace_id)
            if trace is None:
                continue
            self.observe_trace(trace)
            agent = self.agents[trace_id]
            for sequence in range(agent.seen + 1, trace.total_messages + 1):
                message = await store.get_message(message_id_for(trace_id, sequence))
                if message is None:
                    break
                self.observe_message(message)

    def snapshot(self) -> ProgressSnapshot:
        """The current counts."""
        agents = list(self.agents.values())
        current = tuple(
            f"{a.label}: {name}" for a in agents if a.status not in _FINAL for name in dict.fromkeys(a.pending.values())
        )
        return ProgressSnapshot(
            trace_id=self.root_trace_id, status=self.status, agents=sum(1 for a in agents if not a.is_validator),
            validators=sum(1 for a in agents if a.is_validator),
            running=sum(1 for a in agents if a.status not in _FINAL), depth=max((a.depth for a in agents), default=0),
            llm_calls=sum(a.calls for a in agents), tokens=sum(a.tokens for a in agents),
            cost=sum(a.cost for a in agents), elapsed=time.monotonic() - self._started, current=current[:4],
        )


class ProgressView(Protocol):
    """Where snapshots go."""

    def update(self, snapshot: ProgressSnapshot) -> None:
        """Show the latest snapshot (may be throttled)."""

    def close(self, snapshot: ProgressSnapshot) -> None:
        """Show the final snapshot."""


class _NullView:
    def update(self, snapshot: ProgressSnapshot) -> None:
        pass

    def close(self, snapshot: ProgressSnapshot) -> None:
        pass


class _TextView:
    """Print a line when the shape of the run changes, at most once a second, and a final line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._last_key: tuple[object, ...] | None = None
        self._last_time = 0.0

    def update(self, snapshot: ProgressSnapshot) -> None:
        key = (snapshot.status, snapshot.agents, snapshot.running, snapshot.current)
        now = time.monotonic()
        if key != self._last_key and now - self._last_time >= 1.0:
            self._last_key, self._last_time = key, now
            print(snapshot.to_text(), file=self._stream, flush=True)

    def close(self, snapshot: ProgressSnapshot) -> None:
        print(snapshot.to_text(), file=self._stream, flush=True)


class _WidgetView:
    """An ipywidgets HTML, displayed once by the caller's cell and updated in place (≤ 10 times a second)."""

    def __init__(self) -> None:
        import ipywidgets
        from IPython.display import display

        self.widget = ipywidgets.HTML(value="<i>starting…</i>")
        self._last = 0.0
        display(self.widget)

    def update(self, snapshot: ProgressSnapshot) -> None:
        now = time.monotonic()
        if now - self._last >= 0.1:
            self._last = now
            self.widget.value = snapshot.to_html()

    def close(self, snapshot: ProgressSnapshot) -> None:
        self.widget.value = snapshot.to_html()


def make_view(progress: bool | None, *, stream: TextIO | None = None) -> ProgressView:
    """A widget in a kernel, text lines elsewhere, nothing when `progress` is False."""
    from cyber_agent.notebook.bridge import in_notebook

    if progress is False:
        return _NullView()
    if in_notebook():
        try:
            return _WidgetView()
        except ImportError:
            pass
    return _TextView(stream or sys.stdout)
