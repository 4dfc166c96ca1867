"""A PostgreSQL server crashed or restarted at a known point of a write (issue 29): nothing lost, nothing doubled.

A writer process (`store_workers.py append_held`) stops inside one write at a fault point of
`postgres_store.py:FAULT_POINTS` and says so; the test then crashes the session's server
(`pg_ctl stop -m immediate`) or restarts it, optionally lets a second client commit to the same
trace after the restart (the crash may hand the lost transaction's id to it), and releases the
writer by creating a file. No sleep races a timer: every step waits for a line or a row.
Afterwards every acknowledged message is present exactly once and sequences and event ids are dense.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from worker_procs import finish_worker, start_worker

from cyber_agent.trace import Message, Trace, open_store
from tests import pg_server

pytestmark = pytest.mark.skipif(not pg_server.available() and not pg_server.required(),
                                reason="PostgreSQL 15 binaries or psycopg not installed (CI installs them)")

WRITES, HOLD = 12, 5


async def check_dense(url: str, trace_id: str, acknowledged: list[str]) -> list[str]:
    """Every acknowledged content present once, sequences and event ids dense; return the contents."""
    reader = open_store(url)
    messages = await reader.get_trace_messages(trace_id)
    contents = [str(m.content) for m in messages]
    assert len(contents) == len(set(contents)), f"a write was applied twice: {contents}"
    assert set(acknowledged) <= set(contents), f"acknowledged writes lost: {set(acknowledged) - set(contents)}"
    assert [m.sequence for m in messages] == list(range(1, len(messages) + 1))
    events = await reader.get_events(trace_id)
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    assert sorted(e.payload["message"]["sequence"] for e in events if e.type == "message_added") == \
        [m.sequence for m in messages]
    assert (await reader.require_trace(trace_id)).total_messages == len(messages)
    return contents


def _held(proc: Any) -> list[str]:
    """Read the writer's lines until it says it is held; return what it acknowledged before."""
    acknowledged = []
    while True:
        line = proc.stdout.readline()
        assert line, proc.stderr.read().decode()[-3000:]
        said = json.loads(line)
        if "held" in said:
            return acknowledged
        acknowledged.append(said["content"])


def _wait_visible(url: str, content: str) -> None:
    """Wait until the held write's COMMIT has landed: its row is visible (the store commits synchronously,
    so visible means flushed, even on this test server's `synchronous_commit = off`)."""
    server = pg_server.server()
    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(server.url, autocommit=True, options=f"-c search_path={schema}") as conn:
        for _ in range(3000):  # a condition, not a timer: at most 30 s for the server to commit
            if conn.execute("SELECT 1 FROM messages WHERE text = %s", (content,)).fetchone():
                break
            time.sleep(0.01)
        else:
            raise AssertionError(f"the COMMIT of {content!r} never landed")


@pytest.mark.parametrize("second_client", [False, True], ids=["alone", "second-client"])
@pytest.mark.parametrize("point", ["locked", "before_commit", "commit_sent"])
async def test_a_crash_at_any_point_of_a_write_loses_and_doubles_nothing(
        tmp_path: Path, point: str, second_client: bool) -> None:
    server = pg_server.server()
    url = server.schema_url(pg_server.schema_for(str(tmp_path)))
    trace = Trace.create(task=f"crash at {point}")
    await open_store(url).create_trace(trace)
    proc = start_worker("append_held", f"{url}&retry_seconds=300", trace.trace_id, "w", str(WRITES), str(HOLD),
                        point, str(tmp_path))
    acknowledged = _held(proc)
    assert len(acknowledged) == HOLD
    if point == "commit_sent":
        _wait_visible(url, f"w:{HOLD}")
    server.stop("immediate")  # a crash: no session ends cleanly, the held transaction's reply never comes
    server.start()
    others = []
    if second_client:  # commits right after the restart, on the same trace, before the writer resumes
        other = open_store(url)
        for i in range(3):
            message = Message.create(trace_id=trace.trace_id, role="user", content=f"other:{i}")
            await other.add_message(message)
            others.append(str(message.content))
    (tmp_path / "release").touch()
    acknowledged += [line["content"] for line in finish_worker(proc, 300)]
    assert acknowledged == [f"w:{i}" for i in range(WRITES)]
    contents = await check_dense(url, trace.trace_id, acknowledged + others)
    assert sorted(contents) == sorted(acknowledged + others)  # exactly these, each once


async def test_a_fast_restart_meeting_a_waiting_write_is_retried(tmp_path: Path) -> None:
    """`pg_ctl restart` (fast: "terminating connection due to administrator command") while a write waits."""
    server = pg_server.server()
    url = server.schema_url(pg_server.schema_for(str(tmp_path)))
    trace = Trace.create(task="restart me")
    await open_store(url).create_trace(trace)
    proc = start_worker("append_held", f"{url}&retry_seconds=300", trace.trace_id, "r", str(WRITES), str(HOLD),
                        "locked", str(tmp_path))
    acknowledged = _held(proc)
    server.restart()
    (tmp_path / "release").touch()
    acknowledged += [line["content"] for line in finish_worker(proc, 300)]
    assert acknowledged == [f"r:{i}" for i in range(WRITES)]
    assert sorted(await check_dense(url, trace.trace_id, acknowledged)) == sorted(acknowledged)
