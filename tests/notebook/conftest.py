"""Fixtures for the notebook helpers: a finished legacy demo tree in a file store, synthetic trees."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cyber_agent.cli import DEMO_TASK
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore
from nb_helpers import CHILD, REPO, ROOT, VALIDATOR, add_trace



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
