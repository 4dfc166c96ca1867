"""The context guard trusts the provider's reported prompt tokens over chars/4 (CJK text is ~1 token a char)."""

from __future__ import annotations

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.llm.types import Usage
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore

CJK = "漢字の文章です。" * 375  # 3,000 characters: ~750 tokens by chars/4, ~3,000 as a provider counts them


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    def read(n: int) -> str:
        """Read page n."""
        return CJK

    registry.register(read)
    return registry


async def test_reported_prompt_tokens_over_the_window_trigger_compaction():
    # The provider reports what it counted: 3,000 tokens more per page read, 15k at the last call.
    replies = [ScriptedModel.tool_call("read", {"n": i}, call_id=f"c{i}",
                                       usage=Usage(prompt_tokens=200 + 3_000 * i, completion_tokens=10))
               for i in range(5)]
    replies.append(ScriptedModel.text("done", usage=Usage(prompt_tokens=15_200, completion_tokens=5)))
    store = InMemoryTraceStore()
    with ScriptedModel(replies) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=_registry())
        result = await runner.run_result([{"role": "user", "content": "要約して"}], RunConfig(context_window=8_000))
    assert result.status == "completed"
    compactions = [e for e in await store.get_events(result.trace.trace_id) if e.type == "compaction"]
    assert compactions, "the provider reported more tokens than the window allows, yet nothing was compacted"
    # The history sent after the compaction no longer carries every page in full.
    last = model.requests[-1].messages
    assert sum(1 for m in last if m["role"] == "tool" and m["content"] == CJK) < 5


async def test_without_reported_usage_the_estimate_still_decides():
    replies = [ScriptedModel.tool_call("read", {"n": i}, call_id=f"c{i}", usage=Usage()) for i in range(3)]
    replies.append(ScriptedModel.text("done", usage=Usage()))
    store = InMemoryTraceStore()
    with ScriptedModel(replies) as model:
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=_registry())
        result = await runner.run_result([{"role": "user", "content": "要約して"}], RunConfig(context_window=8_000))
    assert result.status == "completed"
    assert not [e for e in await store.get_events(result.trace.trace_id) if e.type == "compaction"]
