"""Shared helpers of the notebook tests (imported by module name: pytest puts this folder on sys.path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from cyber_agent.notebook import SCHEMAS, TraceFrames
from cyber_agent.trace import Goal, InMemoryTraceStore, Message, Trace

REPO = Path(__file__).resolve().parents[2]


def same_data(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame without `provenance`: the one column that names where the frames were read from."""
    return frame.drop(columns=["provenance"]) if "provenance" in frame.columns else frame


def assert_frames_equal(a: TraceFrames, b: TraceFrames) -> None:
    """Every frame equal, dtypes included (the traces' `provenance` names each side's own store or export)."""
    for name in SCHEMAS:
        pd.testing.assert_frame_equal(same_data(getattr(a, name)), same_data(getattr(b, name)), obj=name)


async def add_trace(store: InMemoryTraceStore, trace_id: str, *, parent: str | None = None, status: str = "completed",
                    agent_type: str = "main", context: dict[str, Any] | None = None, messages: int = 2) -> str:
    """Create a trace with a root goal and `messages` alternating assistant/tool messages."""
    await store.create_trace(Trace.create(trace_id=trace_id, task=f"task of {trace_id}", parent_trace_id=parent,
                                          agent_type=agent_type, context=context or {}))
    await store.add_goal(trace_id, Goal(id="1", description=f"goal of {trace_id}"))
    for i in range(messages):
        if i % 2 == 0:
            message = Message.create(trace_id=trace_id, role="assistant", goal_id="1", prompt_tokens=10, completion_tokens=5,
                                     cost=0.001, content={"text": None, "tool_calls": [
                                         {"id": f"c{i}", "name": "read_file", "arguments": {"path": "a.txt"}}]})
        else:
            message = Message.create(trace_id=trace_id, role="tool", goal_id="1", tool_call_id=f"c{i - 1}",
                                     tool_name="read_file", content="hello", metadata={"is_error": False})
        await store.add_message(message)
    await store.update_trace(trace_id, status=status)
    return trace_id


ROOT = "11111111-2222-4333-8444-555555555555"
CHILD = f"{ROOT}@delegate-20261129120000-001"
VALIDATOR = f"{CHILD}@validator-20261129120001-001"
