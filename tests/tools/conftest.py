"""Fixtures for the tool tests: an in-memory store, one trace, and a ToolContext on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cyber_agent.tools.context import ToolContext
from cyber_agent.trace import InMemoryTraceStore, Trace


@pytest.fixture
def store() -> InMemoryTraceStore:
    return InMemoryTraceStore()


@pytest.fixture
async def trace_id(store: InMemoryTraceStore) -> str:
    return await store.create_trace(Trace.create(task="test task"))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def ctx(store: InMemoryTraceStore, trace_id: str, workspace: Path) -> ToolContext:
    return ToolContext(trace_id=trace_id, store=store, workspace=workspace, tool_call_id="call_1")
