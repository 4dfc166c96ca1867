"""200 concurrent child-creation attempts against the quotas of one recursive tree.

A recursive root first builds 19 agents the ordinary way (6 children, each with 2 children of
its own). Then 200 `agent(task_brief=[...])` executions (batches of 1–3 briefs) start at once
from those 19 parents (the root, already at its quota, included), on a
store that yields to the event loop inside every read and write of a trace or of the usage
record, so any check-then-write that is not atomic would interleave. Every child created by the
race delegates three grandchildren of its own while it runs, so the race spreads down the tree
until `AGENT_MAX_TOTAL_AGENTS=50` refuses. Afterwards:

- no parent has more than 6 children, and each parent's `child_count` equals its children;
- the usage record counts exactly the business traces in the store, and at most 50;
- a refused batch created nothing; an accepted batch created every child it asked for;
- both refusal kinds happened (the per-parent quota and the tree budget).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path
from typing import Any

from reliability_helpers import ROOT, PlanModel, brief, clean_agent_env, recursive_config, task_objective, tool_context  # noqa: F401

from cyber_agent.core.agent_mode import MAX_CHILDREN_PER_PARENT
from cyber_agent.core.runner import AgentRunner
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.models import Trace

MAX_AGENTS = 50
ATTEMPTS = 200


class YieldingStore(InMemoryTraceStore):
    """Yields to the event loop before every trace and usage read or write."""

    async def get_trace(self, trace_id: str) -> Trace | None:
        await asyncio.sleep(0)
        return await super().get_trace(trace_id)

    async def update_trace(self, trace_id: str, **updates: Any) -> Trace:
        await asyncio.sleep(0)
        return await super().update_trace(trace_id, **updates)

    async def get_resource_usage(self, root_trace_id: str) -> Any:
        await asyncio.sleep(0)
        return await super().get_resource_usage(root_trace_id)

    async def replace_resource_usage(self, root_trace_id: str, usage: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        await super().replace_resource_usage(root_trace_id, usage)

    async def update_resource_usage(self, root_trace_id: str, change: Any) -> Any:
        await asyncio.sleep(0)
        return await super().update_resource_usage(root_trace_id, change)


def _plan(objective: str) -> list[str]:
    if objective == ROOT:
        return [f"first {i}" for i in range(1, 7)]
    if objective.startswith("first "):
        return [f"second {objective[6:]}.{j}" for j in (1, 2)]
    if objective.startswith("race "):
        return [f"deep {objective[5:]}.{k}" for k in range(1, 4)]
    return []


async def _race(tmp_path: Path) -> tuple[InMemoryTraceStore, Trace, list[tuple[list[str], Any]]]:
    store = YieldingStore()
    runner = AgentRunner(trace_store=store, llm_call=PlanModel(_plan).llm, workspace=tmp_path)
    result = await runner.run_result([{"role": "user", "content": ROOT}], recursive_config())
    assert result.status == "completed", result.trace.error_message
    root = result.trace
    parents = [root] + [t for t in await store.list_traces(limit=None) if t.lineage.created_by_tool == "agent"]
    assert len(parents) == 19
    rng = random.Random(2024)
    attempts = []
    for i in range(ATTEMPTS):
        parent = rng.choice(parents)
        objectives = [f"race {i}-{j}" for j in range(rng.randint(1, 3))]
        ctx = tool_context(runner, parent, root, tmp_path)
        call = runner.tool_registry.execute("agent", {"task_brief": [brief(o) for o in objectives]},
                                            allowed=ctx.allowed_tools, context=ctx)
        attempts.append((objectives, call))
    results = await asyncio.gather(*(call for _, call in attempts))
    return store, root, [(objectives, r) for (objectives, _), r in zip(attempts, results)]


def test_two_hundred_concurrent_batches_never_break_a_quota(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_MAX_TOTAL_AGENTS", str(MAX_AGENTS))
    monkeypatch.setenv("AGENT_MAX_LLM_CALLS", "100000")  # the agent quotas are under test, not the call budget
    store, root, outcomes = asyncio.run(_race(tmp_path))

    async def snapshot() -> tuple[list[Trace], Any]:
        return await store.list_traces(limit=None), await store.get_resource_usage(root.trace_id)
    traces, usage = asyncio.run(snapshot())
    business = [t for t in traces if t.trace_id == root.trace_id or t.lineage.created_by_tool == "agent"]
    children = Counter(t.parent_trace_id for t in business if t.parent_trace_id)
    assert max(children.values()) <= MAX_CHILDREN_PER_PARENT, children.most_common(3)
    for parent in business:
        assert int(parent.lineage.child_count) == children.get(parent.trace_id, 0), parent.trace_id
    assert usage.agents == len(business) <= MAX_AGENTS

    created = {task_objective(t) for t in business}
    refusals = Counter()
    for objectives, result in outcomes:
        made = [o for o in objectives if o in created]
        if result.is_error:
            assert "nothing was created" in result.content, result.content[:300]
            assert not made, f"a refused batch created {made}: {result.content[:200]}"
            refusals["quota" if "child quota" in result.content else "budget" if "tree budget" in result.content
                     else "other"] += 1
        else:
            assert made == objectives, f"an accepted batch created {made} of {objectives}"
    assert refusals["quota"] and refusals["budget"] and not refusals["other"], refusals
    accepted = sum(not r.is_error for _, r in outcomes)
    assert accepted >= 5, "the race must also let some batches through"
