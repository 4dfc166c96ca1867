"""Many processes on one PostgreSQL server (issue 17): nothing lost, limits never exceeded, stops
and live events reach across, and a server restart or a lost commit reply neither loses nor
doubles a write.

Real worker processes (`store_workers.py`) share one schema of the session's test server
(`tests/pg_server.py`): eight appenders on one trace, eight budget racers on one root, a stop
written here halting a tree run by another process, kill -9 of a writer, and a WebSocket watcher of this process seeing another process's event.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from worker_procs import finish_worker, start_worker

from cyber_agent.core.resource_budget import ResourceBudgetController
from cyber_agent.core.stop import request_stop
from cyber_agent.trace import Message, Trace, open_store
from cyber_agent.trace.budget_limits import ResourceBudget
from tests import pg_server

pytestmark = [
    pytest.mark.skipif(not pg_server.available() and not pg_server.required(),
                       reason="PostgreSQL 15 binaries or psycopg not installed (CI installs them)"),
    pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL"),
]

def _start(*args: str) -> subprocess.Popen[bytes]:
    return start_worker(*args)


def _finish(proc: subprocess.Popen[bytes], timeout: float = 180) -> list[dict[str, Any]]:
    return finish_worker(proc, timeout)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return pg_server.server().schema_url(pg_server.schema_for(str(tmp_path)))


async def _check_dense(url: str, trace_id: str, acknowledged: list[dict[str, Any]]) -> None:
    reader = open_store(url)
    messages = await reader.get_trace_messages(trace_id)
    contents = [m.content for m in messages]
    assert len(contents) == len(set(contents)), "a write was applied twice"  # type: ignore[arg-type]
    assert {a["content"] for a in acknowledged} <= set(contents), "an acknowledged write was lost"  # type: ignore[arg-type]
    assert [m.sequence for m in messages] == list(range(1, len(messages) + 1))
    events = await reader.get_events(trace_id)
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    assert sorted(e.payload["message"]["sequence"] for e in events if e.type == "message_added") == \
        [m.sequence for m in messages]
    assert (await reader.require_trace(trace_id)).total_messages == len(messages)


async def test_eight_processes_appending_to_one_trace_lose_nothing(url: str) -> None:
    store = open_store(url)
    trace = Trace.create(task="shared")
    await store.create_trace(trace)
    procs = [_start("append", url, trace.trace_id, f"w{i}", "40") for i in range(8)]
    acknowledged = [line for proc in procs for line in _finish(proc)]
    assert len(acknowledged) == 320
    await _check_dense(url, trace.trace_id, acknowledged)
    assert (await open_store(url).require_trace(trace.trace_id)).total_messages == 320


async def test_eight_processes_never_exceed_one_shared_root_budget(url: str) -> None:
    store = open_store(url)
    root = Trace.create(task="budget race")
    await store.create_trace(root)
    limits = ResourceBudget(max_total_agents=20, max_llm_calls=61, reserved_final_calls=1, max_total_tokens=10**9)
    await ResourceBudgetController(store=store, root_trace_id=root.trace_id, budget=limits,
                                   lock=asyncio.Lock()).initialize()
    procs = [_start("budget", url, root.trace_id, f"w{i}", "25") for i in range(8)]
    lines = [line for proc in procs for line in _finish(proc)]
    granted = {name: sum(1 for line in lines if line.get("granted") == name) for name in ("agents", "llm_calls")}
    refused = sum(1 for line in lines if "refused" in line)
    usage = await open_store(url).get_resource_usage(root.trace_id)
    assert usage is not None
    # 200 attempts each; exactly the limits were granted, every grant is in the record, no more.
    assert granted == {"agents": 9, "llm_calls": 60}
    assert usage.agents == 1 + 2 * granted["agents"] <= 20
    assert usage.llm_calls == granted["llm_calls"] <= 60
    assert usage.total_tokens == 5 * 200 and usage.refusals == refused == 400 - 69


async def test_a_stop_written_by_another_process_halts_the_whole_tree(url: str) -> None:
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
    rest = _finish(proc, timeout=60)
    after = [line["child_call"] for line in rest if "child_call" in line]
    done = rest[-1]
    assert done["done"] == "stopped" and "stopped from the notebook" in done["error"]
    assert len(after) <= 1, f"the sub-agent made {len(after)} calls after the stop at call {calls}"
    (child,) = await store.list_traces(parent_trace_id=root.trace_id, limit=None)
    assert child.status == "stopped" and f"ancestor {root.trace_id} stopped" in (child.error_message or "")


async def test_a_writer_killed_at_any_moment_loses_no_acknowledged_message(url: str) -> None:
    store = open_store(url)
    trace = Trace.create(task="kill me")
    await store.create_trace(trace)
    acknowledged: list[dict[str, Any]] = []
    for delay in (0.0, 0.05, 0.13, 0.31):
        proc = _start("append", url, trace.trace_id, f"k{delay}", "100000")
        assert proc.stdout is not None
        first = proc.stdout.readline()
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()  # the reader readline() filled, not the raw pipe: no line cut at its start
        proc.communicate()
        lines = [first, *rest.splitlines(keepends=True)]
        acknowledged += [json.loads(line) for line in lines if line.endswith(b"\n")]
        await _check_dense(url, trace.trace_id, acknowledged)
    survivor = open_store(url)
    message = Message.create(trace_id=trace.trace_id, role="user", content="after the kills")
    await survivor.add_message(message)
    assert message.sequence == (await survivor.require_trace(trace.trace_id)).total_messages


# A server restart or crash under a writer: test_postgres_crashes.py holds the writer at a known point.


class _CommitCutter:
    """A TCP proxy (127.0.0.1) to the test server's socket that cuts the connection at the next COMMIT:
    `before` drops the COMMIT itself (the server rolls back), `after` forwards it and drops the reply."""

    def __init__(self, mode: str) -> None:
        server = pg_server.server()
        self.target = str(server.socket_dir / f".s.PGSQL.{server.port}")
        self.mode, self.armed, self.cuts = mode, False, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"postgresql://{server.user}@127.0.0.1:{self.port}/postgres"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if from_client and self.armed and b"COMMIT" in chunk:
                    self.armed, self.cuts = False, self.cuts + 1
                    if self.mode == "after":
                        sink.sendall(chunk)
                        time.sleep(0.3)  # the server commits; its answer never reaches the client
                    for end in (source, sink):
                        end.shutdown(socket.SHUT_RDWR)
                    return
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                end.close()

    def close(self) -> None:
        self.listener.close()


@pytest.mark.parametrize("mode", ["before", "after"])
async def test_a_commit_cut_off_is_neither_lost_nor_applied_twice(url: str, mode: str) -> None:
    from cyber_agent.trace.postgres_store import PostgresTraceStore

    cutter = _CommitCutter(mode)
    try:
        store = PostgresTraceStore(f"{cutter.url}?schema={url.rsplit('schema=', 1)[1]}")
        trace = Trace.create(task="cut")
        await store.create_trace(trace)
        await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content="first"))
        cutter.armed = True
        message = Message.create(trace_id=trace.trace_id, role="user", content="cut off")
        await store.add_message(message)
        assert cutter.cuts == 1 and message.sequence == 2
        await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content="third"))
    finally:
        cutter.close()
    await _check_dense(url, trace.trace_id, [{"content": c} for c in ("first", "cut off", "third")])
    assert (await open_store(url).require_trace(trace.trace_id)).total_messages == 3


def test_a_websocket_watcher_sees_another_processes_event_within_half_a_second(url: str) -> None:
    from fastapi.testclient import TestClient

    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.llm.fakes import FunctionModel
    from cyber_agent.llm.types import LLMResponse
    from cyber_agent.server.app import create_app

    store = open_store(url)
    trace = Trace.create(task="watched")
    asyncio.run(store.create_trace(trace))

    async def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> LLMResponse:
        return LLMResponse(content="unused")

    app = create_app(store=store, runner=AgentRunner(trace_store=store, llm_call=FunctionModel(model)))
    received: list[tuple[float, str]] = []
    with TestClient(app, base_url="http://127.0.0.1") as client:
        with client.websocket_connect(f"/api/traces/{trace.trace_id}/watch", headers={"host": "127.0.0.1"}) as ws:
            assert ws.receive_json()["type"] == "connected"
            proc = _start("append", url, trace.trace_id, "live", "3")
            while len(received) < 3:
                event = ws.receive_json()
                received.append((time.time(), event["payload"]["message"]["content"]))
    acknowledged = _finish(proc)
    lags = [seen - ack["at"] for (seen, content), ack in zip(received, acknowledged, strict=True)
            if content == ack["content"]]
    assert len(lags) == 3
    assert max(lags) < 0.5, lags


async def test_listen_reconnects_after_a_server_restart_and_replays_what_it_missed(url: str) -> None:
    from cyber_agent.trace.postgres_store import PostgresTraceStore

    store = PostgresTraceStore(url)
    trace = Trace.create(task="listened")
    await store.create_trace(trace)
    seen: list[int] = []
    first_two = asyncio.Event()

    async def watch() -> None:
        async for event in store.listen(trace.trace_id, poll_seconds=30):
            seen.append(event.event_id)
            if len(seen) == 2:
                first_two.set()
            if len(seen) == 6:
                return

    async with asyncio.TaskGroup() as group:
        watcher = group.create_task(watch())
        for i in range(2):
            await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content=f"before {i}"))
        await asyncio.wait_for(first_two.wait(), 10)
        await asyncio.to_thread(pg_server.server().restart)  # the listener's connection drops
        for i in range(4):  # written while the listener reconnects: replayed, not missed
            await asyncio.to_thread(asyncio.run, store.add_message(
                Message.create(trace_id=trace.trace_id, role="user", content=f"after {i}")))
        await asyncio.wait_for(watcher, 20)
    assert seen == [1, 2, 3, 4, 5, 6]  # every event once, in order, across the reconnect
