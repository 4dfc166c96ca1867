"""A writer process killed with SIGKILL at random moments loses nothing it acknowledged.

Each round starts a real subprocess that continues the same trace in a loop (add_message, and
now and then update_trace / update_goal / replace_resource_usage), printing each message id
once add_message has returned. The test kills it mid-loop, then checks the files with a fresh
reader; the next round's writer must recover whatever the kill left behind.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cyber_agent.trace import FileSystemTraceStore, Goal, Message, Trace

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

WRITER = r"""
import asyncio, sys
from cyber_agent.trace import FileSystemTraceStore, Message
from cyber_agent.trace.budget_limits import ResourceUsage

async def main(base, trace_id, every):
    store = FileSystemTraceStore(base, checkpoint_every=int(every), checkpoint_interval=0.05)
    trace = await store.get_trace(trace_id)
    parent, step = trace.head_sequence or None, trace.total_messages
    while True:
        step += 1
        message = Message.create(
            trace_id=trace_id, role="assistant", goal_id="3" if step % 3 else "2", parent_sequence=parent,
            content={"text": f"step {step} " + "x" * (step % 200)}, prompt_tokens=step, completion_tokens=1,
        )
        await store.add_message(message)
        print(message.message_id, flush=True)
        parent = message.sequence
        if step % 7 == 0:
            await store.update_trace(trace_id, current_goal_id="3", context={"step": step})
        if step % 11 == 0:
            await store.update_goal(trace_id, "3", summary=f"at step {step}")
        if step % 13 == 0:
            await store.replace_resource_usage(trace_id, ResourceUsage(llm_calls=step))

asyncio.run(main(*sys.argv[1:]))
"""


def _run_and_kill(base: Path, trace_id: str, every: int, delay: float) -> list[str]:
    """Start a writer, kill it `delay` seconds after its first acknowledgement; return what it acknowledged."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(base), trace_id, str(every)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2],
    )
    lines: list[bytes] = []
    first = threading.Event()

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            first.set()
    reader = threading.Thread(target=read)
    reader.start()
    try:
        if not first.wait(timeout=30):
            proc.kill()
            pytest.fail(f"writer acknowledged nothing: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
        reader.join()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
    return [line.decode().strip() for line in lines if line.endswith(b"\n")]


async def _check(base: Path, trace_id: str, acknowledged: list[str]) -> int:
    """Check every guarantee through a fresh reader; return the number of messages."""
    for path in base.rglob("*.json"):
        json.loads(path.read_bytes())  # no half-written JSON anywhere
    files = sorted((base / trace_id / "messages").glob("*.json"))
    reader = FileSystemTraceStore(base)
    trace = await reader.get_trace(trace_id)
    assert trace is not None and trace.total_messages == len(files)
    assert [f.name for f in files] == [f"{trace_id}-{i:04d}.json" for i in range(1, len(files) + 1)]
    for message_id in acknowledged:
        assert await reader.get_message(message_id) is not None, f"acknowledged {message_id} was lost"
    path = await reader.get_main_path_messages(trace_id, trace.head_sequence)
    assert [m.sequence for m in path] == list(range(1, len(files) + 1))  # each writer continues the head
    assert trace.total_prompt_tokens == sum(m.prompt_tokens for m in path)
    tree = await reader.get_goal_tree(trace_id)
    assert tree.find("1").cumulative_stats.message_count == len(files)
    assert tree.find("2").self_stats.message_count == sum(m.goal_id == "2" for m in path)
    assert tree.find("1").cumulative_stats.total_tokens == sum(m.total_tokens for m in path)
    await reader.get_events(trace_id)  # parses; a torn last line is ignored
    usage = await reader.get_resource_usage(trace_id)  # a whole record or none: never a torn one
    assert usage is None or usage.llm_calls % 13 == 0
    return len(files)


async def test_killed_writers_lose_nothing_they_acknowledged(tmp_path):
    rng = random.Random(20261129)
    store = FileSystemTraceStore(tmp_path)
    trace = Trace.create(task="crash test")
    await store.create_trace(trace)
    for goal in (Goal(id="1", description="all"), Goal(id="2", description="a", parent_id="1"),
                 Goal(id="3", description="b", parent_id="2")):
        await store.add_goal(trace.trace_id, goal)
    acknowledged: list[str] = []
    # Lazy, eager and in-between checkpoints; the first kill lands right after the first add.
    for round_, every in enumerate((32, 1, 5, 32, 1, 5)):
        delay = 0.0 if round_ == 0 else rng.uniform(0.0, 0.3)
        acknowledged += _run_and_kill(tmp_path, trace.trace_id, every, delay)
        count = await _check(tmp_path, trace.trace_id, acknowledged)
        assert count >= len(acknowledged)

    # A fresh writer in this process continues: dense unique sequences, exactly one event per message.
    survivor = FileSystemTraceStore(tmp_path)
    for _ in range(3):
        message = Message.create(trace_id=trace.trace_id, role="user", content="after the crash",
                                 parent_sequence=count, goal_id="3")
        await survivor.add_message(message)
        count += 1
        assert message.sequence == count
    await _check(tmp_path, trace.trace_id, acknowledged)
    events = await FileSystemTraceStore(tmp_path).get_events(trace.trace_id)
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    announced = [e.payload["message"]["sequence"] for e in events if e.type == "message_added"]
    assert sorted(announced) == list(range(1, count + 1))
