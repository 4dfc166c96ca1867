"""Live progress of `cyber-agent run` on a terminal: one status line, rewritten as the tree works.

    [running] 3 agents + 1 validator · 7 LLM calls · 12,345 tokens · $0.0123 · 4.2 s · now: explore 2: read_file

`LiveProgress` is the runner's `on_progress` observer (`cyber_agent/core/hooks.py:ProgressEvent`):
every trace of the tree reports to it, sub-agents and validators included. It keeps, per
trace, the LLM calls (one `cost` event per booked reply), tokens and cost so far (the `cost`
event carries the run's running totals) and the tool calls in flight. It redraws the line on
every event but text (no timer: what is shown is what has happened). With `show_text` (the
`--stream` flag) the streamed answer text is written as it arrives, under a `[label]` header
whenever the speaking agent changes, and the status line comes back after it. The line is cut
to the terminal's width, so `\\r` rewrites it in place. An observer never fails a run: a write
error turns it off.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from cyber_agent.core.hooks import ProgressEvent
from cyber_agent.errors import CyberAgentError
from cyber_agent.trace.trace_id import parse_trace_id

__all__ = ["LiveProgress"]

_CLEAR = "\r\x1b[K"  # back to column 0, erase to the end of the line


@dataclass
class _Agent:
    label: str
    is_validator: bool
    calls: int = 0
    tokens: int = 0
    cost: float = 0.0
    tools: dict[str, str] = field(default_factory=dict)  # call id -> tool name, in flight


def _label(trace_id: str) -> tuple[str, bool]:
    try:
        parsed = parse_trace_id(trace_id)
    except CyberAgentError:
        return trace_id[:12], False
    if parsed.mode is None:
        return "main", False
    return f"{parsed.mode} {parsed.seq}", parsed.mode == "validator"


class LiveProgress:
    """Fold a tree's progress events into a status line on `stream` (a terminal)."""

    def __init__(self, stream: TextIO, *, show_text: bool = False, width: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.show_text = show_text
        self.width = width
        self.clock = clock
        self.started = clock()
        self.agents: dict[str, _Agent] = {}
        self.status = "running"
        self._line_shown = False
        self._mid_text = False
        self._speaker: str | None = None
        self._broken = False

    def _agent(self, trace_id: str) -> _Agent:
        agent = self.agents.get(trace_id)
        if agent is None:
            label, is_validator = _label(trace_id)
            agent = self.agents[trace_id] = _Agent(label=label, is_validator=is_validator)
        return agent

    def __call__(self, event: ProgressEvent) -> None:
        """Take one progress event (the runner's `on_progress`)."""
        if self._broken:
            return
        agent = self._agent(event.trace_id)
        if event.kind == "text_delta":
            if self.show_text:
                self._text(event.trace_id, agent, str(event.data.get("text", "")))
            return
        if event.kind == "cost":
            agent.calls += 1
            agent.tokens = int(event.data.get("tokens", agent.tokens))
            agent.cost = float(event.data.get("cost_usd", agent.cost))
        elif event.kind == "tool_started":
            agent.tools[str(event.data.get("call_id"))] = str(event.data.get("tool", "?"))
        elif event.kind == "tool_finished":
            agent.tools.pop(str(event.data.get("call_id")), None)
        elif event.kind == "finished":
            agent.tools.clear()
        self._draw()

    def line(self) -> str:
        """The status line as it stands (uncut)."""
        agents = [a for a in self.agents.values() if not a.is_validator]
        validators = len(self.agents) - len(agents)
        who = f"{len(agents)} agent{'s' if len(agents) != 1 else ''}"
        if validators:
            who += f" + {validators} validator{'s' if validators != 1 else ''}"
        calls = sum(a.calls for a in self.agents.values())
        tokens = sum(a.tokens for a in self.agents.values())
        cost = sum(a.cost for a in self.agents.values())
        text = (f"[{self.status}] {who} · {calls} LLM call{'s' if calls != 1 else ''} · {tokens:,} tokens · "
                f"${cost:.4f} · {self.clock() - self.started:.1f} s")
        now = [f"{a.label}: {tool}" for a in self.agents.values() for tool in a.tools.values()]
        return text + (f" · now: {', '.join(now)}" if now else "")

    def close(self, status: str) -> None:
        """Draw the final line (with the root's end status) and end it with a newline."""
        if self._broken:
            return
        self.status = status
        for agent in self.agents.values():
            agent.tools.clear()
        self._draw()
        self._write("\n")
        self._line_shown = False

    def _cut(self, text: str) -> str:
        width = self.width or shutil.get_terminal_size((100, 24)).columns
        return text if len(text) < width else text[: max(width - 2, 1)] + "…"

    def _draw(self) -> None:
        prefix = _CLEAR
        if self._mid_text:  # the line interrupts an answer: the next text names its agent again
            prefix, self._mid_text, self._speaker = "\n", False, None
        self._write(prefix + self._cut(self.line()))
        self._line_shown = True

    def _text(self, trace_id: str, agent: _Agent, text: str) -> None:
        if not text:
            return
        out = _CLEAR if self._line_shown else ""
        self._line_shown = False
        if self._speaker != trace_id:
            out += ("\n" if self._mid_text else "") + f"[{agent.label}] "
            self._speaker = trace_id
        self._mid_text = not text.endswith("\n")
        self._write(out + text)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken terminal: stop drawing, let the run go on
            self._broken = True
