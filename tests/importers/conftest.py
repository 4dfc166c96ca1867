"""Fixtures of the importer tests: a finished recursive demo tree to export and import again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.trace import InMemoryTraceStore

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo_store() -> tuple[InMemoryTraceStore, str]:
    """A memory store holding one finished recursive demo tree, and its root id."""
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner

    store = InMemoryTraceStore()

    async def run() -> str:
        runner = AgentRunner(trace_store=store, workspace=REPO)
        config = RunConfig(model="demo", workspace=str(REPO), agent_mode="recursive", root_task_anchor=DEMO_ANCHOR)
        result = await runner.run_result([{"role": "user", "content": DEMO_TASK}], config)
        await runner.drain_hooks()
        return result.trace.trace_id

    return store, asyncio.run(run())
