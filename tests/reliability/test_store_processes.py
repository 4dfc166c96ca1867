"""Many processes on one store (issue 16): nothing lost, limits never exceeded, stops reach across.

Real worker processes (`store_workers.py`) share a SQLite database (and, where the file store
promises the same, a file store): four appenders on one trace, four budget racers on one root,
a stop written by this process halting a tree run by another, and kill -9 of a writer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from worker_procs import finish_worker, start_worker

from cyber_agent.core.resource_budget import ResourceBudgetController
from cyber_agent.core.stop import request_stop
from cyber_agent.trace import Message, Trace, open_store
from cyber_agent.trace.budget_limits import ResourceBudget

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

def _start(*args: str) -> subprocess.Popen[bytes]:
    return start_worker(*args)


def _finish(proc: subprocess.Popen[bytes], timeout: float = 120) -> list[dict[str, Any]]:
    return finish_worker(proc, timeout)


def _urls(tmp_path: Path) -> dict[str, str]:
    return {"sqlite": f"sqlite:///{tmp_path}/runs.db", "file": f"file:{tmp_path}/files"}


@pytest.mark.parametrize("kind", ["sqlite", "file"])
async def test_four_processes_appending_to_one_trace_lose_nothing(tmp_path: Path, kind: str) -> None:
    url = _urls(tmp_path)[kind]
    store = open_store(url)
    trace = Trace.create(task="shared")
    await store.create_trace(trace)
    procs = [_start("append", url, trace.trace_id, f"w{i}", "60") for i in range(4)]
    acknowledged = [line for proc in procs for line in _finish(proc)]
    assert len(acknowledged) == 240
    reader = open_store(url)
    messages = await reader.get_trace_messages(trace.trace_id)
    assert [m.sequence for m in messages] == list(range(1, 241))  # dense, unique
    assert sorted(m.content for m in messages) == sorted(a["content"] for a in acknowledged)  # type: ignore[type-var]
    events = await reader.get_events(trace.trace_id)
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    assert sorted(e.payload["message"]["sequence"] for e in events if e.type == "message_added") == list(range(1, 241))
    assert (await reader.require_trace(trace.trace_id)).total_prompt_tokens == 240


@pytest.mark.parametrize("kind", ["sqlite", "file"])
async def test_four_processes_never_exceed_one_shared_root_budget(tmp_path: Path, kind: str) -> None:
    url = _urls(tmp_path)[kind]
    store = open_store(url)
    root = Trace.create(task="budget race")
    await store.create_trace(root)
    limits = ResourceBudget(max_total_agents=20, max_llm_calls=61, reserved_final_calls=1, max_total_tokens=10**9)
    await ResourceBudgetController(store=store, root_trace_id=root.trace_id, budget=limits,
                                   lock=asyncio.Lock()).initialize()
    started = time.perf_counter()
    procs = [_start("budget", url, root.trace_id, f"w{i}", "25") for i in range(4)]
    lines = [line for proc in procs for line in _finish(proc)]
    elapsed = time.perf_counter() - started
    granted = {name: sum(1 for line in lines if line.get("granted") == name) for name in ("agents", "llm_calls")}
    refused = sum(1 for line in lines if "refused" in line)
    usage = await open_store(url).get_resource_usage(root.trace_id)
    assert usage is not None
    # 100 attempts each; exactly the limits were granted, every grant is in the record, no more.
    assert granted == {"agents": 9, "llm_calls": 60}, (granted, elapsed)
    assert usage.agents == 1 + 2 * granted["agents"] <= 20
    assert usage.llm_calls == granted["llm_calls"] <= 60
    assert usage.total_tokens == 5 * 100 and usage.refusals == refused == 200 - 69


async def test_a_stop_written_by_another_process_halts_the_whole_tree(tmp_path: Path) -> None:
    url = _urls(tmp_path)["sqlite"]
    store = open_store(url)
    proc = _start("busy_tree", url)
    assert proc.stdout is not None
    calls = 0
    while calls < 3:  # the sub-agent is busy in the other process
        line = proc.stdout.readline()
        assert line, proc.stderr.read().decode()[-3000:]  # type: ignore[union-attr]
        calls = json.loads(line).get("child_call", calls)
    (root,) = [t for t in await store.list_traces(limit=None) if t.parent_trace_id is None]
    await request_stop(store, root.trace_id, "stopped from the notebook")
    at_stop = calls
    rest = _finish(proc, timeout=60)
    after = [line["child_call"] for line in rest if "child_call" in line]
    done = rest[-1]
    assert done["done"] == "stopped" and "stopped from the notebook" in done["error"]
    assert len(after) <= 1, f"the sub-agent made {len(after)} calls after the stop at call {at_stop}"
    (child,) = await store.list_traces(parent_trace_id=root.trace_id, limit=None)
    assert child.status == "stopped" and f"ancestor {root.trace_id} stopped" in (child.error_message or "")


async def test_a_writer_killed_at_any_moment_loses_no_acknowledged_message(tmp_path: Path) -> None:
    url = _urls(tmp_path)["sqlite"]
    store = open_store(url)
    trace = Trace.create(task="kill me")
    await store.create_trace(trace)
    acknowledged: list[str] = []
    for delay in (0.0, 0.05, 0.13, 0.31):
        proc = _start("append", url, trace.trace_id, f"k{delay}", "100000")
        assert proc.stdout is not None
        first = proc.stdout.readline()
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        # read() from the same buffered reader: readline() may have buffered lines after the first,
        # which communicate() (reading the raw pipe) would skip, leaving a line cut at its start.
        rest = proc.stdout.read()
        proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        lines = [first, *rest.splitlines(keepends=True)]
        acknowledged += [json.loads(line)["id"] for line in lines if line.endswith(b"\n")]
        with sqlite3.connect(f"{tmp_path}/runs.db") as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        reader = open_store(url)
        stored = {m.message_id for m in await reader.get_trace_messages(trace.trace_id)}
        assert set(acknowledged) <= stored
        total = (await reader.require_trace(trace.trace_id)).total_messages
        assert total == len(stored)  # totals committed with the messages: nothing to adopt
    survivor = open_store(url)
    message = Message.create(trace_id=trace.trace_id, role="user", content="after the kills")
    await survivor.add_message(message)
    assert message.sequence == total + 1
    events = await survivor.get_events(trace.trace_id)
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
