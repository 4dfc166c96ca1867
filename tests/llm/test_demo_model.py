"""The offline demo model: a simulated latency that yields to the loop, and an honest recursive answer to an unknown task."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.demo import DemoModel
from cyber_agent.llm.demo_recursive import RECURSIVE_HELP
from cyber_agent.llm.resolve import resolve_llm
from cyber_agent.trace import InMemoryTraceStore

REPO = Path(__file__).resolve().parents[2]


def test_the_demo_model_can_wait_like_a_provider():
    resolved = resolve_llm("demo:latency=0.05")
    assert resolved.model == "demo" and resolved.llm_call.latency == 0.05

    async def race() -> bool:
        call = asyncio.ensure_future(resolved.llm_call([{"role": "user", "content": "What is 1 + 1?"}], "demo", []))
        for _ in range(5):
            await asyncio.sleep(0)  # the loop runs other work while the model "thinks"
        waiting = not call.done()
        await call
        return waiting

    assert asyncio.run(race())
    assert resolve_llm("demo").llm_call.latency == 0.0


@pytest.mark.parametrize("spec, setting", [("demo:latency=soon", "latency"), ("demo:latency=-1", "latency"),
                                           ("demo:speed=2", "speed"), ("demo:=1", "model")])
def test_bad_demo_options_are_named(spec, setting):
    with pytest.raises(ConfigurationError) as error:
        resolve_llm(spec)
    assert error.value.setting == setting


def test_a_recursive_root_says_what_it_can_do_on_an_unknown_task_and_fails_fast():
    task = "Summarize the news of today"
    config = RunConfig(model="demo", workspace=str(REPO), agent_mode="recursive",
                       root_task_anchor={"objective": task, "completion_criteria": ["a three-line summary"]})
    runner = AgentRunner(trace_store=InMemoryTraceStore())
    result = asyncio.run(runner.run_result([{"role": "user", "content": task}], config))
    assert result.status == "failed"
    assert "the offline demo model does not know this task" in result.reason
    answers = [m.content.text for m in result.messages if m.role == "assistant" and m.content and m.content.text]
    assert answers and all(a == RECURSIVE_HELP for a in answers)
    assert sum(m.role == "assistant" for m in result.messages) <= 3  # one answer per root attempt, no pipeline


def test_the_demo_model_can_be_priced_as_a_named_model():
    from cyber_agent.llm.pricing import PRICE_TABLE

    priced = resolve_llm("demo:price_as=gpt-4o-mini,latency=0").llm_call
    messages = [{"role": "user", "content": "What is 1 + 1?"}]
    reply = asyncio.run(priced(messages, "demo", []))
    price = PRICE_TABLE["gpt-4o-mini"]
    expected = (reply.usage.prompt_tokens * price.input + reply.usage.completion_tokens * price.output) / 1e6
    assert reply.cost == pytest.approx(expected) and reply.cost > 0 and reply.cost_estimated
    free = asyncio.run(resolve_llm("demo").llm_call(messages, "demo", []))
    assert free.cost == 0.0 and not free.cost_estimated
    with pytest.raises(ConfigurationError) as error:
        resolve_llm("demo:price_as=no-such-model")
    assert error.value.setting == "price_as"


async def test_a_big_request_is_decided_off_the_event_loop():
    """`cyber-agent serve` runs the demo on its event loop: a 40 KB task must not hold it (bench/demo_scaling.py times it)."""
    model = DemoModel()
    call = asyncio.ensure_future(model([{"role": "user", "content": "a" * 40_000}], "demo", []))
    await asyncio.sleep(0)  # the call started; had it decided on the loop, it would be done by now
    assert not call.done()
    reply = await call
    assert reply.content  # an honest "I cannot do that" answer, decided in a worker thread
