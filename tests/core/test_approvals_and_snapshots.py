"""Runner side of tool approvals (T8), run-config snapshots (T7) and side branches."""

from __future__ import annotations

import pytest

from cyber_agent.core.approvals import CallDecision, current_batch, decide_batch, recover_approvals, save_batch
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.errors import ConflictError, InvalidUpdateError, RunError
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore

TASK = [{"role": "user", "content": "do risky things"}]


def make_registry(log: list[str]) -> ToolRegistry:
    registry = ToolRegistry()

    def deploy(target: str, force: bool = False) -> str:
        """Deploy somewhere (needs a human)."""
        log.append(f"deploy {target} {force}")
        return f"deployed {target}"

    def look(path: str) -> str:
        """Look at something (safe)."""
        log.append(f"look {path}")
        return "looked"

    registry.register(deploy, requires_confirmation=True, editable_params=("target",), side_effects=True)
    registry.register(look)
    return registry


async def start_waiting(log: list[str]) -> tuple[InMemoryTraceStore, ToolRegistry, str]:
    store = InMemoryTraceStore()
    registry = make_registry(log)
    reply = ScriptedModel.tool_calls(("look", {"path": "a"}, "c1"), ("deploy", {"target": "prod"}, "c2"))
    with ScriptedModel([reply]) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry)
        result = await runner.run_result(TASK, RunConfig())
    assert result.status == "waiting_confirmation"
    return store, registry, result.trace.trace_id


async def test_a_batch_with_a_confirmable_call_waits_and_nothing_runs():
    log: list[str] = []
    store, _, trace_id = await start_waiting(log)
    assert log == []
    batch = await current_batch(store, trace_id)
    assert batch.status == "pending" and [c.name for c in batch.calls] == ["look", "deploy"]
    assert "tool_approval_requested" in [e.type for e in await store.get_events(trace_id)]


async def test_continue_while_pending_is_a_conflict():
    log: list[str] = []
    store, registry, trace_id = await start_waiting(log)
    runner = AgentRunner(trace_store=store, llm_call=ScriptedModel([]), tool_registry=registry)
    with pytest.raises(ConflictError, match="waiting for tool approval"):
        await runner.run_result([], RunConfig(trace_id=trace_id))


async def test_decisions_cover_every_call_and_edit_only_editable_params():
    log: list[str] = []
    store, _, trace_id = await start_waiting(log)
    batch = await current_batch(store, trace_id)
    with pytest.raises(InvalidUpdateError, match="every call"):
        await decide_batch(store, trace_id, batch.batch_id, [CallDecision(call_id="c1", decision="approve")])
    with pytest.raises(InvalidUpdateError, match="force"):
        await decide_batch(store, trace_id, batch.batch_id, [
            CallDecision(call_id="c1", decision="approve"),
            CallDecision(call_id="c2", decision="approve", arguments={"force": True}),
        ])
    decided = [CallDecision(call_id="c1", decision="approve"),
               CallDecision(call_id="c2", decision="approve", arguments={"target": "staging"})]
    await decide_batch(store, trace_id, batch.batch_id, decided)
    with pytest.raises(ConflictError, match="already decided"):
        await decide_batch(store, trace_id, batch.batch_id, decided)


async def test_a_decided_batch_resumes_from_the_persisted_calls_with_edits_and_rejections():
    log: list[str] = []
    store, registry, trace_id = await start_waiting(log)
    batch = await current_batch(store, trace_id)
    await decide_batch(store, trace_id, batch.batch_id, [
        CallDecision(call_id="c1", decision="reject", feedback="not needed"),
        CallDecision(call_id="c2", decision="approve", arguments={"target": "staging"}),
    ])
    with ScriptedModel(["done"]) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry)
        result = await runner.run_result([], RunConfig(trace_id=trace_id))
    assert log == ["deploy staging False"]
    assert result.status == "completed"
    sent = model.requests[0].messages
    assert "rejected by the reviewer: not needed" in sent[-2]["content"] and sent[-1]["content"] == "deployed staging"
    assert (await current_batch(store, trace_id)).status == "done"


async def test_a_batch_that_was_executing_when_the_process_died_fails_closed():
    log: list[str] = []
    store, registry, trace_id = await start_waiting(log)
    batch = await current_batch(store, trace_id)
    batch.status = "executing"  # what a crash mid-execution leaves behind
    await save_batch(store, batch)
    states = await recover_approvals(store)
    assert states == {trace_id: "execution_unknown"}
    trace = await store.get_trace(trace_id)
    assert trace.status == "failed" and "unknown" in trace.error_message
    runner = AgentRunner(trace_store=store, llm_call=ScriptedModel([]), tool_registry=registry)
    with pytest.raises(RunError, match="fails closed"):
        await runner.run_result([], RunConfig(trace_id=trace_id))
    assert log == []


async def test_continue_restores_behaviour_from_the_snapshot_and_ignores_overrides():
    with ScriptedModel(["one", "two"]) as model:
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, tool_registry=make_registry([]))
        first = await runner.run_result(TASK, RunConfig(temperature=0.2, tools=["look"]))
        await runner.run_result([{"role": "user", "content": "again"}],
                                RunConfig(trace_id=first.trace.trace_id, temperature=1.5, tools=["deploy", "look"]))
    assert model.requests[1].temperature == 0.2
    assert [t["function"]["name"] for t in model.requests[1].tools] == ["look"]


async def test_a_tampered_snapshot_is_refused_and_a_legacy_trace_without_one_is_inferred_once():
    store = InMemoryTraceStore()
    with ScriptedModel(["one", "two"]) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=make_registry([]))
        first = await runner.run_result(TASK, RunConfig())
        trace_id = first.trace.trace_id
        await store.update_trace(trace_id, run_config=None)
        await runner.run_result([{"role": "user", "content": "again"}], RunConfig(trace_id=trace_id))
    snapshot = (await store.get_trace(trace_id)).run_config
    assert snapshot is not None and snapshot.legacy_inferred is True
    snapshot.config["temperature"] = 1.0
    await store.update_trace(trace_id, run_config=snapshot)
    with pytest.raises(RunError, match="hash"):
        await AgentRunner(trace_store=store, llm_call=ScriptedModel([])).run_result([], RunConfig(trace_id=trace_id))


async def test_a_side_branch_never_moves_the_head_or_the_status():
    store = InMemoryTraceStore()
    with ScriptedModel(["main answer", "a lesson"]) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=make_registry([]))
        first = await runner.run_result(TASK, RunConfig())
        side = await runner.run_result([{"role": "user", "content": "reflect"}],
                                       RunConfig(trace_id=first.trace.trace_id, side_branch="reflection"))
    assert side.answer == "a lesson"
    trace = await store.get_trace(first.trace.trace_id)
    assert trace.head_sequence == first.trace.head_sequence and trace.status == "completed"
    assert trace.result_summary == "main answer"
    assert all(m.branch == "reflection" for m in side.messages)
    branch_head = trace.side_branches["reflection"].head_sequence
    path = await store.get_main_path_messages(trace.trace_id, branch_head)
    assert [m.text for m in path][-2:] == ["reflect", "a lesson"]
