"""Seeded failing trees for failure attribution: one known fault injected into one chosen agent of the demo.

Three families, each with the injected node and step known:
- `FaultInReport`: the fallible model changes the number of one recursive child's first report
  (the recorded evidence check fails it before any validator);
- `FaultInAnswer`: the fallible model changes the number of one legacy sub-agent's final answer
  (legacy mode has no validator: only the evidence check `explain` runs can see it);
- `FabricationInReport`: the fabricating model lies in one named way in one recursive leaf's
  first report (an invented citation id or artifact, results after zero tool calls, completed
  over a failed read) — the number may be right, only the evidence check catches it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.llm.fabricating import FabricatingModel, FabricationKind
from cyber_agent.llm.fallible import FallibleModel, _whole_reads
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.records import TraceRecord

REPO = Path(__file__).resolve().parents[2]
REGIONS = ("East", "North", "West", "South")
_OBJECTIVE = re.compile(r"^Objective: (.*)$", re.M)


class FaultInReport(FallibleModel):
    """The fallible model erring exactly once: the first report of the recursive child whose objective names `target`."""

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


class FaultInAnswer(FallibleModel):
    """The fallible model erring exactly once: the final answer of the legacy sub-agent whose task names `target`."""

    def __init__(self, target: str) -> None:
        super().__init__(1.0, seed=5)
        self.target = target
        self.injected = 0

    def _fallible(self, response, messages, first, names):
        final = not response.tool_calls and bool(response.content)
        if final and self.target in first and "agent" not in names and not self.injected:
            changed = super()._fallible(response, messages, first, names)
            self.injected += changed.content != response.content
            return changed
        return response


class FabricationInReport(FabricatingModel):
    """The fabricating model lying once, in `kind`, in the first report of the leaf whose objective names `target`."""

    def __init__(self, target: str, kind: FabricationKind) -> None:
        super().__init__(0.0, seed=3)
        self.target, self.kind = target, kind

    def kind_for(self, objective: str, attempt: int) -> FabricationKind | None:
        return self.kind if self.target in objective and attempt == 0 else None

    @property
    def injected(self) -> int:
        return sum(1 for f in self.ledger if f.kind == self.kind)


@dataclass
class SeededRun:
    store: InMemoryTraceStore
    root: str
    model: Any
    records: dict[str, TraceRecord]

    def node_for(self, text: str) -> TraceRecord:
        """The one agent whose brief objective (recursive) or task (legacy) names `text`."""
        found = [r for r in self.records.values() if r.trace.get("lineage", {}).get("created_by_tool") != "validator"
                 and text in ((((r.trace.get("protocol") or {}).get("brief") or {}).get("objective"))
                              or (r.trace.get("task") if r.trace.get("parent_trace_id") else "") or "")]
        assert len(found) == 1, [r.trace_id for r in found]
        return found[0]

    def chain_to(self, trace_id: str) -> list[str]:
        chain, current = [], trace_id
        while current:
            chain.append(current)
            current = self.records[current].trace.get("parent_trace_id")
        return chain[::-1]


async def seeded_run(model: Any, mode: str = "recursive") -> SeededRun:
    """The demo task run by `model` in `mode`, stored in memory."""
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner

    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, workspace=REPO, llm_call=model)
    extra: dict[str, Any] = {"root_task_anchor": DEMO_ANCHOR} if mode == "recursive" else {}
    config = RunConfig(model="fallible", workspace=str(REPO), agent_mode=mode, **extra)
    result = await runner.run_result([{"role": "user", "content": DEMO_TASK}], config)
    await runner.drain_hooks()
    root = result.trace.trace_id
    records = {r.trace_id: r for r in await store.read_records([root], events=False)}
    return SeededRun(store=store, root=root, model=model, records=records)


def first_report_step(record: TraceRecord) -> int:
    return next(m["sequence"] for m in record.messages if m["role"] == "assistant" and isinstance(m["content"], dict)
                and any(c["name"] == "submit_report" for c in m["content"]["tool_calls"]))


def final_answer_step(record: TraceRecord) -> int:
    return max(m["sequence"] for m in record.messages if m["role"] == "assistant")
