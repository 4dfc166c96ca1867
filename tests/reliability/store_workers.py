"""Worker processes for the multi-process store tests (run as `python store_workers.py KIND ...`).

Each worker opens the store by URL, does its part and prints one JSON line per acknowledged step,
so the test knows exactly what was promised before any kill.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from cyber_agent.core.resource_budget import ResourceBudgetController
from cyber_agent.errors import BudgetExceededError
from cyber_agent.trace import Message, open_store
from cyber_agent.trace.budget_limits import ResourceBudget


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


async def append(url: str, trace_id: str, worker: str, count: str) -> None:
    """Append `count` messages to one shared trace."""
    store = open_store(url)
    for i in range(int(count)):
        message = Message.create(trace_id=trace_id, role="user", content=f"{worker}:{i}", prompt_tokens=1)
        await store.add_message(message)
        say(id=message.message_id, content=message.content, at=time.time())


async def append_held(url: str, trace_id: str, worker: str, count: str, hold: str, point: str, folder: str) -> None:
    """Append like `append`, but stop inside write number `hold` at the fault point `point`
    (`postgres_store.py:FAULT_POINTS`): print `{"held": point}` and wait until `folder/release` exists."""
    from pathlib import Path

    store = open_store(url)
    release, state = Path(folder) / "release", {"index": -1, "held": False}

    def hook(at: str) -> None:
        if at == point and state["index"] == int(hold) and not state["held"]:
            state["held"] = True
            say(held=point, index=state["index"])
            while not release.exists():  # the test crashes the server meanwhile, then creates the file
                time.sleep(0.01)

    store.fault_hook = hook  # type: ignore[attr-defined]
    for i in range(int(count)):
        state["index"] = i
        message = Message.create(trace_id=trace_id, role="user", content=f"{worker}:{i}", prompt_tokens=1)
        await store.add_message(message)
        say(id=message.message_id, content=message.content, at=time.time())


async def budget(url: str, root_id: str, worker: str, rounds: str) -> None:
    """Race for agents, calls and tokens of one root's budget; report every grant."""
    store = open_store(url)
    limits = ResourceBudget(max_total_agents=20, max_llm_calls=61, reserved_final_calls=1, max_total_tokens=10**9)
    controller = ResourceBudgetController(store=store, root_trace_id=root_id, budget=limits, lock=asyncio.Lock())
    for _ in range(int(rounds)):
        for name, step in (("agents", controller.reserve_agents(2)), ("llm_calls", controller.reserve_llm_call())):
            try:
                await step
                say(granted=name, at=time.time())
            except BudgetExceededError:
                say(refused=name, at=time.time())
        await controller.book_llm_usage(prompt_tokens=3, completion_tokens=2, cost_usd=0.0)
        say(booked=5)


async def _until_stopped(store: Any, limit: float = 120.0) -> None:
    """Wait until a stop of the tree's root is persisted (the stop then meets the run at a known point,
    whatever the machine's load: no call races the test's write)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        roots = [t.trace_id for t in await store.list_traces(limit=None) if t.parent_trace_id is None]
        if roots and await store.get_stop_requests(roots):
            return
        await asyncio.sleep(0.02)


async def busy_tree(url: str) -> None:
    """Run a legacy root whose sub-agent calls a tool forever, until a stop arrives (from anywhere)."""
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.llm.fakes import FunctionModel
    from cyber_agent.llm.types import LLMResponse, ToolCall
    from cyber_agent.protocol.agent_tool import register_agent_tool
    from cyber_agent.tools.registry import ToolRegistry

    store = open_store(url)
    registry = ToolRegistry()

    def peek() -> str:
        """A read-only tool."""
        return "seen"

    registry.register(peek)
    register_agent_tool(registry)
    calls = {"child": 0}

    async def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> LLMResponse:
        await asyncio.sleep(0.02)
        names = {t["function"]["name"] for t in tools or []}
        if "agent" in names:
            if not any(m["role"] == "tool" for m in messages):
                return LLMResponse(tool_calls=[ToolCall(id="a", name="agent", arguments={"task": "keep busy"})])
            return LLMResponse(content="parent done")
        calls["child"] += 1
        say(child_call=calls["child"])
        if calls["child"] == 3:  # the test stops the tree now: hold this call until the stop is in the store
            await _until_stopped(store)
        return LLMResponse(tool_calls=[ToolCall(id=f"p{calls['child']}", name="peek", arguments={})])

    runner = AgentRunner(trace_store=store, llm_call=FunctionModel(model), tool_registry=registry)
    result = await runner.run_result([{"role": "user", "content": "keep busy"}],
                                     RunConfig(agent_mode="legacy", max_iterations=100_000))
    say(done=result.status, root=result.trace.trace_id, error=result.trace.error_message)


if __name__ == "__main__":
    kind, *args = sys.argv[1:]
    asyncio.run({"append": append, "append_held": append_held, "budget": budget, "busy_tree": busy_tree}[kind](*args))
