"""Message builders shared by the store tests (imported as a plain module: tests/ is no package)."""

from __future__ import annotations

from cyber_agent.trace import Message
from cyber_agent.trace.store_base import BaseTraceStore


def user(trace_id: str, text: str = "hi", *, parent: int | None = None, goal: str | None = None, **fields: object) -> Message:
    """Build a user message."""
    return Message.create(trace_id=trace_id, role="user", content=text, parent_sequence=parent, goal_id=goal, **fields)


def assistant(trace_id: str, *, parent: int | None, goal: str | None = "3", tokens: tuple[int, int] = (100, 20),
              cost: float = 0.25) -> Message:
    """Build an assistant message with text and usage."""
    return Message.create(trace_id=trace_id, role="assistant", content={"text": "thinking"}, parent_sequence=parent,
                          goal_id=goal, prompt_tokens=tokens[0], completion_tokens=tokens[1], cost=cost)


async def add_chain(store: BaseTraceStore, trace_id: str, count: int, *, parent: int | None = None,
                    goal: str | None = None) -> list[int]:
    """Add `count` messages, each the child of the previous one; return their sequences."""
    sequences = []
    for index in range(count):
        message = user(trace_id, f"message {index}", parent=parent, goal=goal)
        await store.add_message(message)
        parent = message.sequence
        sequences.append(message.sequence)
    return sequences
