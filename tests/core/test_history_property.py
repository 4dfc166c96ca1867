"""Property: whatever cuts a batch of N tool calls (stop, interrupt, kill, cancellation, at any
call), continuing the trace — and rewinding it to any message of its main path — sends a
history that passes the OpenAI and the Anthropic history rules (`tests/core/history_rules.py`)."""

from __future__ import annotations

import asyncio
import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore
from tests.core.history_rules import history_problems

TASK = [{"role": "user", "content": "work"}]
CUTS = ("stop", "interrupt", "kill", "cancel", "stop_during_model_call")


class Killed(BaseException):
    """Stands for the process dying mid-tool."""


def _registry(cut: str | None, at: int, runner_ref: dict[str, AgentRunner]) -> ToolRegistry:
    registry = ToolRegistry()

    def step(n: int) -> str:
        """Do step n."""
        if cut is not None and n == at:
            runner = runner_ref["runner"]
            (trace_id,) = runner.running()
            if cut == "stop":
                runner.stop(trace_id, "stop")
            elif cut == "interrupt":
                runner.interrupt(trace_id, "interrupt")
            elif cut == "kill":
                raise Killed()
            elif cut == "cancel":
                raise asyncio.CancelledError()
        return f"did {n}"

    registry.register(step)
    return registry


async def _scenario(n: int, cut: str, at: int, rewind: int | None, earlier_turn: bool) -> list[str]:
    store, ref = InMemoryTraceStore(), {}
    batch = ScriptedModel.tool_calls(*[("step", {"n": i}, f"c{i}") for i in range(n)])
    replies = ([ScriptedModel.tool_call("step", {"n": 99}, call_id="warm")] if earlier_turn else []) + [batch]
    if cut == "stop_during_model_call":
        replies_iter = iter(replies)

        async def model(messages, model_name, tools=None, temperature=None, **_):
            reply = next(replies_iter)
            if reply is batch:
                (trace_id,) = ref["runner"].running()
                ref["runner"].stop(trace_id, "stop")
            return reply
        llm, registry = model, _registry(None, at, ref)
    else:
        llm, registry = ScriptedModel(replies), _registry(cut, at, ref)
    ref["runner"] = AgentRunner(trace_store=store, llm_call=llm, tool_registry=registry)
    with contextlib.suppress(Killed, asyncio.CancelledError):
        await ref["runner"].run_result(TASK, RunConfig())
    (trace,) = await store.list_traces()
    config = RunConfig(trace_id=trace.trace_id)
    if rewind is not None:
        path = await store.get_main_path_messages(trace.trace_id, trace.head_sequence)
        config = RunConfig(trace_id=trace.trace_id, after_sequence=path[rewind % len(path)].sequence)
    follow_up = ScriptedModel(["resumed"])
    runner = AgentRunner(trace_store=store, llm_call=follow_up, tool_registry=_registry(None, at, ref))
    await runner.run_result([{"role": "user", "content": "go on"}], config)
    problems = history_problems(follow_up.requests[0].messages)
    # Continuing again from the closed trace stays valid too (the closing results were persisted).
    again = ScriptedModel(["again"])
    await AgentRunner(trace_store=store, llm_call=again, tool_registry=registry).run_result(
        [{"role": "user", "content": "more"}], RunConfig(trace_id=trace.trace_id))
    return problems + history_problems(again.requests[0].messages)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5), cut=st.sampled_from(CUTS), data=st.data(),
       rewind=st.one_of(st.none(), st.integers(0, 30)), earlier_turn=st.booleans())
def test_any_cut_of_a_batch_then_continuing_sends_a_valid_history(n, cut, data, rewind, earlier_turn):
    at = data.draw(st.integers(0, n - 1), label="cut at call")
    assert asyncio.run(_scenario(n, cut, at, rewind, earlier_turn)) == []
