"""Run one attempt of one sweep cell and record it on its root trace: the unit every backend runs.

The asyncio engine, the process pool and Ray all call `run_cell`; only where it runs differs.
It builds the cell's model (seeded for the repeat, behind the provider's limiter, metered),
runs the task with a fresh `AgentRunner` on the sweep's store under the attempt's root id,
scores the answer, and writes the `SweepCellRecord` in one `update_trace`. A run that raises,
or that did not complete after a model call raised (the provider failed, not the agent), is
recorded as `error` (on a trace of its own if it never got one), so the ledger retries it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx

from cyber_agent.experiments.grid import ModelEntry, Sweep, SweepCell
from cyber_agent.experiments.ledger import blank_record
from cyber_agent.experiments.limiter import LimitedLLM, ProviderLimits
from cyber_agent.experiments.scorers import ScoreContext
from cyber_agent.llm.resolve import ResolvedModel, resolve_llm
from cyber_agent.llm.types import LLMCall
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.clock import utc_now
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.sweep_records import SweepCellRecord

__all__ = ["CellModel", "build_model", "run_cell", "score_record"]

_WIRE_OBSERVED = ("openai", "anthropic")


@dataclass(frozen=True, kw_only=True)
class CellModel:
    """A cell's model, ready for the runner."""

    llm: LimitedLLM
    """Seeded, limited and metered."""
    model: str
    """The model name to send."""


def build_model(entry: ModelEntry, seed: int, limits: ProviderLimits | None) -> CellModel:
    """Build a cell's model: the repeat's seed (`with_seed`), its provider's limiter, a meter."""
    prefix = entry.spec.partition(":")[0].strip().lower()
    options = dict(entry.options)
    limiter = limits.limiter(entry.limiter_key) if limits is not None else None
    wired = limits is not None and prefix in _WIRE_OBSERVED and entry.factory is None
    if wired:
        assert limits is not None
        inner = options.get("transport")
        options["transport"] = limits.transport(entry.limiter_key, inner if isinstance(inner, httpx.AsyncBaseTransport) else None)
    llm: LLMCall
    if entry.factory is not None:
        llm, model = entry.factory(**options), entry.spec
    else:
        resolved = resolve_llm(entry.spec, **options)
        llm, model = resolved.llm_call, resolved.model
    reseed = getattr(llm, "with_seed", None)
    if callable(reseed):
        llm = reseed(seed)
    return CellModel(llm=LimitedLLM(llm, limiter, observe=not wired), model=model)


async def _agents(store: TraceStore, root: Trace) -> int:
    """Traces of the tree that are not validators, without walking the store.

    A recursive tree books every agent it starts in its usage record (validators are not
    agents); a legacy tree is one level deep, so it is the root and its direct children.
    """
    if root.lineage.mode == "recursive":
        usage = await store.get_resource_usage(root.trace_id)
        if usage is not None:
            return usage.agents
    return 1 + root.lineage.child_count


async def score_record(sweep: Sweep, cell: SweepCell, record: SweepCellRecord, store: TraceStore,
                       limits: ProviderLimits | None) -> SweepCellRecord:
    """The record with the cell's scorer applied to its answer (no scorer: score None)."""
    scorer = sweep.scorer_for(cell.task)
    if scorer is None:
        return record.model_copy(update={"score": None, "passed": None, "scorer": None, "explanation": ""})
    trace_id = cell.trace_id(record.attempt)

    def wrap(resolved: ResolvedModel) -> LLMCall:
        key = resolved.provider
        return LimitedLLM(resolved.llm_call, limits.limiter(key) if limits is not None else None, observe=True)

    ctx = ScoreContext(store=store, trace_id=trace_id, workspace=sweep.workspace, wrap_model=wrap)
    score = await scorer.score(cell.task, record.answer, ctx)
    return record.model_copy(update={"score": score.value, "passed": score.passed, "scorer": scorer.name,
                                     "explanation": score.explanation, "grader_trace_id": score.grader_trace_id})


async def _record_error(store: TraceStore, cell: SweepCell, record: SweepCellRecord, error: str,
                        started: float) -> SweepCellRecord:
    record = record.model_copy(update={"state": "error", "error": error, "finished_at": utc_now(),
                                       "duration_s": time.perf_counter() - started})
    trace_id = cell.trace_id(record.attempt)
    if await store.get_trace(trace_id) is None:  # it failed before the runner created the trace
        await store.create_trace(Trace.create(trace_id=trace_id, task=cell.task.prompt, status="failed", error_message=error,
                                              name=f"{record.sweep}/{cell.task.id}", sweep_cell=record))
    else:
        await store.update_trace(trace_id, sweep_cell=record)
    return record


async def run_cell(sweep: Sweep, cell: SweepCell, attempt: int, store: TraceStore,
                   limits: ProviderLimits | None = None, registry: ToolRegistry | None = None) -> SweepCellRecord:
    """Run attempt `attempt` of `cell`, score it, record it on its root trace, and return the record.

    `registry` is the tool registry every cell of a sweep run shares (default: a fresh
    `default_registry()`; building one costs more than a short offline run).
    """
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner

    record = blank_record(sweep, cell, attempt)
    started = time.perf_counter()
    try:
        built = build_model(cell.model, cell.seed, limits)
        config = RunConfig.model_validate({
            "max_iterations": sweep.max_iterations, "name": f"{sweep.name}/{cell.task.id}", **cell.overrides,
            "model": built.model, "agent_mode": cell.mode, "workspace": sweep.workspace, "new_trace_id": cell.trace_id(attempt),
            "root_task_anchor": cell.task.anchor() if cell.mode == "recursive" else None,
        })
        runner = AgentRunner(trace_store=store, llm_call=built.llm, workspace=sweep.workspace, tool_registry=registry)
        result = await runner.run_result([{"role": "user", "content": cell.task.prompt}], config)
        if result.status != "completed" and built.llm.failures:  # the provider failed, not the agent: retry
            return await _record_error(store, cell, record, f"model call failed: {built.llm.failures[-1]}", started)
        record = record.model_copy(update={
            "run_status": result.status, "answer": result.answer, "tokens": built.llm.tokens, "cost": built.llm.cost,
            "llm_calls": built.llm.calls, "agents": await _agents(store, result.trace),
        })
        record = await score_record(sweep, cell, record, store, limits)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a provider error or a crash: recorded so the ledger retries the cell
        return await _record_error(store, cell, record, f"{type(exc).__name__}: {exc}", started)
    record = record.model_copy(update={"state": "scored", "duration_s": time.perf_counter() - started, "finished_at": utc_now()})
    await store.update_trace(cell.trace_id(attempt), sweep_cell=record)
    return record
