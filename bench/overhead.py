"""Benchmark the agent loop's per-step overhead against pydantic-ai and LangGraph, side by side.

    python bench/overhead.py                  # N=10 x 7 reps, N=400 x 5 reps, all frameworks (~2 min)
    python bench/overhead.py --quick          # 3 and 2 reps, for a fast look
    python bench/overhead.py --json out.json  # also write the results (read by the [proof] aggregation)
    python bench/overhead.py --dir /dev/shm   # put the file store on tmpfs: code cost without disk cost
    python bench/overhead.py --profile memory # profile cyber_agent runs at the largest N (or: file)
    python bench/overhead.py --before main --pairs 3 --quick  # same-run before/after: alternating child runs

Every framework runs the same agent: a zero-latency scripted model asks for one call of the
sync tool `add(a, b)` per step for N steps, then answers "done". Per-step time is the wall time
of the whole run divided by N (setup of the run and the final answer included; building the
agent, graph or store is not). Each framework is warmed up once, then the repetitions run round
robin, so a change in machine load hits every framework alike; the table shows medians.
Both peers run a sync tool in a worker thread; cyber_agent's `add` is registered `inline=True`
(a tool declared trivial runs on the loop, `cyber_agent/tools/registry.py:ToolSpec.inline`), and
the row `cyber_agent (thread tool)` runs the same tool in a worker thread, as every sync tool not
declared inline runs. `--statements` also counts the SQLite store's statements and transactions
per step (`set_trace_callback` on the run's connection).

The baseline is LangGraph's `create_react_agent` without a checkpointer (pure in-memory state);
`--memorysaver` adds LangGraph with `MemorySaver`, the closer analogue of a persisting store, and
LangGraph with its own SQLite checkpointer (`AsyncSqliteSaver`, package `langgraph-checkpoint-sqlite`)
runs by default as the SQLite store's issue-34 baseline (`--no-sqlitesaver` leaves it out). The
JSON's `issue_targets` holds the `34.fixed.*` rows `bench/run_all.py` prints (`bench/targets.py`).
The cyber_agent runs are checked (status completed, N tool results with the right sums, the
file store's trace readable from disk) so a broken loop cannot pass for a fast one. The file
store's directories are deleted only when the bench ends: mass deletes between runs slow the
next run's file creation on filesystems with online discard, a cost a real run does not pay.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib.metadata
import inspect
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# `--before REF` runs this script in child processes on another tree (`overhead_pairs.py:CODE_ENV`).
sys.path.insert(0, os.environ.get("OVERHEAD_BENCH_CODE") or str(Path(__file__).resolve().parents[1]))

from cyber_agent.core.config import RunConfig  # noqa: E402
from cyber_agent.core.runner import AgentRunner, RunResult  # noqa: E402
from cyber_agent.llm.fakes import ScriptedModel  # noqa: E402
from cyber_agent.llm.types import DeltaCallback, LLMResponse, ToolCall  # noqa: E402
from cyber_agent.tools.registry import ToolRegistry  # noqa: E402
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore, SQLiteTraceStore, open_store  # noqa: E402
from cyber_agent.trace.store_base import BaseTraceStore  # noqa: E402

TASK = "add the numbers"
ANSWER = "done"
BASELINE = ("langgraph", "none")
TARGETS = (("file", 0.5), ("sqlite", 0.25), ("memory", 0.1))
FLATNESS_LIMIT = 1.5
PACKAGES = ("cyber-agent", "pydantic", "pydantic-ai-slim", "langgraph", "langgraph-prebuilt", "langchain-core")


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One timed run."""

    seconds: float
    """Wall time of the run."""
    call_times: list[float]
    """perf_counter() at each model call: the gaps are the per-step times."""


RunOnce = Callable[[int], Awaitable[Sample]]
"""Build an agent for N steps outside the clock, time one run, verify it, return the sample."""


@dataclass(kw_only=True)
class Case:
    """One framework + store configuration and its timings."""

    framework: str
    """cyber_agent, pydantic-ai or langgraph."""
    store: str
    """Where the run's state goes: file, memory, none (framework state only) or MemorySaver."""
    run: RunOnce | None
    """The timed run; None when the framework is not installed."""
    skipped: str | None = None
    """Why the case did not run."""
    samples: dict[int, list[Sample]] = field(default_factory=dict)
    """Timed runs by N, in round order."""
    error: str | None = None
    """The first failure; the case runs no further."""


# ---- cyber_agent ------------------------------------------------------------------------
class _ToolThenAnswer:
    """An LLMCall that asks for `add(i, 1)` on calls 0..n-1 and answers on call n.

    Unlike the library's ScriptedModel it does not deep-copy the request, so the time measured
    is the loop's, not the fake's (`--scripted-model` shows the library fake's own cost).
    """

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.call_times: list[float] = []

    async def __call__(self, messages: list[dict[str, Any]], model: str, tools: list[dict[str, Any]] | None = None,
                       temperature: float | None = None, *, on_delta: DeltaCallback | None = None) -> LLMResponse:
        i = len(self.call_times)
        self.call_times.append(time.perf_counter())
        if i < self.steps:
            return LLMResponse(tool_calls=[ToolCall(id=f"call_{i}", name="add", arguments={"a": i, "b": 1})])
        return LLMResponse(content=ANSWER)


class _TimedScriptedModel(ScriptedModel):
    """The library's ScriptedModel, with call times recorded."""

    def __init__(self, steps: int) -> None:
        calls = [ScriptedModel.tool_call("add", {"a": i, "b": 1}, call_id=f"call_{i}") for i in range(steps)]
        super().__init__([*calls, ANSWER])
        self.call_times: list[float] = []

    async def __call__(self, messages: list[dict[str, Any]], model: str, tools: list[dict[str, Any]] | None = None,
                       temperature: float | None = None, *, on_delta: DeltaCallback | None = None) -> LLMResponse:
        self.call_times.append(time.perf_counter())
        return await super().__call__(messages, model, tools, temperature, on_delta=on_delta)


def cyber_agent_case(store: str, *, tmp_root: str, scripted: bool = False, url: str | None = None,
                     inline: bool = True, statements: list[tuple[int, int, int]] | None = None) -> RunOnce:
    """Time AgentRunner.run_result on a fresh store (a fresh directory under `tmp_root` for the file store;
    with `url`, one store opened by URL, e.g. a PostgreSQL server, each run a new trace in it).

    `inline`: the tool runs on the loop (declared trivial) rather than in a worker thread. With
    `statements` (SQLite only), each run appends (N, statements, transactions) its connection ran.
    """
    opened: list[BaseTraceStore] = []

    async def run(steps: int) -> Sample:
        registry = ToolRegistry()
        if inline and "inline" in inspect.signature(registry.register).parameters:
            registry.register(add, inline=True)
        else:  # not inline, or a checkout from before `ToolSpec.inline` (run as "before"): a worker thread
            registry.register(add)
        model: _ToolThenAnswer | _TimedScriptedModel = _TimedScriptedModel(steps) if scripted else _ToolThenAnswer(steps)
        # Kept until the bench ends: deleting thousands of files between runs makes the next
        # run's file creations slow on some filesystems (online discard), which is not the store's cost.
        tmp = tempfile.mkdtemp(dir=tmp_root, prefix="run-") if store in ("file", "sqlite") else ""
        trace_store: BaseTraceStore
        if url is not None:
            if not opened:
                opened.append(open_store(url))
            trace_store = opened[0]
        elif store == "sqlite":
            trace_store = SQLiteTraceStore(Path(tmp) / "runs.db")
        else:
            trace_store = FileSystemTraceStore(tmp) if store == "file" else InMemoryTraceStore()
        runner = AgentRunner(trace_store=trace_store, llm_call=model, tool_registry=registry)
        config = RunConfig(max_iterations=steps + 1, tools=["add"])
        ran: list[str] = []
        if statements is not None and isinstance(trace_store, SQLiteTraceStore):
            trace_store.connection().set_trace_callback(ran.append)
        started = time.perf_counter()
        result = await runner.run_result([{"role": "user", "content": TASK}], config)
        seconds = time.perf_counter() - started
        if statements is not None and isinstance(trace_store, SQLiteTraceStore):
            trace_store.connection().set_trace_callback(None)
            statements.append((steps, len(ran), sum(1 for sql in ran if sql.startswith("BEGIN"))))
        await _check_cyber_agent(result, steps, store, tmp)
        return Sample(seconds=seconds, call_times=model.call_times)

    return run


async def _check_cyber_agent(result: RunResult, steps: int, store: str, directory: str) -> None:
    if result.status != "completed" or result.answer != ANSWER:
        raise AssertionError(f"run ended {result.status!r} with answer {result.answer!r}: {result.trace.error_message}")
    tools = [m for m in result.messages if m.role == "tool"]
    if len(tools) != steps:
        raise AssertionError(f"expected {steps} tool messages, got {len(tools)}")
    wrong = [(m.tool_call_id, m.text) for i, m in enumerate(tools) if m.metadata.get("is_error") or m.text != str(i + 1)]
    if wrong:
        raise AssertionError(f"{len(wrong)} wrong tool results, first: {wrong[0]}")
    expected = 2 + 2 * steps + 1  # system, user, N x (assistant, tool), final answer
    if result.trace.total_messages != expected:
        raise AssertionError(f"trace has {result.trace.total_messages} messages, expected {expected}")
    if store in ("file", "sqlite"):
        # A fresh instance reads the trace from disk: the run really persisted.
        fresh = FileSystemTraceStore(directory) if store == "file" else SQLiteTraceStore(Path(directory) / "runs.db")
        on_disk = await fresh.get_trace(result.trace.trace_id)
        if on_disk is None or on_disk.status != "completed" or on_disk.total_messages != expected:
            raise AssertionError(f"trace on disk is {on_disk and (on_disk.status, on_disk.total_messages)}")


# ---- pydantic-ai --------------------------------------------------------------------------
def pydantic_ai_case() -> RunOnce:
    """Time Agent.run with a FunctionModel that makes one tool call per step."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage, UsageLimits

    async def run(steps: int) -> Sample:
        call_times: list[float] = []

        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            i = len(call_times)
            call_times.append(time.perf_counter())
            # Explicit usage: otherwise FunctionModel estimates tokens over the whole history each
            # call, an O(N) cost of the fake rather than of the framework.
            usage = RequestUsage(input_tokens=1, output_tokens=1)
            if i < steps:
                return ModelResponse(parts=[ToolCallPart("add", {"a": i, "b": 1}, tool_call_id=f"call_{i}")], usage=usage)
            return ModelResponse(parts=[TextPart(ANSWER)], usage=usage)

        agent = Agent(FunctionModel(respond), tools=[add])
        started = time.perf_counter()
        result = await agent.run(TASK, usage_limits=UsageLimits(request_limit=None))
        seconds = time.perf_counter() - started
        returns = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
        if result.output != ANSWER or len(returns) != steps or returns[-1].content != steps:
            raise AssertionError(f"pydantic-ai run: output {result.output!r}, {len(returns)} tool returns")
        return Sample(seconds=seconds, call_times=call_times)

    return run


# ---- LangGraph ----------------------------------------------------------------------------
def langgraph_case(*, memory_saver: bool, sqlite_root: str | None = None) -> RunOnce:
    """Time create_react_agent(...).ainvoke on a chat model that makes one tool call per step.

    With `sqlite_root`, the graph checkpoints into LangGraph's own SQLite saver (a fresh database
    under that folder per run, opened outside the clock): the peer of cyber_agent's SQLite store.
    """
    if sqlite_root is not None:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langgraph.checkpoint.memory import MemorySaver
    from langgraph.prebuilt import create_react_agent
    from pydantic import PrivateAttr

    class ToolThenAnswerChat(BaseChatModel):
        """Ask for `add(i, 1)` on calls 0..steps-1, then answer."""

        steps: int
        _call_times: list[float] = PrivateAttr(default_factory=list)

        @property
        def _llm_type(self) -> str:
            return "bench-scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> ToolThenAnswerChat:  # type: ignore[override]
            return self

        def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            i = len(self._call_times)
            self._call_times.append(time.perf_counter())
            if i < self.steps:
                call = {"name": "add", "args": {"a": i, "b": 1}, "id": f"call_{i}", "type": "tool_call"}
                message = AIMessage(content="", tool_calls=[call])
            else:
                message = AIMessage(content=ANSWER)
            return ChatResult(generations=[ChatGeneration(message=message)])

        async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                             **kwargs: Any) -> ChatResult:
            return self._generate(messages, stop, run_manager, **kwargs)

    async def run(steps: int) -> Sample:
        model = ToolThenAnswerChat(steps=steps)
        config = {"recursion_limit": 2 * steps + 10, "configurable": {"thread_id": "bench"}}
        if sqlite_root is not None:
            path = str(Path(tempfile.mkdtemp(dir=sqlite_root, prefix="langgraph-")) / "checkpoints.db")
            async with AsyncSqliteSaver.from_conn_string(path) as saver:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    graph = create_react_agent(model, [add], checkpointer=saver)
                started = time.perf_counter()
                state = await graph.ainvoke({"messages": [("user", TASK)]}, config)
                seconds = time.perf_counter() - started
        else:
            with warnings.catch_warnings():
                # Deprecated in LangGraph 1.0 in favour of langchain.agents.create_agent, which the
                # bench extra does not install; the prebuilt agent is still the documented baseline.
                warnings.simplefilter("ignore", DeprecationWarning)
                graph = create_react_agent(model, [add], checkpointer=MemorySaver() if memory_saver else None)
            started = time.perf_counter()
            state = await graph.ainvoke({"messages": [("user", TASK)]}, config)
            seconds = time.perf_counter() - started
        tools = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        if state["messages"][-1].content != ANSWER or len(tools) != steps or tools[-1].content != str(steps):
            raise AssertionError(f"langgraph run: {len(tools)} tool messages, last {state['messages'][-1].content!r}")
        return Sample(seconds=seconds, call_times=model._call_times)

    return run


# ---- running ------------------------------------------------------------------------------
def build_cases(args: argparse.Namespace, tmp_root: str) -> list[Case]:
    """Every configuration; a peer that is not installed becomes a skipped case."""
    cases = [
        Case(framework="cyber_agent", store="file", run=cyber_agent_case("file", tmp_root=tmp_root)),
        Case(framework="cyber_agent", store="memory", run=cyber_agent_case("memory", tmp_root=tmp_root)),
        Case(framework="cyber_agent", store="sqlite", run=cyber_agent_case("sqlite", tmp_root=tmp_root)),
        Case(framework="cyber_agent (thread tool)", store="memory",
             run=cyber_agent_case("memory", tmp_root=tmp_root, inline=False)),
    ]
    if args.store_url:
        kind = args.store_url.split(":", 1)[0]
        cases.append(Case(framework="cyber_agent", store=kind,
                          run=cyber_agent_case(kind, tmp_root=tmp_root, url=args.store_url)))
    if args.scripted_model:
        cases.append(Case(framework="cyber_agent+ScriptedModel", store="memory",
                          run=cyber_agent_case("memory", tmp_root=tmp_root, scripted=True)))
    peers: list[tuple[str, str, Callable[[], RunOnce]]] = [
        ("pydantic-ai", "none", pydantic_ai_case),
        ("langgraph", "none", lambda: langgraph_case(memory_saver=False)),
    ]
    if args.memorysaver:
        peers.append(("langgraph", "MemorySaver", lambda: langgraph_case(memory_saver=True)))
    if not args.no_sqlitesaver:
        peers.append(("langgraph", "SqliteSaver", lambda: langgraph_case(memory_saver=False, sqlite_root=tmp_root)))
    for framework, store, factory in peers:
        try:
            cases.append(Case(framework=framework, store=store, run=factory()))
        except ImportError as exc:
            cases.append(Case(framework=framework, store=store, run=None,
                              skipped=f"not installed ({exc.name}); pip install -e '.[bench]'"))
    return cases


async def _timed(case: Case, steps: int, timeout: float) -> Sample | None:
    assert case.run is not None
    gc.collect()
    try:
        return await asyncio.wait_for(case.run(steps), timeout)
    except TimeoutError:
        case.error = f"a run of N={steps} took longer than {timeout:.0f}s"
    except Exception as exc:  # noqa: BLE001 - one broken framework must not hide the others' numbers
        case.error = f"N={steps}: {type(exc).__name__}: {exc}"
    return None


async def measure(cases: list[Case], steps: Sequence[int], repeats: dict[int, int], timeout: float,
                  budget: float) -> int:
    """Warm each case up once, then run rounds (every N, every case) until the repeats or the budget run out.

    A round is never cut short, so every N keeps a sample of every case; returns the rounds run.
    """
    deadline = time.perf_counter() + budget
    for case in cases:
        if case.run is not None:
            await _timed(case, min(steps), timeout)
    rounds = 0
    for round_ in range(max(repeats.values())):
        if round_ and time.perf_counter() > deadline:
            break
        for n in steps:
            if round_ >= repeats[n]:
                continue
            for case in cases:
                if case.run is None or case.error:
                    continue
                sample = await _timed(case, n, timeout)
                if sample is not None:
                    case.samples.setdefault(n, []).append(sample)
        rounds += 1
    return rounds


def per_step_us(case: Case, n: int) -> float | None:
    """Median of run time / N, in microseconds."""
    samples = case.samples.get(n)
    return statistics.median(s.seconds for s in samples) / n * 1e6 if samples else None


def last_over_first(case: Case, n: int) -> float | None:
    """Median gap between model calls in the last tenth of the run over that in the first tenth."""
    if n < 50 or not case.samples.get(n):
        return None
    ratios = []
    for sample in case.samples[n]:
        gaps = [b - a for a, b in zip(sample.call_times, sample.call_times[1:])]
        tenth = len(gaps) // 10
        ratios.append(statistics.median(gaps[-tenth:]) / statistics.median(gaps[:tenth]))
    return statistics.median(ratios)


# ---- reporting ----------------------------------------------------------------------------
def _find(cases: list[Case], framework: str, store: str) -> Case | None:
    return next((c for c in cases if (c.framework, c.store) == (framework, store)), None)


def results(cases: list[Case], steps: Sequence[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows of the table and the target verdicts, as plain data (printed and written as JSON)."""
    baseline = _find(cases, *BASELINE)
    rows = []
    for case in cases:
        for n in steps:
            us = per_step_us(case, n)
            base = per_step_us(baseline, n) if baseline else None
            per_run = [s.seconds / n * 1e6 for s in case.samples.get(n, [])]
            best = min(per_run, default=None)
            base_runs = baseline.samples.get(n, []) if baseline else []
            base_best = min((s.seconds / n * 1e6 for s in base_runs), default=None)
            # Runs of one round ran back to back, so their ratio cancels slow drifts in machine load.
            paired = [a.seconds / b.seconds for a, b in zip(case.samples.get(n, []), base_runs)]
            rows.append({
                "framework": case.framework, "store": case.store, "n": n, "repeats": len(per_run),
                "median_us_per_step": us, "min_us_per_step": best, "max_us_per_step": max(per_run, default=None),
                "ratio_vs_langgraph": us / base if us is not None and base else None,
                "ratio_of_mins_vs_langgraph": best / base_best if best is not None and base_best else None,
                "paired_ratio_vs_langgraph": statistics.median(paired) if paired else None,
                "last_over_first": last_over_first(case, n),
                "samples_us_per_step": per_run, "skipped": case.skipped, "error": case.error,
            })
    by_key = {(r["framework"], r["store"], r["n"]): r for r in rows}
    targets = []
    for store, limit in TARGETS:
        for n in steps:
            row = by_key.get(("cyber_agent", store, n), {})
            value = row.get("ratio_vs_langgraph")
            targets.append({"name": f"cyber_agent {store} store <= {limit}x LangGraph in-memory", "n": n,
                            "value": value, "paired": row.get("paired_ratio_vs_langgraph"), "limit": limit,
                            "met": None if value is None else value <= limit})
    low, high = min(steps), max(steps)
    for store, _ in TARGETS:
        case = _find(cases, "cyber_agent", store)
        a, b = (per_step_us(case, low), per_step_us(case, high)) if case else (None, None)
        value = b / a if a and b is not None else None
        targets.append({"name": f"cyber_agent {store} store flatness: per-step N={high} / N={low}", "n": high,
                        "value": value, "limit": FLATNESS_LIMIT,
                        "met": None if value is None else value <= FLATNESS_LIMIT,
                        "marginal_us_per_step": _marginal(case, low, high) if case else None})
    return rows, targets


ISSUE_34 = (("memory", "none", 0.1), ("file", "none", 0.5), ("sqlite", "SqliteSaver", 0.25))
"""Issue 34's per-run targets: (store, LangGraph baseline store, limit); SQLite is judged against
LangGraph with its own SQLite checkpointer (the issue's baseline), its ratio to LangGraph in
memory reported beside it."""


def issue_targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of `bench/targets.py:ISSUE_34` (`34.fixed.*`) for `bench/run_all.py`'s issue table."""
    from targets import target  # bench/targets.py, beside this file

    by_key = {(r["framework"], r["store"], r["n"]): r for r in rows}
    out = []
    for store, base, limit in ISSUE_34:
        for n in (10, 400):
            ours, peer = by_key.get(("cyber_agent", store, n)), by_key.get(("langgraph", base, n))
            if not ours or ours["median_us_per_step"] is None or not peer or not peer["median_us_per_step"]:
                continue
            ratio = ours["median_us_per_step"] / peer["median_us_per_step"]
            memory_peer = by_key.get(("langgraph", "none", n)) or {}
            note = (f"vs LangGraph in memory: {ours['ratio_vs_langgraph']:.3f}x"
                    if base != "none" and ours.get("ratio_vs_langgraph") is not None and memory_peer else "")
            out.append(target(f"34.fixed.{store}_n{n}", after=ours["median_us_per_step"], unit="us/step",
                              limit=f"<= {limit}x", met=ratio <= limit, floor=peer["median_us_per_step"],
                              floor_name=f"LangGraph ({'in memory' if base == 'none' else base}) us/step",
                              ratio=ratio, ratio_of="cyber_agent step / LangGraph step, same N, same run",
                              note=note))
    return out


def _marginal(case: Case, low: int, high: int) -> float | None:
    """Cost of one more step: (median run time at high - at low) / (high - low), setup cancelled out."""
    a, b = case.samples.get(low), case.samples.get(high)
    if not a or not b or high == low:
        return None
    return (statistics.median(s.seconds for s in b) - statistics.median(s.seconds for s in a)) / (high - low) * 1e6


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _ratio(value: float | None, width: int) -> str:
    return format("-" if value is None else f"{value:.3f}x", f">{width}")


def print_report(cases: list[Case], rows: list[dict[str, Any]], targets: list[dict[str, Any]]) -> None:
    """Print the table, the target verdicts and any skipped or failed framework."""
    print(f"\n{'framework':26} {'store':12} {'N':>5} {'reps':>4} {'median us/step':>15} {'min':>9} {'max':>9} "
          f"{'vs LangGraph':>12} {'paired':>7} {'last/first':>10}")
    for row in rows:
        if row["repeats"] == 0:
            continue
        print(f"{row['framework']:26} {row['store']:12} {row['n']:>5} {row['repeats']:>4} "
              f"{_fmt(row['median_us_per_step'], '15.1f')} {_fmt(row['min_us_per_step'], '9.1f')} "
              f"{_fmt(row['max_us_per_step'], '9.1f')} {_ratio(row['ratio_vs_langgraph'], 12)} "
              f"{_ratio(row['paired_ratio_vs_langgraph'], 7)} {_fmt(row['last_over_first'], '10.2f')}")
    for case in cases:
        if case.skipped or case.error:
            print(f"  {case.framework} ({case.store}): {case.skipped or 'FAILED: ' + str(case.error)}")
    print("vs LangGraph: ratio of medians; paired: median over rounds of this run / LangGraph's run of the same round;"
          "\nlast/first: median step time in the last tenth of a run / in the first tenth (1 = flat)")
    print("\nTargets (baseline: LangGraph create_react_agent, no checkpointer, same N; judged on the ratio of medians)")
    for target in targets:
        verdict = {True: "MET", False: "NOT MET", None: "not evaluated"}[target["met"]]
        extra = f"  (paired: {_fmt(target['paired'], '.3f')})" if "paired" in target else ""
        if "marginal_us_per_step" in target:
            extra = f"  (marginal cost of one more step: {_fmt(target['marginal_us_per_step'], '.1f')} us)"
        n = "" if "flatness" in target["name"] else f" at N={target['n']}"
        print(f"  {target['name']}{n}: {_fmt(target['value'], '.3f')} (limit {target['limit']}) {verdict}{extra}")


def environment() -> dict[str, Any]:
    """Versions and machine facts that a reader of the JSON needs to compare runs."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    repo = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = None, None
    import cyber_agent

    return {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "cyber_agent_from": str(Path(cyber_agent.__file__).resolve().parent.parent),
            "load_average_1m": os.getloadavg()[0], "git_commit": commit, "git_dirty": dirty,
            "packages": versions, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


# ---- SQLite statements ----------------------------------------------------------------------
async def sqlite_statements(steps: Sequence[int], tmp_root: str) -> list[dict[str, Any]]:
    """Statements and transactions one SQLite run issues, in all and per step (one untimed run per N)."""
    counts: list[tuple[int, int, int]] = []
    run = cyber_agent_case("sqlite", tmp_root=tmp_root, statements=counts)
    for n in steps:
        await run(n)
    return [{"n": n, "statements": total, "transactions": begins, "statements_per_step": total / n,
             "transactions_per_step": begins / n} for n, total, begins in counts]


# ---- profiling ----------------------------------------------------------------------------
async def profile(store: str, steps: int, runs: int, tmp_root: str, top: int, out: str | None) -> None:
    """Profile `runs` cyber_agent runs of `steps` steps and print the hotspots.

    pyinstrument (a sampling profiler: a call tree with each frame's share, little distortion)
    is used when importable; otherwise cProfile, whose per-call cost inflates small functions.
    """
    run = cyber_agent_case(store, tmp_root=tmp_root)
    await run(10)
    try:
        from pyinstrument import Profiler
    except ImportError:
        Profiler = None  # noqa: N806 - the optional profiler class, or its absence

    async def timed_runs() -> float:
        return sum([(await run(steps)).seconds for _ in range(runs)])

    if Profiler is not None:
        sampler = Profiler(interval=0.0001, async_mode="disabled")
        sampler.start()
        seconds = await timed_runs()
        sampler.stop()
        print(f"cyber_agent {store} store, N={steps} x {runs}: {seconds / runs / steps * 1e6:.1f} us/step under pyinstrument")
        print(sampler.output_text(unicode=False, color=False))
        if out:
            Path(out).write_text(sampler.output_html())
        return
    tracer = cProfile.Profile()
    tracer.enable()
    seconds = await timed_runs()
    tracer.disable()
    print(f"cyber_agent {store} store, N={steps} x {runs}: {seconds / runs / steps * 1e6:.1f} us/step under cProfile")
    if out:
        tracer.dump_stats(out)
    stats = pstats.Stats(tracer)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats("cyber_agent", top)


# ---- entry point --------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or the profile) and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (3 at the small N, 2 at the large)")
    parser.add_argument("--repeat", type=int, help="repetitions at every N (default 7 at N<=50, 5 above)")
    parser.add_argument("--steps", default="10,400", help="comma-separated N values (default 10,400)")
    parser.add_argument("--dir", help="directory for the file store's temporary traces (default: system temp)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one run may take (default 60)")
    parser.add_argument("--budget", type=float, default=120.0,
                        help="seconds after which no new round of repetitions starts (default 120)")
    parser.add_argument("--store-url", metavar="URL",
                        help="add cyber_agent on the store this URL opens (e.g. postgresql://...; see open_store)")
    parser.add_argument("--memorysaver", action="store_true", help="add LangGraph with MemorySaver (slow at N=400)")
    parser.add_argument("--no-sqlitesaver", action="store_true",
                        help="leave out LangGraph with its SQLite checkpointer (the SQLite store's issue-34 baseline)")
    parser.add_argument("--scripted-model", action="store_true",
                        help="add cyber_agent driven by the library's ScriptedModel, to show the fake's own cost")
    parser.add_argument("--profile", choices=("memory", "file"),
                        help="profile cyber_agent runs at the largest N instead (pyinstrument if installed, else cProfile)")
    parser.add_argument("--top", type=int, default=25, help="cProfile: rows per listing (default 25)")
    parser.add_argument("--profile-out", metavar="PATH", help="also save the profile (pyinstrument: HTML; cProfile: pstats)")
    parser.add_argument("--before", metavar="REF",
                        help="also run the bench on the cyber_agent of git REF: alternating child processes, "
                             "one before/after table (bench/overhead_pairs.py)")
    parser.add_argument("--pairs", type=int, default=3, help="--before: (before, after) child runs (default 3)")
    parser.add_argument("--after", metavar="REF", help="--before: the after side on git REF's tree (default: this checkout)")
    args = parser.parse_args(argv)
    if args.before:
        from overhead_pairs import run_pairs  # bench/overhead_pairs.py, beside this file

        child = [*(["--quick"] if args.quick else []), *(["--repeat", str(args.repeat)] if args.repeat else []),
                 "--steps", args.steps, "--budget", str(args.budget), *(["--dir", args.dir] if args.dir else []),
                 *(["--no-sqlitesaver"] if args.no_sqlitesaver else [])]
        table = run_pairs(args.before, args.pairs, child, after_ref=args.after)
        if args.json:
            Path(args.json).write_text(json.dumps({"bench": "overhead-pairs", "schema": 1, **table}, indent=1))
        return 0
    steps = sorted({int(s) for s in args.steps.split(",")})
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-overhead-") as tmp_root:
        if args.profile:
            asyncio.run(profile(args.profile, max(steps), args.repeat or 3, tmp_root, args.top, args.profile_out))
            return 0
        repeats = {n: args.repeat or ((3 if n <= 50 else 2) if args.quick else (7 if n <= 50 else 5)) for n in steps}
        cases = build_cases(args, tmp_root)
        env = environment()
        print(f"per-step overhead, one sync tool call per step; N={steps}, repeats={repeats}; file store in {tmp_root}; "
              f"load average {env['load_average_1m']:.2f} on {env['cpus']} CPUs")
        started = time.perf_counter()
        rounds = asyncio.run(measure(cases, steps, repeats, args.timeout, args.budget))
        statements = asyncio.run(sqlite_statements(steps, tmp_root))
    if rounds < max(repeats.values()):
        print(f"\nthe {args.budget:.0f}s budget ran out after {rounds} round(s): fewer repetitions than asked (a busy machine?)")
    rows, targets = results(cases, steps)
    print_report(cases, rows, targets)
    print("\nSQLite store, one run per N (untimed): " + "; ".join(
        f"N={s['n']}: {s['statements_per_step']:.1f} statements and {s['transactions_per_step']:.2f} transactions per step"
        for s in statements))
    for row in issue_targets(rows):
        print(f"  issue 34 {row['id']}: {row['ratio']:.3f} of {row['floor_name']} (limit {row['limit']}) "
              f"{'MET' if row['met'] else 'NOT MET'}{'  (' + row['note'] + ')' if row['note'] else ''}")
    print(f"\n(bench took {time.perf_counter() - started:.0f}s; load average now {os.getloadavg()[0]:.2f})")
    if args.json:
        env["load_average_1m_at_end"] = os.getloadavg()[0]
        payload = {"bench": "overhead", "schema": 1, "environment": env, "issue_targets": issue_targets(rows),
                   "config": {"steps": steps, "repeats": repeats, "rounds_run": rounds, "budget_s": args.budget,
                              "dir": args.dir, "baseline": list(BASELINE)},
                   "results": rows, "targets": targets, "sqlite_statements": statements}
        Path(args.json).write_text(json.dumps(payload, indent=1))
    broken = [c for c in cases if c.framework.startswith("cyber_agent") and c.error]
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
