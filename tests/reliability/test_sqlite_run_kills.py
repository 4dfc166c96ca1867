"""A run on SQLite killed with SIGKILL at random moments: the records that ride with the next write
(`cyber_agent/trace/sql_store.py:SQLTraceStore.defer_exchange`, `defer_event`) are never half there.

Each seed starts a child process that runs a long agent loop (one inline tool call per step, the
exchange recorder on) on one SQLite database and kills it after a seeded delay. A fresh
instance then finds: an intact database; every trace reloads with dense event ids; exactly one
recorded exchange per assistant message (they commit together); every recorded start of an
inline call with its result (they commit together too); and the next writer continues the trace.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cyber_agent.trace import Message, SQLiteTraceStore

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

REPO = Path(__file__).resolve().parents[2]
DRIVER = """
import asyncio, sys
sys.path.insert(0, sys.argv[2])
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.types import LLMResponse, ToolCall
from cyber_agent.tools import ToolRegistry
from cyber_agent.trace import SQLiteTraceStore

def add(a: int, b: int) -> int:
    '''Add two integers.'''
    return a + b

class Model:
    calls = 0
    async def __call__(self, messages, model, tools=None, temperature=None, *, on_delta=None):
        Model.calls += 1
        if Model.calls == 1:
            print("running", flush=True)
        return LLMResponse(tool_calls=[ToolCall(id=f"call_{Model.calls}", name="add", arguments={"a": Model.calls, "b": 1})])

async def main():
    registry = ToolRegistry()
    registry.register(add, inline=True)
    runner = AgentRunner(trace_store=SQLiteTraceStore(sys.argv[1]), llm_call=Model(), tool_registry=registry)
    await runner.run_result([{"role": "user", "content": "add"}], RunConfig(max_iterations=100000, tools=["add"]))

asyncio.run(main())
"""
SEEDS = list(range(6))


def _run_and_kill(path: Path, seed: int) -> None:
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(path), str(REPO)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the first model call: the run is under way
    assert line.strip() == b"running", (line, proc.stderr.read() if proc.stderr else b"")
    time.sleep(random.Random(seed).uniform(0.05, 0.4))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_killed_run_leaves_no_exchange_without_its_reply_and_no_start_without_its_result(
        tmp_path: Path, seed: int) -> None:
    path = tmp_path / "runs.db"
    _run_and_kill(path, seed)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store = SQLiteTraceStore(path)
    (trace,) = await store.list_traces()
    trace_id = trace.trace_id
    messages = await store.get_trace_messages(trace_id)
    assistants = [m for m in messages if m.role == "assistant"]
    assert len(assistants) > 3, "the kill landed before the run got going"
    exchanges = await store.get_exchanges(trace_id)
    assert len(exchanges) == len(assistants)  # never an exchange without its reply, nor a reply without it
    events = await store.get_events(trace_id)
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    started = {e.payload["tool_call_id"] for e in events if e.payload.get("stage") == "tool_call_started"}
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    assert started == answered  # an inline call's start commits with its result
    added = sorted(e.payload["message"]["sequence"] for e in events if e.type == "message_added")
    assert added == [m.sequence for m in messages] == list(range(1, len(messages) + 1))
    # The next writer continues the trace where the kill left it.
    await store.add_message(Message.create(trace_id=trace_id, role="user", content="go on"))
    assert (await SQLiteTraceStore(path).require_trace(trace_id)).total_messages == len(messages) + 1
