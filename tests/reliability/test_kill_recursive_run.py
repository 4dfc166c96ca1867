"""A recursive run killed with SIGKILL at random points leaves a store that reloads, whole and honest.

`kill_driver.py` forks the offline recursive demo (root, children, grandchildren, validators,
a revision and the root validation: about 150 messages in 16 traces) once per seed and kills it
after a seeded number of acknowledged messages plus a seeded delay (0 or up to 20 ms, so kills
land between writes and inside them). Then, for every seed, with fresh store instances:

- every trace reloads: get_trace, get_goal_tree, get_main_path_messages, get_events, list_traces;
- no torn JSON: every `*.json` parses; in `events.jsonl` only the last line may be torn;
- nothing acknowledged is lost: every message id `add_message` returned is readable;
- usage is never below what was spent: `llm_calls` >= assistant messages of the whole tree,
  tokens and cost >= those of its answers, `agents` >= business traces (root + children), and no
  model answer exists without a usage record;
- the next writer recovers: after it touches a trace, the torn line is gone and every message
  has exactly one `message_added` event.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cyber_agent.trace import FileSystemTraceStore

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL") or not hasattr(os, "fork"),
                                reason="needs fork and SIGKILL")

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("kill_driver.py")
SEEDS = range(24)
KILL_POINTS = (1, 120)
"""Kill after this many acknowledged messages at most: the demo persists about 150, so every seed dies mid-run."""
ANSWER_KILLS = {100: 1, 101: 7, 102: 23}
"""Extra jobs: seed -> the child kills itself right after its k-th model answer is acknowledged."""


def _jobs(base: Path) -> list[dict[str, Any]]:
    jobs = []
    for seed in SEEDS:
        rng = random.Random(seed)
        jobs.append({"seed": seed, "dir": str(base / f"seed-{seed:02d}"), "kill_after": rng.randint(*KILL_POINTS),
                     "delay": rng.choice([0.0, rng.uniform(0.0, 0.02)])})
    for seed, answers in ANSWER_KILLS.items():
        jobs.append({"seed": seed, "dir": str(base / f"answer-{answers:02d}"), "kill_after": 10**9, "delay": 0.0,
                     "suicide_after": answers})
    return jobs


@pytest.fixture(scope="module")
def killed_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, dict[str, Any]]]:
    """Run every seed once (in parallel, four at a time) and return the driver's report per seed.

    The stores go to tmpfs when there is one: what a SIGKILL leaves behind does not depend on
    the disk (the page cache survives the process), and a slow shared disk would make twenty
    runs cost minutes.
    """
    shm = Path("/dev/shm")
    parent = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else str(tmp_path_factory.getbasetemp())
    with tempfile.TemporaryDirectory(dir=parent, prefix="cyber-agent-killed-") as tmp:
        base = Path(tmp)
        proc = subprocess.run([sys.executable, str(DRIVER), json.dumps(_jobs(base)), "4"], cwd=REPO,
                              capture_output=True, text=True, timeout=240)
        assert proc.returncode == 0, proc.stderr[-3000:]
        reports = {r["seed"]: r for r in (json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{"))}
        assert sorted(reports) == [*SEEDS, *ANSWER_KILLS], proc.stderr[-3000:]
        yield reports


def test_most_runs_were_really_killed_mid_run(killed_runs):
    runs = [killed_runs[seed] for seed in SEEDS]
    killed = [r for r in runs if r["exit"] == -signal.SIGKILL]
    crashed = [r for r in killed_runs.values() if r["exit"] not in (0, -signal.SIGKILL)]
    assert not crashed, f"the demo itself failed: {crashed[0]['seed']} exit {crashed[0]['exit']}"
    stuck = [r["seed"] for r in killed_runs.values() if r["stuck"]]
    assert not stuck, f"seeds {stuck} neither finished nor reached their kill point (a hang?)"
    assert len(killed) >= 20, f"only {len(killed)} of {len(runs)} runs were killed before they finished"
    assert all(killed_runs[seed]["exit"] == -signal.SIGKILL for seed in ANSWER_KILLS)
    assert len({len(r["acked"]) for r in killed}) >= 15, "kill points should spread over the run"


def _torn_json(base: Path) -> list[str]:
    problems = []
    for path in base.rglob("*.json"):
        try:
            json.loads(path.read_bytes())
        except ValueError as exc:
            problems.append(f"{path.relative_to(base)}: {exc}")
    for path in base.rglob("events.jsonl"):
        *complete, _torn_tail = path.read_bytes().split(b"\n")
        for number, line in enumerate(complete, start=1):
            try:
                json.loads(line)
            except ValueError as exc:
                problems.append(f"{path.relative_to(base)} line {number} of {len(complete)} complete lines: {exc}")
    return problems


async def _reload_everything(base: Path) -> dict[str, Any]:
    """Read every trace through a fresh store; return what the checks need."""
    store = FileSystemTraceStore(base)
    traces = await store.list_traces(limit=None)
    on_disk = sorted(p.parent.name for p in base.glob("*/meta.json"))
    assert sorted(t.trace_id for t in traces) == on_disk
    assistant, tokens, cost = 0, 0, 0.0
    for trace in traces:
        fresh = FileSystemTraceStore(base)
        assert (await fresh.get_trace(trace.trace_id)) is not None
        assert (await fresh.get_goal_tree(trace.trace_id)) is not None
        path = await fresh.get_main_path_messages(trace.trace_id)
        assert len(path) <= trace.total_messages
        assert [m.sequence for m in path] == sorted(m.sequence for m in path)
        await fresh.get_events(trace.trace_id)
        messages = await fresh.get_trace_messages(trace.trace_id)
        assert [m.sequence for m in messages] == list(range(1, trace.total_messages + 1))
        answers = [m for m in messages if m.role == "assistant"]
        assistant += len(answers)
        tokens += sum(m.prompt_tokens + m.completion_tokens for m in answers)
        cost += sum(m.cost for m in answers)
    roots = [t for t in traces if t.parent_trace_id is None]
    business = [t for t in traces if t.parent_trace_id is None or t.lineage.created_by_tool == "agent"]
    usage = await store.get_resource_usage(roots[0].trace_id) if roots else None
    return {"traces": traces, "assistant": assistant, "tokens": tokens, "cost": cost, "business": len(business),
            "usage": usage, "roots": roots}


@pytest.mark.parametrize("seed", [*SEEDS, *ANSWER_KILLS])
def test_a_killed_recursive_run_reloads_whole(killed_runs, seed):
    report = killed_runs[seed]
    base = Path(report["dir"])
    where = f"seed {seed}, killed after {len(report['acked'])} acknowledged messages"
    assert not _torn_json(base), f"{where}: {_torn_json(base)}"
    state = asyncio.run(_reload_everything(base))
    assert len(state["roots"]) <= 1, where
    if report["acked"]:
        assert state["roots"], f"{where}: messages were acknowledged but no root trace reloads"

    async def lost() -> list[str]:
        store = FileSystemTraceStore(base)
        return [mid for mid in report["acked"] if await store.get_message(mid) is None]
    missing = asyncio.run(lost())
    assert not missing, f"{where}: acknowledged messages lost: {missing[:5]}"

    usage = state["usage"]
    if usage is None:
        assert state["assistant"] == 0, f"{where}: model answers persisted without a usage record"
    else:
        assert usage.llm_calls >= state["assistant"], (
            f"{where}: usage counts {usage.llm_calls} LLM calls, the tree holds {state['assistant']} answers")
        assert usage.agents >= state["business"], (
            f"{where}: usage counts {usage.agents} agents, the store holds {state['business']} business traces")
        assert usage.total_tokens >= state["tokens"] and usage.cost_usd >= state["cost"] - 1e-9, (
            f"{where}: usage books {usage.total_tokens} tokens, the tree's answers used {state['tokens']}")


@pytest.mark.parametrize("seed", SEEDS[::3])
def test_the_next_writer_recovers_a_killed_recursive_run(killed_runs, seed):
    base = Path(killed_runs[seed]["dir"])

    async def recover() -> None:
        writer = FileSystemTraceStore(base)
        for trace in await writer.list_traces(limit=None):
            await writer.append_event(trace.trace_id, "progress", {"recovered_by": "test"})
        reader = FileSystemTraceStore(base)
        for trace in await reader.list_traces(limit=None):
            raw = (base / trace.trace_id / "events.jsonl").read_bytes()
            assert raw.endswith(b"\n"), f"{trace.trace_id}: the torn last line was not cut"
            events = await reader.get_events(trace.trace_id)
            assert [e.event_id for e in events] == list(range(1, len(events) + 1))
            announced = sorted(json.loads(e.payload["message"])["sequence"] if isinstance(e.payload["message"], str)
                               else e.payload["message"]["sequence"] for e in events if e.type == "message_added")
            assert announced == list(range(1, trace.total_messages + 1)), (
                f"seed {seed}, {trace.trace_id}: message_added events for {announced[-5:]}, "
                f"messages 1..{trace.total_messages}")

    asyncio.run(recover())


@pytest.mark.parametrize("seed", sorted(ANSWER_KILLS))
def test_tokens_of_an_acknowledged_answer_are_booked(killed_runs, seed):
    base = Path(killed_runs[seed]["dir"])

    async def spent_and_booked() -> tuple[int, float, dict[str, Any]]:
        store = FileSystemTraceStore(base)
        traces = await store.list_traces(limit=None)
        answers = [m for t in traces for m in await store.get_trace_messages(t.trace_id) if m.role == "assistant"]
        root = next(t for t in traces if t.parent_trace_id is None)
        usage = await store.get_resource_usage(root.trace_id)
        assert usage is not None
        return sum(m.prompt_tokens + m.completion_tokens for m in answers), sum(m.cost for m in answers), usage

    tokens, cost, usage = asyncio.run(spent_and_booked())
    assert usage.total_tokens >= tokens and usage.cost_usd >= cost - 1e-12, (
        f"killed right after answer {ANSWER_KILLS[seed]}: usage books {usage.total_tokens} tokens, "
        f"the persisted answers used {tokens}")
