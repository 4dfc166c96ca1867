"""Failure attribution on seeded failing trees: the fallible model with a fault injected into one child."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cyber_agent.analysis.explain import SIGNAL_COLUMNS, explain
from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.fallible import FallibleModel, _whole_reads
from cyber_agent.trace import InMemoryTraceStore

REPO = Path(__file__).resolve().parents[2]
_OBJECTIVE = re.compile(r"^Objective: (.*)$", re.M)


class InjectedFault(FallibleModel):
    """The fallible model erring exactly once: the first answer point of the child whose objective names `target`."""

    def __init__(self, target: str) -> None:
        super().__init__(1.0, seed=5)
        self.target = target
        self.injected = 0

    def _fallible(self, response, messages, first, names):
        objective = _OBJECTIVE.search(first) if "# Task brief" in first else None
        reports = any(c.name == "submit_report" for c in response.tool_calls)
        if reports and objective and self.target in objective.group(1) and not self.injected:
            self.injected += 1
            return super()._fallible(response, messages, first, names)
        return _whole_reads(response) if "submit_report" in names else response


async def _seeded_run(target: str) -> tuple[InMemoryTraceStore, str, InjectedFault]:
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner

    store, model = InMemoryTraceStore(), InjectedFault(target)
    runner = AgentRunner(trace_store=store, workspace=REPO, llm_call=model)
    config = RunConfig(model="fallible", workspace=str(REPO), agent_mode="recursive", root_task_anchor=DEMO_ANCHOR)
    result = await runner.run_result([{"role": "user", "content": DEMO_TASK}], config)
    await runner.drain_hooks()
    return store, result.trace.trace_id, model


def _first_report_step(record) -> int:
    return next(m["sequence"] for m in record.messages if m["role"] == "assistant" and isinstance(m["content"], dict)
                and any(c["name"] == "submit_report" for c in m["content"]["tool_calls"]))


@pytest.mark.parametrize("region", ["East", "North", "West", "South"])
async def test_explain_names_the_injected_node_and_step(region):
    store, root, model = await _seeded_run(f"region {region}")
    assert model.injected == 1
    records = {r.trace_id: r for r in await store.read_records([root], events=False)}
    [injected] = [r for r in records.values()
                  if region in (((r.trace.get("protocol") or {}).get("brief") or {}).get("objective") or "")]
    found = await explain(store, root)
    assert (found.trace_id, found.step, found.kind) == (injected.trace_id, _first_report_step(injected), "verdict_fail")
    chain, current = [], injected.trace_id
    while current:
        chain.append(current)
        current = records[current].trace.get("parent_trace_id")
    assert found.chain == chain[::-1] and found.chain[0] == root
    assert list(found.signals.columns) == list(SIGNAL_COLUMNS) and found.signals["trace_id"].iloc[0] == injected.trace_id


async def test_a_run_without_a_fault_has_nothing_to_explain_and_bad_roots_are_refused():
    store, root, model = await _seeded_run("no such objective")
    assert model.injected == 0
    found = await explain(store, root)
    assert found.trace_id is None and found.chain == [] and found.signals.empty
    with pytest.raises(ConfigurationError, match="root"):
        await explain(store, "")
