"""Two processes writing one trace: every acknowledged write is on disk, once, with dense event ids.

docs/trace.md, "Several writers": each write holds the trace's `.writer.lock` (flock) and re-reads
what another writer changed, so writers serialise instead of losing data; a holder that keeps the
lock longer than `lock_timeout` is named in a `TraceLockedError`. Before: both writers got every
message acknowledged, half were lost and event ids repeated.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cyber_agent.errors import TraceLockedError
from cyber_agent.trace import FileSystemTraceStore, Message, Trace

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.name == "nt", reason="flock is POSIX")

WRITER = textwrap.dedent("""
    import asyncio, json, os, sys, time
    from cyber_agent.trace import FileSystemTraceStore, Message

    async def main(base, trace_id, name, count, go):
        store = FileSystemTraceStore(base)  # default checkpoints: totals lag on disk, as in a real run
        while not os.path.exists(go):
            time.sleep(0.001)
        acked = []
        for i in range(count):
            await store.add_message(Message(trace_id=trace_id, role="user", content=f"{name} {i}"))
            await store.append_event(trace_id, "progress", {"writer": name, "i": i})
            acked.append(f"{name} {i}")
        await store.flush()
        print(json.dumps(acked))

    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
""")

HOLDER = textwrap.dedent("""
    import sys, time
    from cyber_agent.trace import FileSystemTraceStore
    store = FileSystemTraceStore(sys.argv[1])
    store._acquire_writer(sys.argv[2])  # hold the lock as a write in progress would
    print("holding", flush=True)
    time.sleep(30)
""")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


async def test_two_processes_appending_to_one_trace_lose_nothing(tmp_path):
    store = FileSystemTraceStore(tmp_path / "store")
    trace_id = await store.create_trace(Trace.create(task="two writers"))
    await store.add_message(Message(trace_id=trace_id, role="user", content="first"))
    go, count = tmp_path / "go", 60
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "store"), trace_id, name, str(count), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for name in ("a", "b")]
    time.sleep(0.5)  # both started and waiting
    go.touch()
    acked = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        acked += json.loads(out)
    assert len(acked) == 2 * count
    # This instance wrote before the others: its next write re-reads what they added.
    await store.add_message(Message(trace_id=trace_id, role="user", content="last"))
    reader = FileSystemTraceStore(tmp_path / "store")
    messages = await reader.get_trace_messages(trace_id)
    events = await reader.get_events(trace_id)
    assert sorted(m.content for m in messages) == sorted(["first", "last", *acked])
    assert [m.sequence for m in messages] == list(range(1, 2 * count + 3))
    assert (await reader.get_trace(trace_id)).total_messages == 2 * count + 2
    assert [e.event_id for e in events] == list(range(1, len(events) + 1)), "event ids are dense and unique"
    announced = [e.payload["message"]["sequence"] for e in events if e.type == "message_added"]
    assert announced == [m.sequence for m in messages], "each message has exactly one event"
    assert sum(e.type == "progress" for e in events) == 2 * count


async def test_a_holder_that_keeps_the_lock_is_named(tmp_path):
    store = FileSystemTraceStore(tmp_path, lock_timeout=0.3)
    trace_id = await store.create_trace(Trace.create(task="held"))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), trace_id], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding", holder.stderr
        message = Message(trace_id=trace_id, role="user", content="refused")
        with pytest.raises(TraceLockedError) as raised:
            await store.add_message(message)
        assert f"pid {holder.pid} on {socket.gethostname()}" in str(raised.value)
        assert raised.value.trace_id == trace_id and message.sequence == 0
    finally:
        holder.kill()
        holder.wait(timeout=30)
    # The kernel dropped the dead holder's lock: writing works again.
    await asyncio.wait_for(store.add_message(Message(trace_id=trace_id, role="user", content="after")), 30)
    assert [m.content for m in await FileSystemTraceStore(tmp_path).get_trace_messages(trace_id)] == ["after"]
