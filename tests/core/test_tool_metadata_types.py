"""A tool's own metadata under a typed key's name with another type never fails the run (issue 27, item 3)."""

from __future__ import annotations

import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.tools.registry import ToolRegistry, ToolResult
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.message_metadata import UNTYPED_KEY, tool_metadata


def test_tool_metadata_moves_only_the_refused_keys_under_untyped() -> None:
    with pytest.warns(RuntimeWarning, match="truncated"):
        meta = tool_metadata({"is_error": False, "truncated": "partly", "exit_code": 3})
    assert meta.is_error is False and meta.truncated is None
    assert meta[UNTYPED_KEY] == {"truncated": "partly"} and meta["exit_code"] == 3
    assert tool_metadata({"truncated": True, "exit_code": 3}).truncated is True  # a fitting value stays typed


async def test_a_run_whose_tool_gives_a_typed_key_another_type_completes() -> None:
    registry = ToolRegistry()

    def probe() -> ToolResult:
        """Report with a metadata key of its own choosing."""
        return ToolResult(content="done", metadata={"truncated": "partly", "model": {"name": "x"}, "rows": 4})

    registry.register(probe)
    store = InMemoryTraceStore()
    replies = [ScriptedModel.tool_calls(("probe", {}, "c1")), ScriptedModel.text("finished")]
    with ScriptedModel(replies) as model, pytest.warns(RuntimeWarning, match="model, truncated"):
        runner = AgentRunner(trace_store=store, llm_call=model, tool_registry=registry)
        result = await runner.run_result([{"role": "user", "content": "Probe once, then say finished."}], RunConfig())
    assert result.status == "completed"
    (tool,) = [m for m in await store.get_trace_messages(result.trace.trace_id) if m.role == "tool"]
    assert tool.metadata[UNTYPED_KEY] == {"model": {"name": "x"}, "truncated": "partly"}
    assert tool.metadata["rows"] == 4 and tool.metadata.is_error is False


async def test_a_task_given_as_a_bare_string_is_named_with_the_fix() -> None:
    from cyber_agent.errors import ConfigurationError

    with ScriptedModel([]) as model:
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=model, tool_registry=ToolRegistry())
        with pytest.raises(ConfigurationError, match=r"messages.*got str.*\[\{'role': 'user'"):
            await runner.run_result("a task", RunConfig())  # type: ignore[arg-type]
