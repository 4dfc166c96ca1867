"""Frames of a 10k-message file-store trace read every file exactly once and parse each message once."""

from __future__ import annotations

import asyncio
import builtins
import io
import os
from collections import Counter

from cyber_agent.notebook import to_frames
from cyber_agent.trace import FileSystemTraceStore, Goal, Message, Trace

MESSAGES = 10_000


def build(path) -> str:
    async def fill() -> str:
        # Sparse checkpoints only make the fill faster; update_trace below writes the final one.
        store = FileSystemTraceStore(path, checkpoint_every=1000, checkpoint_interval=60.0)
        trace = Trace.create(task="long run")
        await store.create_trace(trace)
        await store.add_goal(trace.trace_id, Goal(id="1", description="work"))
        parent = None
        for step in range(MESSAGES):
            if step % 2 == 0:
                message = Message.create(trace_id=trace.trace_id, role="assistant", goal_id="1", parent_sequence=parent,
                                         prompt_tokens=100, completion_tokens=10, content={"text": None, "tool_calls": [
                                             {"id": f"c{step}", "name": "read_file", "arguments": {"path": f"f{step}"}}]})
            else:
                message = Message.create(trace_id=trace.trace_id, role="tool", goal_id="1", parent_sequence=parent,
                                         tool_call_id=f"c{step - 1}", tool_name="read_file", content="x" * 100)
            await store.add_message(message)
            parent = message.sequence
        await store.update_trace(trace.trace_id, status="completed")  # a finished run: its checkpoint is current
        return trace.trace_id

    return asyncio.run(fill())


def test_frames_open_each_file_once(tmp_path, monkeypatch):
    trace_id = build(tmp_path)
    opened: Counter[str] = Counter()
    real_open, real_io_open, real_os_open = builtins.open, io.open, os.open

    def counting(real):
        def wrapper(file, *args, **kwargs):
            if isinstance(file, (str, os.PathLike)):
                opened[os.path.realpath(file)] += 1
            return real(file, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(builtins, "open", counting(real_open))
    monkeypatch.setattr(io, "open", counting(real_io_open))
    monkeypatch.setattr(os, "open", counting(real_os_open))  # the store reads with os.open
    frames = to_frames(tmp_path, trace_id)
    monkeypatch.undo()

    assert len(frames.messages) == MESSAGES
    assert frames.messages["on_main_path"].all()
    assert len(frames.tool_calls) == MESSAGES // 2
    twice = {path: count for path, count in opened.items() if count > 1}
    assert twice == {}
    message_files = [p for p in opened if os.sep + "messages" + os.sep in p]
    assert len(message_files) == MESSAGES
    assert sum(1 for p in opened if p.endswith("meta.json")) == 1
    assert sum(1 for p in opened if p.endswith("events.jsonl")) == 1


def test_a_message_added_event_shares_its_message_with_the_messages(tmp_path):
    """Each message is parsed once: its event's payload holds the very dict of the messages list."""
    trace_id = build(tmp_path)
    (record,) = asyncio.run(FileSystemTraceStore(tmp_path).read_records([trace_id]))
    by_sequence = {m["sequence"]: m for m in record.messages}
    added = [e for e in record.events if e["type"] == "message_added"]
    assert len(added) == MESSAGES
    assert all(e["payload"]["message"] is by_sequence[e["payload"]["message"]["sequence"]] for e in added)
