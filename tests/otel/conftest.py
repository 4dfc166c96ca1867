"""Fixtures for the OTel export: finished demo trees (legacy and recursive) and a span index."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.protocols import TraceStore

REPO = Path(__file__).resolve().parents[2]


async def run_demo(store: TraceStore, mode: str, **runner_options: object) -> str:
    """Run the offline demo in `mode` on `store`; return the root id."""
    runner = AgentRunner(trace_store=store, workspace=REPO, **runner_options)  # type: ignore[arg-type]
    config = RunConfig(model="demo", workspace=str(REPO), agent_mode=mode,  # type: ignore[arg-type]
                       root_task_anchor=DEMO_ANCHOR if mode == "recursive" else None)
    result = await runner.run_result([{"role": "user", "content": DEMO_TASK}], config)
    assert result.trace.status == "completed", result.trace.error_message
    await runner.drain_hooks()
    return result.trace.trace_id


def _demo_tree(mode: str) -> tuple[InMemoryTraceStore, str]:
    # Its own thread and loop: the fixture may be requested from inside an async test's loop.
    store = InMemoryTraceStore()
    with ThreadPoolExecutor(1) as pool:
        return store, pool.submit(asyncio.run, run_demo(store, mode)).result()


@pytest.fixture(scope="session")
def legacy_tree() -> tuple[InMemoryTraceStore, str]:
    return _demo_tree("legacy")


@pytest.fixture(scope="session")
def recursive_tree() -> tuple[InMemoryTraceStore, str]:
    return _demo_tree("recursive")


@dataclass
class SpanIndex:
    """Spans by id, with parent and children lookups."""

    spans: list[ReadableSpan]

    def __post_init__(self) -> None:
        self.by_id = {span.context.span_id: span for span in self.spans}

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        return self.by_id.get(span.parent.span_id) if span.parent is not None else None

    def children(self, span: ReadableSpan) -> list[ReadableSpan]:
        return [s for s in self.spans if s.parent is not None and s.parent.span_id == span.context.span_id]

    def agent(self, trace_id: str) -> ReadableSpan:
        return next(s for s in self.spans if s.attributes.get("gen_ai.agent.id") == trace_id)

    def of_operation(self, operation: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.attributes.get("gen_ai.operation.name") == operation]
