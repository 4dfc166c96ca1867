"""A write that fails part-way leaves the trace consistent, and the trace works once space returns.

docs/trace.md, "Failed writes": every write loops over short writes or raises; a failed event
append is cut back to the previous end; an `add_message` lands fully (file, counts, event) or not
at all. Two ways to fail: an injected `os.write` (short writes, then ENOSPC) and a real file-size
limit (`RLIMIT_FSIZE`) in a subprocess.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cyber_agent.trace import FileSystemTraceStore, Message, Trace

REPO = Path(__file__).resolve().parents[2]


class FaultyWrites:
    """Replace `os.write`: writes to files named `target` get at most `chunk` bytes, or fail with ENOSPC."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, target: str) -> None:
        self.real = os.write
        self.target = target
        self.chunk: int | None = None
        self.fail_after: int | None = None  # bytes accepted before ENOSPC
        monkeypatch.setattr(os, "write", self)

    def __call__(self, fd: int, data: Any) -> int:
        if not os.readlink(f"/proc/self/fd/{fd}").split("/")[-1].startswith(self.target):
            return self.real(fd, data)
        data = bytes(data)
        if self.fail_after is not None:
            if self.fail_after <= 0:
                raise OSError(errno.ENOSPC, "No space left on device (injected)")
            data = data[: self.fail_after]
            self.fail_after -= len(data)
        if self.chunk is not None:
            data = data[: self.chunk]
        return self.real(fd, data)


pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names fds through /proc")


async def _store_with(tmp_path: Path, count: int) -> tuple[FileSystemTraceStore, str]:
    store = FileSystemTraceStore(tmp_path, checkpoint_every=1)
    trace_id = await store.create_trace(Trace.create(task="full disk"))
    for i in range(count):
        await store.add_message(Message(trace_id=trace_id, role="user", content=f"m{i}"))
    return store, trace_id


async def _assert_consistent(base: Path, trace_id: str, contents: list[str]) -> None:
    """What a fresh reader sees: every message counted once, each with exactly one event, no torn line."""
    reader = FileSystemTraceStore(base)
    trace = await reader.get_trace(trace_id)
    messages = await reader.get_trace_messages(trace_id)
    events = await reader.get_events(trace_id)
    assert [m.content for m in messages] == contents
    assert trace.total_messages == len(contents)
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    announced = [e.payload["message"]["sequence"] for e in events if e.type == "message_added"]
    assert announced == [m.sequence for m in messages]
    assert (base / trace_id / "events.jsonl").read_bytes().endswith(b"\n")


async def test_short_writes_are_completed(tmp_path, monkeypatch):
    store, trace_id = await _store_with(tmp_path, 1)
    faults = FaultyWrites(monkeypatch, "events.jsonl")
    faults.chunk = 7
    await store.add_message(Message(trace_id=trace_id, role="user", content="in small pieces"))
    await store.append_event(trace_id, "progress", {"step": 1})
    monkeypatch.undo()
    await _assert_consistent(tmp_path, trace_id, ["m0", "in small pieces"])


@pytest.mark.parametrize("accepted", [0, 40])
async def test_a_failed_event_append_undoes_the_add_and_the_trace_works_after(tmp_path, monkeypatch, accepted):
    store, trace_id = await _store_with(tmp_path, 2)
    faults = FaultyWrites(monkeypatch, "events.jsonl")
    faults.fail_after = accepted  # a torn line of `accepted` bytes, then ENOSPC
    message = Message(trace_id=trace_id, role="user", content="lost to a full disk")
    with pytest.raises(OSError, match="No space"):
        await store.add_message(message)
    faults.fail_after = accepted
    with pytest.raises(OSError, match="No space"):
        await store.append_event(trace_id, "progress", {"step": "lost"})
    assert message.sequence == 0, "the caller's message is not assigned a sequence that did not land"
    await _assert_consistent(tmp_path, trace_id, ["m0", "m1"])
    assert not (tmp_path / trace_id / "messages" / f"{trace_id}-0003.json").exists()
    monkeypatch.undo()  # space returns
    await store.add_message(Message(trace_id=trace_id, role="user", content="after"))
    await store.append_event(trace_id, "progress", {"step": "after"})
    await _assert_consistent(tmp_path, trace_id, ["m0", "m1", "after"])


async def test_a_failed_message_write_lands_nothing(tmp_path, monkeypatch):
    store, trace_id = await _store_with(tmp_path, 1)
    faults = FaultyWrites(monkeypatch, f".{trace_id}-0002.json")
    faults.fail_after = 10
    with pytest.raises(OSError):
        await store.add_message(Message(trace_id=trace_id, role="user", content="never"))
    assert sorted(p.name for p in (tmp_path / trace_id / "messages").iterdir()) == [f"{trace_id}-0001.json"]
    monkeypatch.undo()
    await store.add_message(Message(trace_id=trace_id, role="user", content="after"))
    await _assert_consistent(tmp_path, trace_id, ["m0", "after"])


async def test_a_failed_checkpoint_after_the_event_keeps_the_add(tmp_path, monkeypatch):
    store, trace_id = await _store_with(tmp_path, 1)
    faults = FaultyWrites(monkeypatch, ".meta.json")
    faults.fail_after = 0
    message_id = await store.add_message(Message(trace_id=trace_id, role="user", content="landed"))
    assert message_id.endswith("-0002")
    await _assert_consistent(tmp_path, trace_id, ["m0", "landed"])  # meta.json still says 1; readers count 2
    monkeypatch.undo()
    await store.add_message(Message(trace_id=trace_id, role="user", content="after"))
    assert json.loads((tmp_path / trace_id / "meta.json").read_text())["total_messages"] == 3


LIMITED_WRITER = textwrap.dedent("""
    import asyncio, json, os, resource, signal, sys
    from cyber_agent.trace import FileSystemTraceStore, Message, Trace

    async def main(base):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        store = FileSystemTraceStore(base, checkpoint_every=1)
        trace_id = await store.create_trace(Trace.create(task="limited"))
        acked, failed = [], []
        async def add(text):
            try:
                await store.add_message(Message(trace_id=trace_id, role="user", content=text))
                acked.append(text)
            except OSError as exc:
                failed.append(f"{text}: {exc.strerror}")
        for i in range(3):
            await add(f"before {i}")
        limit = os.path.getsize(f"{base}/{trace_id}/events.jsonl") + 1200
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        for i in range(12):
            await add(f"limited {i} " + "x" * 150)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space returns
        for i in range(2):
            await add(f"after {i}")
        print(json.dumps({"trace_id": trace_id, "acked": acked, "failed": failed}))

    asyncio.run(main(sys.argv[1]))
""")


async def test_a_real_file_size_limit_leaves_the_trace_consistent(tmp_path):
    result = subprocess.run([sys.executable, "-c", LIMITED_WRITER, str(tmp_path)], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["failed"], "the limit was never hit: the test proves nothing"
    assert any(text.startswith("limited") for text in outcome["acked"]), "nothing fit under the limit"
    assert outcome["acked"][-2:] == ["after 0", "after 1"]
    await _assert_consistent(tmp_path, outcome["trace_id"], outcome["acked"])
