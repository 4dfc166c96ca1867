"""Issue 14 [loop-integrity], interrupts and stops: the spawn fence and its explicit clear, stops
reaching legacy sub-agents, one child's crash staying that child's failure, observers that
never fail or delay a run, exact AGENT_MODE values and tool-message descriptions."""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import Any

import pytest
from recursive_helpers import (
    ROOT,
    TASK,
    TreeModel,
    brief,
    call,
    clean_agent_env,  # noqa: F401  (autouse fixture)
    delegate,
    make_runner,
    recursive_config,
    trace_by_objective,
    usage_of,
)

from cyber_agent.core.agent_mode import AgentPolicy
from cyber_agent.core.child_run import spawn_limits
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.errors import ToolError
from cyber_agent.llm.fakes import FunctionModel, ScriptedModel
from cyber_agent.llm.types import LLMResponse, ToolCall
from cyber_agent.notebook import launch, run_sync
from cyber_agent.protocol.agent_tool import register_agent_tool
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.models import Message, Trace


async def root_of(store) -> Trace:
    return next(t for t in await store.list_traces(limit=None) if t.parent_trace_id is None)


async def children(store, parent_id: str) -> list[Trace]:
    return await store.list_traces(parent_trace_id=parent_id, created_by_tool="agent", limit=None)


# ---- 1. the fence holds before a spawn; clearing it is explicit ---------------------------------
async def test_an_interrupt_during_a_batch_creates_no_further_child_and_clear_interrupt_lets_the_tree_go_on():
    box: dict[str, Any] = {}

    async def interrupt_in_first(key, messages, names):
        if key == "first" and "interrupted" not in box:
            box["interrupted"] = box["runner"].interrupt((await root_of(box["store"])).trace_id, "user pressed stop")

    model = TreeModel({ROOT: [delegate(brief("first"), brief("second"))]}, on_call=interrupt_in_first)
    runner, store = make_runner(model.llm)
    box.update(runner=runner, store=store)
    result = await runner.run_result(TASK, recursive_config())  # sequential: second would start after first
    root_id = result.trace.trace_id
    assert result.status == "stopped" and result.trace.error_message == "interrupt: user pressed stop"
    assert [c.protocol.brief.objective for c in await children(store, root_id)] == ["first"]  # second never created
    assert model.calls["second"] == 0
    reply = next(m for m in result.messages if m.tool_name == "agent")
    assert "[not created]" in reply.text and "interrupt: user pressed stop" in reply.text
    assert (await usage_of(store, root_id))["agents"] == 2  # the root and first; second's slot released

    # A direct spawn under the fence is refused with a tool error naming the interrupt.
    with pytest.raises(ToolError, match="interrupt: user pressed stop.*no sub-agent was created"):
        await spawn_limits(runner, result.trace, policy=AgentPolicy.of(result.trace), archetypes=runner.archetypes)

    # Without an explicit clear the fence holds; after it, the same runner continues the tree.
    calls_before = model.calls[ROOT]
    held = await runner.run_result([{"role": "user", "content": "go on"}], RunConfig(trace_id=root_id))
    assert held.status == "stopped" and model.calls[ROOT] == calls_before
    assert runner.clear_interrupt(root_id) is True and runner.clear_interrupt(root_id) is False
    assert runner.interrupt_reason(root_id) is None
    resumed = await runner.run_result([{"role": "user", "content": "go on"}], RunConfig(trace_id=root_id))
    assert model.calls[ROOT] > calls_before
    assert resumed.trace.error_message != "interrupt: user pressed stop"


# ---- 2. a stop reaches legacy sub-agents ------------------------------------------------------
def busy_legacy_tree() -> tuple[Any, ToolRegistry, dict[str, int]]:
    """A legacy parent that delegates once; the sub-agent then calls `peek` forever."""
    counts = {"parent": 0, "child": 0}
    reg = ToolRegistry()

    def peek() -> str:
        """A read-only tool."""
        return "seen"

    reg.register(peek)
    register_agent_tool(reg)

    async def model(messages, tools):
        names = {t["function"]["name"] for t in tools or []}
        await asyncio.sleep(0.005)
        if "agent" in names:
            counts["parent"] += 1
            if not any(m["role"] == "tool" for m in messages):
                return LLMResponse(tool_calls=[ToolCall(id="a", name="agent", arguments={"task": "keep busy"})])
            return LLMResponse(content="parent done")
        counts["child"] += 1
        return LLMResponse(tool_calls=[ToolCall(id=f"p{counts['child']}", name="peek", arguments={})])

    return model, reg, counts


async def wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def test_runner_stop_of_a_legacy_root_reaches_its_busy_sub_agent():
    fn, reg, counts = busy_legacy_tree()
    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=FunctionModel(fn), tool_registry=reg)
    run = asyncio.create_task(runner.run_result(TASK, RunConfig(agent_mode="legacy", max_iterations=10_000)))
    await wait_for(lambda: counts["child"] >= 3)
    root = await root_of(store)
    flagged = runner.stop(root.trace_id, "enough")
    at_stop = counts["child"]
    result = await asyncio.wait_for(run, 20)
    assert len(flagged) == 2  # the root and its registered legacy sub-agent
    assert counts["child"] - at_stop <= 1  # at most the call in flight when the stop came
    (child,) = await children(store, root.trace_id)
    assert child.status == "stopped" and "enough" in child.error_message
    assert result.status == "stopped"


def test_a_notebook_stop_reaches_a_busy_legacy_sub_agent():
    fn, reg, counts = busy_legacy_tree()
    handle = run_sync(launch("keep busy", llm_call=FunctionModel(fn), tool_registry=reg, max_iterations=10_000,
                             progress=False, poll_interval=0.05))
    deadline = time.monotonic() + 20
    while counts["child"] < 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    flagged = handle.stop("stop from the cell")
    at_stop = counts["child"]
    result = handle.wait(timeout=20)
    time.sleep(0.1)  # a sub-agent still running would call the model again by now
    assert len(flagged) == 2 and counts["child"] - at_stop <= 1
    assert result.status == "stopped"


# ---- 3. one child's exception is that child's failure -----------------------------------------
def boom(messages, names):
    raise RuntimeError("model fake exploded")


async def test_a_recursive_child_that_raises_gets_a_failed_report_and_its_sibling_still_runs():
    model = TreeModel({ROOT: [delegate(brief("boom"), brief("fine"))], "boom": [boom]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    reply = next(m for m in result.messages if m.tool_name == "agent")
    assert not reply.metadata["is_error"]
    assert "[failed] outcome=failed" in reply.text and "RuntimeError: model fake exploded" in reply.text
    failed, fine = await trace_by_objective(store, "boom"), await trace_by_objective(store, "fine")
    assert failed.status == "failed" and failed.protocol.report.submitted_by == "runner"
    assert failed.protocol.validations[-1].verdict == "fail"
    assert fine.status == "completed" and model.calls["fine"] >= 1
    events = [e for e in await store.get_events(result.trace.trace_id) if e.type.startswith("sub_trace_")]
    assert [e.type for e in events].count("sub_trace_completed") == [e.type for e in events].count("sub_trace_started")


async def test_a_legacy_sub_agent_that_raises_is_a_failed_line_and_its_siblings_complete():
    def fn(messages, tools):
        names = {t["function"]["name"] for t in tools or []}
        task = next(m["content"] for m in messages if m["role"] == "user")
        if "agent" in names:
            if not any(m["role"] == "tool" for m in messages):
                return LLMResponse(tool_calls=[ToolCall(id="a", name="agent", arguments={"task": ["boom", "fine"]})])
            return LLMResponse(content="merged")
        if task == "boom":
            raise RuntimeError("sub-agent fake exploded")
        return LLMResponse(content="fine answer")

    store = InMemoryTraceStore()
    reg = register_agent_tool(ToolRegistry())
    runner = AgentRunner(trace_store=store, llm_call=FunctionModel(fn), tool_registry=reg)
    result = await runner.run_result(TASK, RunConfig(agent_mode="legacy"))
    assert result.status == "completed" and result.answer == "merged"
    reply = next(m for m in result.messages if m.tool_name == "agent")
    assert "boom -> [failed] (failed: RuntimeError: sub-agent fake exploded)" in reply.text
    assert "fine -> [completed] fine answer" in reply.text


async def test_cancelling_a_parent_while_a_child_runs_still_propagates_cancellation():
    started = asyncio.Event()

    async def fn(messages, tools):
        names = {t["function"]["name"] for t in tools or []}
        if "agent" in names:
            return LLMResponse(tool_calls=[ToolCall(id="a", name="agent", arguments={"task": "slow"})])
        started.set()
        await asyncio.sleep(30)
        return LLMResponse(content="never")

    runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=FunctionModel(fn),
                         tool_registry=register_agent_tool(ToolRegistry()))
    run = asyncio.create_task(runner.run_result(TASK, RunConfig(agent_mode="legacy")))
    await asyncio.wait_for(started.wait(), 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run


# ---- 5. observers never fail or delay a run ----------------------------------------------------
async def test_a_progress_callback_that_raises_never_fails_the_run_and_warns_once():
    def observer(event):
        raise RuntimeError("observer bug")

    with ScriptedModel([ScriptedModel.text("the answer")]) as model:
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, tool_registry=ToolRegistry(),
                             on_progress=observer)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = await runner.run_result(TASK, RunConfig())
    assert result.status == "completed" and result.answer == "the answer"
    observer_warnings = [w for w in caught if "progress observer failed" in str(w.message)]
    assert len(observer_warnings) == 1 and "observer bug" in str(observer_warnings[0].message)


async def test_a_slow_post_turn_hook_does_not_delay_the_result_and_is_bounded_at_shutdown():
    class Slow:
        name = "slow"
        finished = False

        async def after_turn(self, snapshot):
            await asyncio.sleep(30)
            Slow.finished = True

    with ScriptedModel([ScriptedModel.text("quick")]) as model:
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, tool_registry=ToolRegistry(),
                             post_turn_hooks=[Slow()])
        began = time.monotonic()
        result = await runner.run_result(TASK, RunConfig())
        assert time.monotonic() - began < 5 and result.status == "completed"
        assert await runner.drain_hooks(timeout=0.05) == 1  # outlived the bounded wait: cancelled
    assert Slow.finished is False


# ---- 6. smaller ------------------------------------------------------------------------------
def test_a_tool_message_without_tool_name_is_described_by_its_content_or_call_id():
    seed = Message.create(trace_id="t", role="tool", tool_call_id="call_abc123", content="工具执行结果")
    assert seed.describe() == "工具执行结果"
    empty = Message.create(trace_id="t", role="tool", tool_call_id="call_abc123", content="")
    assert empty.describe() == "tool result call_abc123"
    long = Message.create(trace_id="t", role="tool", tool_call_id="c", content="x " * 500)
    assert len(long.describe()) < 300 and long.describe().endswith("…")


# ---- 4. a legacy sub-agent waiting for an approval holds its parent ---------------------------
async def test_a_parent_waits_with_its_sub_agent_for_an_approval_and_gets_its_result_when_continued():
    import httpx

    from cyber_agent.core.approvals import CallDecision, current_batch, decide_batch
    from cyber_agent.server.app import create_app

    side_effects: list[str] = []
    reg = register_agent_tool(ToolRegistry())

    def deploy(target: str) -> str:
        """Deploy (needs a human approval)."""
        side_effects.append(target)
        return f"deployed {target}"

    reg.register(deploy, requires_confirmation=True, side_effects=True)

    def fn(messages, tools):
        names = {t["function"]["name"] for t in tools or []}
        tool_results = [m for m in messages if m["role"] == "tool"]
        if "agent" in names:  # the parent
            if not tool_results:
                return LLMResponse(tool_calls=[ToolCall(id="a", name="agent", arguments={"task": "deploy prod"})])
            return LLMResponse(content="parent saw: " + messages[-1]["content"])
        if not tool_results:  # the sub-agent
            return LLMResponse(tool_calls=[ToolCall(id="d", name="deploy", arguments={"target": "prod"})])
        return LLMResponse(content="sub-agent: " + tool_results[-1]["content"])

    store = InMemoryTraceStore()
    model = FunctionModel(fn)
    runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=reg)
    result = await runner.run_result(TASK, RunConfig(agent_mode="legacy"))
    (child,) = await children(store, result.trace.trace_id)
    batch = await current_batch(store, child.trace_id)
    assert child.status == "waiting_confirmation" and batch is not None and batch.status == "pending"
    # The parent waits too; its tool result names the waiting child and its batch.
    assert result.status == "waiting_confirmation" and result.answer is None
    reply = next(m for m in result.messages if m.tool_name == "agent")
    assert child.trace_id in reply.text and batch.batch_id in reply.text and "waits" in reply.text
    progress = [e.payload for e in await store.get_events(result.trace.trace_id) if e.type == "progress"]
    assert {"stage": "child_waiting_approval", "child_trace_id": child.trace_id, "batch_id": batch.batch_id} in progress
    # Visible from the root over REST.
    app = create_app(store=store, runner=runner)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http:
        listing = (await http.get(f"/api/traces/{result.trace.trace_id}/tool-approvals/pending")).json()
    assert listing["batch"] is None
    assert [(d["trace_id"], d["batch"]["batch_id"]) for d in listing["descendants"]] == [(child.trace_id, batch.batch_id)]

    # Continuing the parent before the decision: it keeps waiting, no model call.
    calls = len(model.requests)
    still = await runner.run_result([], RunConfig(trace_id=result.trace.trace_id))
    assert still.status == "waiting_confirmation" and len(model.requests) == calls

    # Approve, run the sub-agent on, then continue the parent: the sub-agent's result reaches it.
    await decide_batch(store, child.trace_id, batch.batch_id, [CallDecision(call_id="d", decision="approve")])
    done_child = await runner.run_result([], RunConfig(trace_id=child.trace_id))
    assert done_child.status == "completed" and side_effects == ["prod"]
    final = await runner.run_result([], RunConfig(trace_id=result.trace.trace_id))
    assert final.status == "completed"
    assert final.answer.startswith(f"parent saw: [sub-agent {child.trace_id} finished after its tool approval] "
                                   "[completed]: sub-agent: deployed prod")
