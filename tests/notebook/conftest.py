"""Fixtures for the notebook helpers: a finished legacy demo tree in a file store, synthetic trees."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cyber_agent.cli import DEMO_TASK
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.trace import FileSystemTraceStore, Goal, InMemoryTraceStore, Message, Trace

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A FileSystemTraceStore directory holding one finished legacy demo run; (path, root id)."""
    path = tmp_path_factory.mktemp("demo-store")

    async def run() -> str:
        runner = AgentRunner(trace_store=FileSystemTraceStore(path))
        config = RunConfig(model="demo", workspace=str(REPO))
        result = await runner.run_result([{"role": "user", "content": DEMO_TASK}], config)
        assert result.status == "completed", result.trace.error_message
        return result.trace.trace_id

    return path, asyncio.run(run())


@pytest.fixture
def demo_store(demo_dir: tuple[Path, str]) -> FileSystemTraceStore:
    return FileSystemTraceStore(demo_dir[0])


@pytest.fixture
def demo_root(demo_dir: tuple[Path, str]) -> str:
    return demo_dir[1]


async def add_trace(store: InMemoryTraceStore, trace_id: str, *, parent: str | None = None, status: str = "completed",
                    agent_type: str = "main", context: dict[str, Any] | None = None, messages: int = 2) -> str:
    """Create a trace with a root goal and `messages` alternating assistant/tool messages."""
    await store.create_trace(Trace.create(trace_id=trace_id, task=f"task of {trace_id}", parent_trace_id=parent,
                                          agent_type=agent_type, context=context or {}))
    await store.add_goal(trace_id, Goal(id="1", description=f"goal of {trace_id}"))
    for i in range(messages):
        if i % 2 == 0:
            message = Message.create(trace_id=trace_id, role="assistant", goal_id="1", prompt_tokens=10, completion_tokens=5,
                                     cost=0.001, content={"text": None, "tool_calls": [
                                         {"id": f"c{i}", "name": "read_file", "arguments": {"path": "a.txt"}}]})
        else:
            message = Message.create(trace_id=trace_id, role="tool", goal_id="1", tool_call_id=f"c{i - 1}",
                                     tool_name="read_file", content="hello", metadata={"is_error": False})
        await store.add_message(message)
    await store.update_trace(trace_id, status=status)
    return trace_id


ROOT = "11111111-2222-4333-8444-555555555555"
CHILD = f"{ROOT}@delegate-20261129120000-001"
VALIDATOR = f"{CHILD}@validator-20261129120001-001"


@pytest.fixture
def recursive_store() -> tuple[InMemoryTraceStore, str]:
    """A synthetic recursive tree: root → child → validator, with budget, usage and protocol records."""
    store = InMemoryTraceStore()
    budget = {"enabled": True, "max_total_agents": 10, "max_llm_calls": 20, "max_total_tokens": 1000,
              "max_total_cost_usd": 1.0, "max_duration_seconds": 600.0, "max_validation_tool_calls": 30,
              "max_validation_material_chars": 5000, "reserved_final_calls": 2}
    protocol_child = {
        "brief": {"objective": "Sum region East", "completion_criteria": ["states the total", "names the rows used"]},
        "report": {"outcome": "completed", "summary": "East is 152.00", "outputs": ["152.00"],
                   "evidence": ["rows 1, 13, 22"], "open_issues": []},
        "validations": [{"scope": "criteria", "verdict": "fail", "target_trace_id": CHILD, "validator_trace_id": VALIDATOR,
                         "criteria": [{"criterion": "states the total", "verdict": "pass", "evidence": "152.00 in report"},
                                      {"criterion": "names the rows used", "verdict": "fail", "evidence": "rows not listed"}]}],
    }
    protocol_root = {"reviews": [{"child_trace_id": CHILD, "decision": "revise", "feedback": "list the rows"}]}

    async def build() -> None:
        await add_trace(store, ROOT, status="running", context={
            "agent_mode": "recursive", "agent_depth": 0, "root_trace_id": ROOT, "resource_budget": budget,
            "task_protocol": protocol_root})
        await add_trace(store, CHILD, parent=ROOT, agent_type="delegate", context={
            "agent_mode": "recursive", "agent_depth": 1, "root_trace_id": ROOT, "created_by_tool": "agent",
            "task_protocol": protocol_child})
        await add_trace(store, VALIDATOR, parent=CHILD, agent_type="validator", context={
            "agent_mode": "recursive", "agent_depth": 2, "root_trace_id": ROOT, "created_by_tool": "validator",
            "validation_scope": "criteria"})
        await store.replace_resource_usage(ROOT, {
            "agents": 2, "llm_calls": 19, "root_validator_calls": 0, "prompt_tokens": 600, "completion_tokens": 300,
            "total_tokens": 900, "cost_usd": 0.25, "validation_tool_calls": 3, "validation_material_chars": 1200,
            "started_at": "2026-11-29T12:00:00Z", "updated_at": "2026-11-29T12:01:40Z",
            "last_refusal": "llm_calls: used 18 of 18", "refusals": 1})

    asyncio.run(build())
    return store, ROOT
