"""Usage a provider or a custom `LLMCall` reports is validated before anything books it, and any reply is priced.

Before the provider boundary: negative counts were booked (refunding budgets), NaN / Infinity
raised out of `run_result`, 10**30 raised OverflowError from the SQLite store, and a custom
`LLMCall` returning usage without a cost was booked at $0 for a priced model.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.hooks import UsdBudgetHook
from cyber_agent.core.resource_budget import ResourceBudget, ResourceBudgetController
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm import LLMResponse, ToolCall, Usage
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore, Message, Trace
from cyber_agent.trace.sqlite_store import SQLiteTraceStore
from cyber_agent.trace.store_base import BaseTraceStore
from tests import pg_server
from tests.hostile.hostile_servers import FORMATS, Format, HostileServer, json_head

USER = [{"role": "user", "content": "hi"}]
BAD = {"negative": -1_000_000, "nan": math.nan, "infinite": math.inf, "absurd": 10**30}


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def _postgres(directory: Path) -> BaseTraceStore:
    from cyber_agent.trace.postgres_store import PostgresTraceStore

    return PostgresTraceStore(pg_server.server().schema_url(pg_server.schema_for(str(directory))))


STORES: dict[str, Callable[[Path], BaseTraceStore]] = {
    "memory": lambda _d: InMemoryTraceStore(),
    "file": lambda d: FileSystemTraceStore(d / "traces"),
    "sqlite": lambda d: SQLiteTraceStore(d / "runs.db"),
}
if pg_server.available() or pg_server.required():  # CI requires it: a missing server fails, never skips
    STORES["postgres"] = _postgres


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("bad", sorted(BAD))
async def test_unbookable_usage_from_a_server_books_the_estimate(fmt: Format, bad: str):
    body = json.dumps(fmt.body("four score and seven years", fmt.usage(BAD[bad], 5))).encode()

    async def behaviour(_attempt: int, writer: asyncio.StreamWriter) -> None:
        writer.write(json_head(200, len(body)) + body)
        await writer.drain()

    async with HostileServer(behaviour) as server:
        reply = await fmt.model(server, retries=0)(USER, "gpt-4o")
    usage = reply.usage
    assert usage.invalid is not None and "booked the estimate instead" in usage.invalid
    assert not usage.reported and usage.prompt_tokens == 1 and usage.completion_tokens == len("four score and seven years") // 4
    assert math.isfinite(reply.cost) and reply.cost > 0 and reply.cost_estimated  # priced from the estimate


class _Custom:
    """A custom LLMCall: a tool call with `usage` first, then a final answer with the same usage."""

    def __init__(self, usage: Any, *, model: str = "gpt-4o", as_dict: bool = False) -> None:
        self.usage, self.model, self.as_dict, self.calls = usage, model, as_dict, 0

    async def __call__(self, messages, model, tools=None, temperature=None, *, on_delta=None):  # noqa: ANN001
        self.calls += 1
        calls = [ToolCall(id=f"c{self.calls}", name="nothing_here", arguments={})] if self.calls == 1 else []
        if self.as_dict:
            return {"content": "done" if not calls else "", "tool_calls": calls, **self.usage}
        return LLMResponse(content="done" if not calls else "", tool_calls=calls, usage=self.usage, model=self.model)


@pytest.mark.parametrize("store_kind", sorted(STORES))
@pytest.mark.parametrize("bad", sorted(BAD))
async def test_unbookable_usage_never_crashes_a_run_or_a_store(store_kind: str, bad: str, tmp_path: Path):
    value = BAD[bad]
    # NaN and Infinity cannot be an int field of Usage: they arrive through the legacy dict form.
    llm = (_Custom({"prompt_tokens": value, "completion_tokens": 3}, as_dict=True) if isinstance(value, float)
           else _Custom(Usage(prompt_tokens=value, completion_tokens=3)))
    store = STORES[store_kind](tmp_path)
    result = await AgentRunner(trace_store=store, llm_call=llm).run_result(USER, RunConfig(model="gpt-4o"))
    assert result.status == "completed" and result.answer == "done"
    trace_id = result.trace.trace_id
    reread = STORES[store_kind](tmp_path) if store_kind != "memory" else store
    assistants = [m for m in await reread.get_trace_messages(trace_id) if m.role == "assistant"]
    assert len(assistants) == 2
    for message in assistants:
        assert "booked the estimate instead" in message.metadata["usage_invalid"] and message.metadata["usage_estimated"]
        assert 0 < message.prompt_tokens < 1000 and message.cost >= 0
    events = [e for e in await reread.get_events(trace_id) if e.type == "usage_invalid"]
    assert len(events) == 2 and events[0].payload["prompt_tokens"] == assistants[0].prompt_tokens
    trace = await reread.get_trace(trace_id)
    assert trace is not None and 0 < trace.total_prompt_tokens < 2000 and math.isfinite(trace.total_cost)


@pytest.mark.parametrize("store_kind", sorted(STORES))
async def test_a_store_stores_any_usage_that_reaches_it(store_kind: str, tmp_path: Path):
    store = STORES[store_kind](tmp_path)
    trace = Trace.create(task="t")
    await store.create_trace(trace)
    await store.add_message(Message.create(trace_id=trace.trace_id, role="assistant", content="x",
                                           prompt_tokens=10**30, completion_tokens=-5, cost=math.inf))
    [message] = await store.get_trace_messages(trace.trace_id)
    assert (message.prompt_tokens, message.completion_tokens, message.cost) == (0, 0, 0)
    assert "prompt_tokens=" in message.metadata["usage_invalid"] and "cost=inf" in message.metadata["usage_invalid"]


async def test_a_tree_budget_never_decreases():
    store = InMemoryTraceStore()
    root = Trace.create(task="t")
    await store.create_trace(root)
    controller = ResourceBudgetController(store=store, root_trace_id=root.trace_id, budget=ResourceBudget(),
                                          lock=asyncio.Lock())
    await controller.initialize()
    await controller.book_llm_usage(prompt_tokens=100, completion_tokens=10, cost_usd=0.5)
    await controller.book_llm_usage(prompt_tokens=-10**9, completion_tokens=-10**9, cost_usd=-1e9)
    await controller.book_llm_usage(prompt_tokens=0, completion_tokens=0, cost_usd=math.nan)
    usage = await controller.usage()
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cost_usd) == (100, 10, 0.5)
    assert usage.unpriced_calls == 1  # a non-finite charge fails the USD limit closed


async def test_a_custom_llm_call_without_a_cost_is_priced_or_flagged_and_stopped_by_the_usd_hook():
    llm = _Custom(Usage(prompt_tokens=600_000, completion_tokens=3_000))
    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=llm, stop_hooks=[UsdBudgetHook(0.10)])
    result = await runner.run_result(USER, RunConfig(model="gpt-4o"))
    [first] = [m for m in result.messages if m.role == "assistant"]
    assert first.cost == pytest.approx((600_000 * 2.50 + 3_000 * 10.00) / 1e6) and first.metadata["cost_estimated"]
    assert result.status == "stopped" and "usd_budget" in (result.trace.error_message or "")
    assert llm.calls == 1
    # A model the table lacks stays at $0 and is flagged unpriced: the USD hook fails closed.
    unknown = _Custom(Usage(prompt_tokens=600, completion_tokens=30), model="house-model-7")
    runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=unknown, stop_hooks=[UsdBudgetHook(0.10)])
    result = await runner.run_result(USER, RunConfig(model="house-model-7"))
    [first] = [m for m in result.messages if m.role == "assistant"]
    assert first.metadata.get("cost_unpriced") is True and first.cost == 0
    assert result.status == "stopped" and unknown.calls == 1
