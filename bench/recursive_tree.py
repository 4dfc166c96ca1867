"""Benchmark a recursive task tree of up to 50 agents: sequential batches vs two children in parallel.

    python bench/recursive_tree.py               # 50 agents, 50 ms per model call, 3 reps of each mode (~1 min)
    python bench/recursive_tree.py --quick       # 1 rep of each mode (~20 s)
    python bench/recursive_tree.py --json out.json --store memory --agents 20 --latency 0.02

The tree is planned breadth first: the root delegates `--fanout` (6) children, each of them
up to 6 grandchildren, and so on until `--agents` (50) agents exist (root included), so the
tree holds exactly that many agents and `AGENT_MAX_TOTAL_AGENTS` is set to it: the budget is
full but never refuses. One fake model (a `FunctionModel`) plays every role with `--latency`
seconds of `asyncio.sleep` per call: a planner delegates its planned children in one `agent`
call, then reviews all returned reports in one turn (one `review_task` call each), then
reports (children) or answers (root); a leaf reports at once; each validator passes the
criterion it is shown. Every model call waits, so the wall time is mostly model latency, and
what parallel batches save is latency on the critical path.

The same tree runs with `child_execution_mode="sequential"` and with
`child_execution_mode="parallel", max_parallel_children=2`, alternating, on a fresh store each
time. Each run is checked: the root completed, every planned agent exists as a completed
child with a report, and the usage record counts exactly the planned agents. Target:
median parallel wall time <= 0.6x the sequential one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cyber_agent.core.config import RunConfig  # noqa: E402
from cyber_agent.core.resource_budget import BUDGET_ENV  # noqa: E402
from cyber_agent.core.runner import AgentRunner  # noqa: E402
from cyber_agent.llm.fakes import FunctionModel  # noqa: E402
from cyber_agent.llm.types import LLMResponse, ToolCall  # noqa: E402
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore  # noqa: E402
from cyber_agent.trace.protocols import TraceStore  # noqa: E402

ROOT = "agent 0"
TARGET = 0.6
_OBJECTIVE = re.compile(r"^Objective: (.*)$", re.M)
_CHILD = re.compile(r"^Child (\S+) \[", re.M)


def plan_tree(agents: int, fanout: int) -> dict[str, list[str]]:
    """Children of every agent, breadth first, until `agents` agents (root included) are planned."""
    if agents < 1 or fanout < 1:
        raise ValueError(f"need at least one agent and a fanout >= 1, got {agents} and {fanout}")
    plan: dict[str, list[str]] = {ROOT: []}
    queue, total = [ROOT], 1
    while queue and total < agents:
        parent = queue.pop(0)
        for i in range(1, fanout + 1):
            if total >= agents:
                break
            child = f"{parent}.{i}"
            plan[parent].append(child)
            plan[child] = []
            queue.append(child)
            total += 1
    return plan


def _call(name: str, index: int, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"call_{name}_{index}", name=name, arguments=arguments)


def _brief(objective: str) -> dict[str, Any]:
    return {"objective": objective, "completion_criteria": [f"{objective} reports done"]}


class TreeModel:
    """One fake model for the whole tree; the role comes from the tools the runner offers."""

    def __init__(self, plan: dict[str, list[str]], latency: float) -> None:
        self.plan = plan
        self.latency = latency
        self.calls: Counter[str] = Counter()
        """Model calls per role: planner, reviewer, leaf, validator, root."""
        self.in_flight = 0
        self.max_in_flight = 0
        """Most model calls waiting at once."""
        self.llm = FunctionModel(self._answer)

    async def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> LLMResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        names = {(t.get("function") or t)["name"] for t in tools or []}
        if "submit_validation" in names:
            self.calls["validator"] += 1
            return LLMResponse(tool_calls=[_call("submit_validation", 0, summary="criterion met", verdicts=[
                {"criterion": 1, "verdict": "pass", "evidence": "the report is in the trajectory"}])])
        users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        found = next((m.group(1).strip() for text in users if (m := _OBJECTIVE.search(text))), ROOT)
        me = found if found in self.plan else ROOT
        if "review_task" in names:
            pending = _pending(messages)
            if pending:
                self.calls["reviewer"] += 1
                return LLMResponse(tool_calls=[_call("review_task", i, child_trace_id=child, decision="accept")
                                               for i, child in enumerate(pending)])
        delegated = any(c["function"]["name"] == "agent" for m in messages for c in m.get("tool_calls") or [])
        if self.plan[me] and not delegated:
            self.calls["planner"] += 1
            return LLMResponse(tool_calls=[_call("agent", 0, task_brief=[_brief(c) for c in self.plan[me]])])
        if "submit_report" in names:
            self.calls["leaf" if not self.plan[me] else "reporter"] += 1
            return LLMResponse(tool_calls=[_call("submit_report", 0, outcome="completed", summary=f"{me} done",
                                                 outputs=[f"{me} done"])])
        self.calls["root"] += 1
        return LLMResponse(content=f"{me}: all {len(self.plan) - 1} descendants reported")


def _pending(messages: list[dict[str, Any]]) -> list[str]:
    """Children reported in tool results and not reviewed since, oldest first."""
    pending: dict[str, None] = {}
    for message in messages:
        if message.get("role") == "tool":
            pending.update(dict.fromkeys(_CHILD.findall(str(message.get("content") or ""))))
        for call in message.get("tool_calls") or []:
            if call["function"]["name"] == "review_task":
                pending.pop(json.loads(call["function"]["arguments"]).get("child_trace_id"), None)
    return list(pending)


@dataclass(kw_only=True)
class RunSample:
    """One checked run of the tree."""

    mode: str
    seconds: float
    agents: int
    """Business traces in the store (root + children created by `agent`)."""
    validators: int
    llm_calls: int
    """LLM calls in the root's usage record."""
    max_in_flight: int
    calls: dict[str, int] = field(default_factory=dict)


def tree_config(mode: str) -> RunConfig:
    """The root's run configuration: a recursive run whose children run in `mode` (at most 2 at once)."""
    return RunConfig(
        agent_mode="recursive", max_iterations=10, child_execution_mode=mode,  # type: ignore[arg-type]
        max_parallel_children=2,
        root_task_anchor={"objective": ROOT, "completion_criteria": [f"{ROOT} reports done"]},
    )


async def run_tree(mode: str, *, plan: dict[str, list[str]], latency: float, store_kind: str, tmp_root: str) -> RunSample:
    """Run the planned tree once in `mode` (sequential | parallel) on a fresh store; check and time it."""
    model = TreeModel(plan, latency)
    # Kept until the bench ends: mass deletes between runs slow the next run's file creation on
    # filesystems with online discard, a cost a real run does not pay (as in bench/overhead.py).
    directory = tempfile.mkdtemp(dir=tmp_root, prefix=f"{mode}-")
    store: TraceStore = FileSystemTraceStore(directory) if store_kind == "file" else InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=model.llm, workspace=directory)
    config = tree_config(mode)
    started = time.perf_counter()
    result = await runner.run_result([{"role": "user", "content": ROOT}], config)
    seconds = time.perf_counter() - started
    sample = await _check(store, result.trace.trace_id, result.status, result.trace.error_message, plan, mode)
    sample.seconds, sample.max_in_flight, sample.calls = seconds, model.max_in_flight, dict(model.calls)
    return sample


async def _check(store: TraceStore, root_id: str, status: str, error: str | None, plan: dict[str, list[str]],
                 mode: str) -> RunSample:
    if status != "completed":
        raise AssertionError(f"{mode}: the root ended {status!r}: {error}")
    traces = await store.list_traces(limit=None)
    business = [t for t in traces if t.trace_id == root_id or t.context.get("created_by_tool") == "agent"]
    validators = [t for t in traces if t.context.get("created_by_tool") == "validator"]
    if len(business) != len(plan):
        raise AssertionError(f"{mode}: {len(business)} agents in the store, {len(plan)} planned")
    unfinished = [t.trace_id for t in business if t.status != "completed"]
    if unfinished:
        raise AssertionError(f"{mode}: {len(unfinished)} agents did not complete, e.g. {unfinished[0]}")
    unreported = [t.trace_id for t in business if t.trace_id != root_id
                  and t.protocol.report is None]
    if unreported:
        raise AssertionError(f"{mode}: {len(unreported)} children have no report, e.g. {unreported[0]}")
    record = await store.get_resource_usage(root_id)
    usage = record.model_dump() if record is not None else {}
    if usage.get("agents") != len(plan):
        raise AssertionError(f"{mode}: the usage record counts {usage.get('agents')} agents, {len(plan)} planned")
    return RunSample(mode=mode, seconds=0.0, agents=len(business), validators=len(validators),
                     llm_calls=int(usage.get("llm_calls", 0)), max_in_flight=0)


def clean_environment(agents: int) -> None:
    """Start from a clean AGENT_* environment; cap the tree at the planned size, never at the call budget."""
    for name in ("AGENT_MODE", "AGENT_RECURSION_ENABLED", "AGENT_VALIDATOR_MODEL", "AGENT_ROOT_VALIDATOR_MODEL",
                 "AGENT_VALIDATOR_SEARCH_PROVIDER", *BUDGET_ENV):
        os.environ.pop(name, None)
    os.environ["AGENT_MAX_TOTAL_AGENTS"] = str(agents)
    os.environ["AGENT_MAX_LLM_CALLS"] = str(20 * agents)  # the call budget is not what this bench is about


def measure(plan: dict[str, list[str]], *, latency: float, repeat: int, store_kind: str, tmp_root: str,
            budget: float) -> tuple[dict[str, list[RunSample]], str | None]:
    """Alternate sequential and parallel runs until `repeat` of each (or the time budget) is done."""
    samples: dict[str, list[RunSample]] = {"sequential": [], "parallel": []}
    deadline = time.perf_counter() + budget
    try:
        for round_ in range(repeat):
            if round_ and time.perf_counter() > deadline:
                break
            for mode in ("sequential", "parallel"):
                samples[mode].append(asyncio.run(run_tree(mode, plan=plan, latency=latency, store_kind=store_kind,
                                                          tmp_root=tmp_root)))
    except Exception as exc:  # noqa: BLE001 - report what broke with the numbers gathered so far
        return samples, f"{type(exc).__name__}: {exc}"
    return samples, None


def summarize(samples: dict[str, list[RunSample]], plan: dict[str, list[str]], latency: float,
              error: str | None) -> dict[str, Any]:
    """Medians, the ratio, the verdict and every sample, as plain data."""
    seq, par = samples["sequential"], samples["parallel"]
    med = {mode: statistics.median(s.seconds for s in runs) if runs else None for mode, runs in samples.items()}
    ratio = med["parallel"] / med["sequential"] if med["parallel"] and med["sequential"] else None
    paired = [p.seconds / s.seconds for s, p in zip(seq, par)]
    same_agents = bool(seq and par) and len({s.agents for s in seq + par}) == 1
    depth = max(name.count(".") for name in plan)
    return {
        "bench": "recursive_tree", "schema": 1,
        "config": {"agents": len(plan), "depth": depth, "latency_s": latency, "max_parallel_children": 2},
        "runs": {mode: [vars(s) for s in runs] for mode, runs in samples.items()},
        "median_s": med, "ratio_parallel_vs_sequential": ratio,
        "paired_ratios": paired, "same_agent_count": same_agents, "error": error,
        "targets": [{"name": f"parallel(2) wall time <= {TARGET}x sequential", "value": ratio, "limit": TARGET,
                     "met": None if ratio is None or error else (ratio <= TARGET and same_agents)}],
    }


def print_report(summary: dict[str, Any]) -> None:
    """Print medians, the ratio and the verdict."""
    config = summary["config"]
    print(f"\n{'mode':12} {'reps':>4} {'median s':>9} {'min s':>7} {'agents':>6} {'validators':>10} "
          f"{'LLM calls':>9} {'max in flight':>13}")
    for mode, runs in summary["runs"].items():
        if not runs:
            continue
        print(f"{mode:12} {len(runs):>4} {summary['median_s'][mode]:9.2f} {min(r['seconds'] for r in runs):7.2f} "
              f"{runs[0]['agents']:>6} {runs[0]['validators']:>10} {runs[0]['llm_calls']:>9} "
              f"{max(r['max_in_flight'] for r in runs):>13}")
    if summary["error"]:
        print(f"  FAILED: {summary['error']}")
    target = summary["targets"][0]
    verdict = {True: "MET", False: "NOT MET", None: "not evaluated"}[target["met"]]
    value = "-" if target["value"] is None else f"{target['value']:.3f}"
    paired = ", ".join(f"{r:.2f}" for r in summary["paired_ratios"]) or "-"
    print(f"\n{config['agents']} agents (depth {config['depth']}), {config['latency_s'] * 1000:.0f} ms per model call; "
          f"same agent count in every run: {summary['same_agent_count']}")
    print(f"  {target['name']}: {value} (paired: {paired}) {verdict}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the report, optionally write JSON; exit 1 if a run broke."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run of each mode")
    parser.add_argument("--repeat", type=int, help="runs of each mode (default 3; --quick 1)")
    parser.add_argument("--agents", type=int, default=50, help="agents in the tree, root included (default 50)")
    parser.add_argument("--fanout", type=int, default=6, help="children per agent (default 6, the quota)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds of fake model latency per call (default 0.05)")
    parser.add_argument("--store", choices=("file", "memory"), default="file", help="trace store (default file)")
    parser.add_argument("--dir", help="directory for the file store's temporary traces (default: system temp)")
    parser.add_argument("--budget", type=float, default=240.0, help="seconds after which no new round starts (default 240)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    args = parser.parse_args(argv)
    repeat = args.repeat or (1 if args.quick else 3)
    plan = plan_tree(args.agents, args.fanout)
    clean_environment(len(plan))
    print(f"recursive tree: {len(plan)} agents, fanout {args.fanout}, {args.latency * 1000:.0f} ms per model call, "
          f"{repeat} run(s) per mode, {args.store} store")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-tree-") as tmp_root:
        samples, error = measure(plan, latency=args.latency, repeat=repeat, store_kind=args.store, tmp_root=tmp_root,
                                 budget=args.budget)
    summary = summarize(samples, plan, args.latency, error)
    summary["config"].update(store=args.store, repeat=repeat, fanout=args.fanout)
    print_report(summary)
    print(f"\n(bench took {time.perf_counter() - started:.0f}s; load average now {os.getloadavg()[0]:.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
