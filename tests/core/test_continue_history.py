"""Continuing, rewinding or branching a trace cut inside a batch sends a history providers accept,
and a call that had started without a result is reported as of unknown outcome, never as not run."""

from __future__ import annotations

import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.models import Message, MessageContent
from cyber_agent.llm.types import ToolCall
from tests.core.history_rules import history_problems

TASK = [{"role": "user", "content": "do three things"}]


class Killed(BaseException):
    """Stands for the process dying: no `except Exception` in the loop catches it."""


def _registry(ran: list[str], on_call=None) -> ToolRegistry:
    registry = ToolRegistry()

    def step(n: int) -> str:
        """Do step n."""
        if on_call is not None:
            on_call(n)
        ran.append(f"step{n}")
        return f"did {n}"

    registry.register(step)
    return registry


def _batch(n: int = 3):
    return ScriptedModel.tool_calls(*[("step", {"n": i}, f"c{i}") for i in range(n)])


async def _continue(store, registry, **config):
    with ScriptedModel(["resumed"]) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry)
        result = await runner.run_result([{"role": "user", "content": "go on"}], RunConfig(**config))
    return result, model.requests[0].messages


def _tool_results(sent):
    return [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"]


async def test_a_stop_between_calls_of_a_batch_is_closed_in_call_order_when_continued():
    store, ran, holder = InMemoryTraceStore(), [], {}

    def stop_after_first(n: int) -> None:
        if n == 0:
            (trace_id,) = holder["runner"].running()
            holder["runner"].stop(trace_id, "user pressed stop")

    registry = _registry(ran, stop_after_first)
    with ScriptedModel([_batch()]) as model:
        holder["runner"] = runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry)
        first = await runner.run_result(TASK, RunConfig())
    assert first.status == "stopped" and ran == ["step0"]
    result, sent = await _continue(store, registry, trace_id=first.trace.trace_id)
    assert result.answer == "resumed"
    assert history_problems(sent) == []
    results = _tool_results(sent)
    assert [r[0] for r in results] == ["c0", "c1", "c2"]
    assert results[0][1] == "did 0" and all(r[1].startswith("not executed") for r in results[1:])


async def test_a_kill_while_a_tool_runs_reads_as_unknown_outcome_and_later_calls_as_not_run():
    store, ran = InMemoryTraceStore(), []

    def die_on_second(n: int) -> None:
        if n == 1:
            raise Killed()

    registry = _registry(ran, die_on_second)
    with pytest.raises(Killed):
        with ScriptedModel([_batch()]) as model:
            runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry)
            await runner.run_result(TASK, RunConfig())
    (trace,) = await store.list_traces()
    result, sent = await _continue(store, _registry(ran), trace_id=trace.trace_id)
    assert history_problems(sent) == []
    results = dict(_tool_results(sent))
    assert results["c0"] == "did 0"
    assert results["c1"].startswith("execution unknown") and "not executed" not in results["c1"]
    assert results["c2"].startswith("not executed")
    stored = {m.tool_call_id: m for m in result.messages if m.role == "tool"}
    assert stored["c1"].metadata == {"is_error": True, "execution_unknown": True}
    assert stored["c2"].metadata == {"is_error": True, "not_executed": True}


async def _finished_batch(store) -> tuple[str, list[Message]]:
    with ScriptedModel([_batch(), "done"]) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=_registry([]))
        result = await runner.run_result(TASK, RunConfig())
    path = await store.get_main_path_messages(result.trace.trace_id, result.trace.head_sequence)
    return result.trace.trace_id, path


@pytest.mark.parametrize("after", ["assistant", "first result"])
async def test_a_rewind_into_a_batch_closes_it(after):
    store = InMemoryTraceStore()
    trace_id, path = await _finished_batch(store)
    assistant = next(m for m in path if m.role == "assistant" and m.tool_calls)
    sequence = assistant.sequence if after == "assistant" else next(m for m in path if m.tool_call_id == "c0").sequence
    _, sent = await _continue(store, _registry([]), trace_id=trace_id, after_sequence=sequence)
    assert history_problems(sent) == []
    results = _tool_results(sent)
    assert [r[0] for r in results] == ["c0", "c1", "c2"]
    # The calls had run (their results are off the new path): their outcome is unknown, not "not run".
    assert all("not executed" not in content for _, content in results)


async def test_a_side_branch_from_a_cut_batch_is_closed_on_the_branch():
    store, holder = InMemoryTraceStore(), {}

    def stop_now(n: int) -> None:
        (trace_id,) = holder["runner"].running()
        holder["runner"].stop(trace_id)

    with ScriptedModel([_batch(2)]) as model:
        holder["runner"] = runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=_registry([], stop_now))
        first = await runner.run_result(TASK, RunConfig())
    _, sent = await _continue(store, _registry([]), trace_id=first.trace.trace_id, side_branch="reflection")
    assert history_problems(sent) == []
    trace = await store.get_trace(first.trace.trace_id)
    main = await store.get_main_path_messages(trace.trace_id, trace.head_sequence)
    assert main[-1].tool_call_id == "c0"  # the main path is untouched by the branch


async def test_a_gap_left_further_back_by_an_older_trace_is_closed_in_memory():
    store = InMemoryTraceStore()
    with ScriptedModel(["hello"]) as model:
        first = await AgentRunner(trace_store=store, llm_call=model).run_result(TASK, RunConfig())
    trace_id, head = first.trace.trace_id, first.trace.head_sequence
    # An old runner left: assistant(c0, c1) → result of c1 only → result of c1 again → user message.
    calls = [ToolCall(id="c0", name="step", arguments={"n": 0}), ToolCall(id="c1", name="step", arguments={"n": 1})]
    written = [
        Message.create(trace_id=trace_id, role="assistant", content=MessageContent(tool_calls=calls)),
        Message.create(trace_id=trace_id, role="tool", tool_call_id="c1", content="did 1"),
        Message.create(trace_id=trace_id, role="tool", tool_call_id="c1", content="did 1 again"),
        Message.create(trace_id=trace_id, role="tool", tool_call_id="zz", content="orphan"),
        Message.create(trace_id=trace_id, role="user", content="and then?"),
    ]
    for message in written:
        message.parent_sequence = head
        await store.add_message(message)
        head = message.sequence
    await store.update_trace(trace_id, head_sequence=head)
    _, sent = await _continue(store, _registry([]), trace_id=trace_id)
    assert history_problems(sent) == []
    assert _tool_results(sent) == [("c0", "not executed: the run stopped before this call ran"), ("c1", "did 1")]
