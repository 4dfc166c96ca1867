"""Plain-text rendering of a trace tree: traces, their goals and totals (CLI and text fallbacks)."""

from __future__ import annotations

from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceStore

__all__ = ["render_trace_tree"]


async def render_trace_tree(store: TraceStore, trace_id: str, *, goals: bool = True) -> str:
    """Render the trace, its goal tree and every descendant trace as indented text."""
    lines: list[str] = []
    await _render(store, trace_id, 0, lines, goals)
    return "\n".join(lines)


def _line(trace: Trace) -> str:
    role = trace.agent_type or "agent"
    return (
        f"{trace.trace_id} [{role}] {trace.status} — {trace.total_messages} msgs, "
        f"{trace.total_tokens} tokens, ${trace.total_cost:.4f}"
    )


async def _render(store: TraceStore, trace_id: str, depth: int, lines: list[str], goals: bool) -> None:
    trace = await store.get_trace(trace_id)
    if trace is None:
        lines.append(f"{'  ' * depth}{trace_id} (missing)")
        return
    pad = "  " * depth
    lines.append(pad + _line(trace))
    if goals:
        tree = await store.get_goal_tree(trace_id)
        if tree is not None and tree.goals:
            lines.extend(f"{pad}  │ {row}" for row in tree.to_prompt().splitlines())
    children = await store.list_traces(parent_trace_id=trace_id, limit=None)
    for child in sorted(children, key=lambda t: (t.created_at, t.trace_id)):
        await _render(store, child.trace_id, depth + 1, lines, goals)
