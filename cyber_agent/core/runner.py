"""AgentRunner: turn a task into a persisted, tool-using LLM run (SPEC H1, H2, T3, A12).

The loop lives here; tool dispatch is in `core/dispatch.py`, prompt assembly in
`core/prompt.py`, trace preparation in `core/trace_setup.py`. Per-step work is constant: the
history is loaded from the store once per run and then only appended to.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cyber_agent.core.config import RunConfig
from cyber_agent.core.dispatch import run_tool_call
from cyber_agent.core.stop import StopRegistry
from cyber_agent.core.trace_setup import PreparedRun, prepare_run
from cyber_agent.errors import CyberAgentError
from cyber_agent.llm.types import LLMCall, LLMResponse
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.models import Message, MessageContent, Trace
from cyber_agent.trace.protocols import TraceStore

__all__ = ["AgentRunner", "RunResult", "default_registry"]

RunEvent = Trace | Message


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """What a finished run produced."""

    trace: Trace
    """The trace as persisted at the end of the run."""
    answer: str | None
    """Final answer text (None when the run did not complete)."""
    messages: list[Message] = field(default_factory=list)
    """Messages persisted by this run, in order."""

    @property
    def status(self) -> str:
        """Final status of the trace."""
        return self.trace.status


def default_registry() -> ToolRegistry:
    """Return the built-in tools plus `agent`: what a runner uses when given no registry."""
    from cyber_agent.tools.builtin import builtin_registry
    from cyber_agent.tools.builtin.subagent import register_agent_tool

    return register_agent_tool(builtin_registry())


class AgentRunner:
    """Run agents against a store, a model and a tool registry."""

    def __init__(
        self,
        *,
        trace_store: TraceStore,
        llm_call: LLMCall | None = None,
        tool_registry: ToolRegistry | None = None,
        workspace: str | Path | None = None,
        stop_registry: StopRegistry | None = None,
    ) -> None:
        self.trace_store = trace_store
        self.llm_call = llm_call
        if tool_registry is None:
            tool_registry = default_registry()
        self.tool_registry = tool_registry
        self.workspace = Path(workspace) if workspace is not None else None
        self.stops = stop_registry or StopRegistry()

    # ---- public API ---------------------------------------------------------------------
    async def run(self, messages: Sequence[dict[str, Any]] = (), config: RunConfig | None = None) -> AsyncIterator[RunEvent]:
        """Run (or continue) a trace, yielding the Trace at start and end and every new Message."""
        config = config or RunConfig()
        llm, model = self._resolve_llm(config)
        prepared = await prepare_run(self, list(messages), config)
        trace_id = prepared.trace.trace_id
        self.stops.register(trace_id, parent_id=config.parent_trace_id, propagate=prepared.propagate_stop)
        try:
            yield prepared.trace
            for message in prepared.new_messages:
                yield message
            async for event in self._loop(prepared, config, llm, model):
                yield event
        except asyncio.CancelledError:
            await self._finish(prepared, "stopped", error="run cancelled")
            raise
        finally:
            self.stops.unregister(trace_id)

    async def run_result(self, messages: Sequence[dict[str, Any]] = (), config: RunConfig | None = None) -> RunResult:
        """Run to the end and return the final trace, answer and new messages."""
        trace: Trace | None = None
        new: list[Message] = []
        async for event in self.run(messages, config):
            if isinstance(event, Trace):
                trace = event
            else:
                new.append(event)
        assert trace is not None
        answer = trace.result_summary if trace.status == "completed" else None
        return RunResult(trace=trace, answer=answer, messages=new)

    def stop(self, trace_id: str, reason: str = "stop requested") -> list[str]:
        """Ask a running trace (and, in recursive mode, its subtree) to stop; return flagged ids."""
        return self.stops.request_stop(trace_id, reason)

    request_stop = stop

    def running(self) -> list[str]:
        """Ids of traces running in this process."""
        return self.stops.active()

    # ---- internals ----------------------------------------------------------------------
    def _resolve_llm(self, config: RunConfig) -> tuple[LLMCall, str]:
        if self.llm_call is not None:
            return self.llm_call, config.model
        from cyber_agent.llm.resolve import resolve_llm

        resolved = resolve_llm(config.model)
        return resolved.llm_call, resolved.model

    def _get_runtime_tool_names(self, config: RunConfig, trace: Trace) -> frozenset[str]:
        """Tools this run may see and call: requested ∩ registered (policy narrows further)."""
        registered = set(self.tool_registry.names())
        requested = registered if config.tools is None else set(config.tools)
        return frozenset(requested & registered)

    def _tool_context(self, prepared: PreparedRun, config: RunConfig, call_id: str) -> ToolContext:
        workspace = Path(config.workspace) if config.workspace else (self.workspace or Path.cwd())
        return ToolContext(
            trace_id=prepared.trace.trace_id,
            store=self.trace_store,
            goal_id=prepared.goal_id,
            tool_call_id=call_id,
            workspace=workspace,
            allowed_tools=prepared.allowed,
            runner=self,
            run_config=config,
            extra={"agent_depth": prepared.depth, "agent_mode": prepared.mode},
        )

    async def _persist(self, prepared: PreparedRun, message: Message) -> Message:
        await self.trace_store.add_message(message)
        prepared.head = message.sequence
        prepared.history.append(message.to_llm_message())
        return message

    async def _loop(self, prepared: PreparedRun, config: RunConfig, llm: LLMCall, model: str) -> AsyncIterator[RunEvent]:
        trace_id = prepared.trace.trace_id
        schemas = self.tool_registry.schemas(sorted(prepared.allowed)) if prepared.allowed else None
        for _ in range(config.max_iterations):
            if self.stops.is_stopped(trace_id):
                yield await self._finish(prepared, "stopped", error=self.stops.stop_reason(trace_id))
                return
            started = time.perf_counter()
            try:
                raw = await llm(prepared.history, model, schemas, config.temperature)
                response = LLMResponse.coerce(raw)
            except CyberAgentError as exc:
                yield await self._finish(prepared, "failed", error=f"model call failed: {exc}")
                return
            assistant = Message.create(
                trace_id=trace_id, role="assistant", goal_id=prepared.goal_id,
                content=MessageContent(text=response.content or None, tool_calls=response.tool_calls),
                parent_sequence=prepared.head or None,
                prompt_tokens=response.usage.prompt_tokens, completion_tokens=response.usage.completion_tokens,
                cached_tokens=response.usage.cached_tokens, cost=response.cost,
                duration_ms=(time.perf_counter() - started) * 1000,
                metadata={"model": response.model or model, "cost_estimated": response.cost_estimated},
            )
            yield await self._persist(prepared, assistant)
            if self.stops.is_stopped(trace_id):
                # The in-flight response is recorded; its tool calls are not executed.
                yield await self._finish(prepared, "stopped", error=self.stops.stop_reason(trace_id))
                return
            if not response.tool_calls:
                yield await self._finish(prepared, "completed", answer=response.content)
                return
            for call in response.tool_calls:
                if self.stops.is_stopped(trace_id):
                    break
                outcome = await run_tool_call(
                    call, registry=self.tool_registry, allowed=prepared.allowed,
                    context=self._tool_context(prepared, config, call.id),
                )
                tool_message = Message.create(
                    trace_id=trace_id, role="tool", goal_id=prepared.goal_id, tool_call_id=call.id,
                    tool_name=call.name, content=outcome.result.content, parent_sequence=prepared.head,
                    duration_ms=outcome.duration_ms,
                    metadata={"is_error": outcome.result.is_error, **outcome.result.metadata},
                )
                yield await self._persist(prepared, tool_message)
                if call.name == "goal":
                    refreshed = await self.trace_store.get_trace(trace_id)
                    prepared.goal_id = refreshed.current_goal_id if refreshed else prepared.goal_id
        yield await self._finish(
            prepared, "stopped", error=f"max_iterations ({config.max_iterations}) reached without a final answer"
        )

    async def _finish(self, prepared: PreparedRun, status: str, *, answer: str | None = None, error: str | None = None) -> Trace:
        store = self.trace_store
        trace_id = prepared.trace.trace_id
        updates: dict[str, Any] = {"status": status, "head_sequence": prepared.head, "current_goal_id": prepared.goal_id}
        if answer is not None:
            updates["result_summary"] = answer
        if error is not None:
            updates["error_message"] = error
        if status == "completed" and prepared.root_goal_id is not None:
            tree = await store.get_goal_tree(trace_id)
            goal = tree.find(prepared.root_goal_id) if tree else None
            if goal is not None and goal.status not in ("completed", "abandoned", "failed"):
                await store.update_goal(trace_id, goal.id, status="completed", summary=_clip((answer or "").strip().splitlines()[0] if answer and answer.strip() else ""))
        trace = await store.update_trace(trace_id, **updates)
        if status == "completed":
            await store.append_event(trace_id, "trace_completed", {"trace_id": trace_id, "total_messages": trace.total_messages})
        prepared.trace = trace
        return trace


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
