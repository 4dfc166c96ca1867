"""AgentRunner: turn a task into a persisted, tool-using LLM run (SPEC H1, H2, T3, A5–A12).

The loop lives here; tool dispatch is in `core/dispatch.py`, prompt assembly in
`core/prompt.py`, trace preparation in `core/trace_setup.py`, tool rights in
`core/tool_rights.py` and the recursive end-of-turn rules in `core/protocol_flow.py`.
Per-step work is constant: the history is loaded from the store once per run and then only
appended to.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cyber_agent.core.approvals import open_batch
from cyber_agent.core.archetypes import ArchetypeRegistry
from cyber_agent.core.config import RunConfig
from cyber_agent.core.harness import RunHarness, wrap_dialect
from cyber_agent.core.turn_tools import execute_calls, needs_approval, resume_batch, run_post_turn_hooks, stop_hook_reason
from cyber_agent.core.hooks import PostTurnHook, ProgressEvent, StopHook
from cyber_agent.core.protocol_flow import STATE_TOOLS, on_final_text
from cyber_agent.core.protocol_state import with_protocol
from cyber_agent.core.resource_budget import ResourceBudgetController
from cyber_agent.core.stop import StopRegistry
from cyber_agent.core.tool_rights import runtime_tool_names, tighten_by_state
from cyber_agent.core.trace_setup import ChildSetup, PreparedRun, effective_config, prepare_run
from cyber_agent.errors import BudgetExceededError, CyberAgentError, RunError
from cyber_agent.llm.types import LLMCall, LLMResponse
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.goal_models import FINAL_GOAL_STATUSES
from cyber_agent.trace.models import Message, MessageContent, Trace
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.state import SideBranchRecord

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

    def __repr__(self) -> str:
        # Short on purpose: asyncio builds the repr of a run's result, and a full one costs seconds on big runs.
        answer = (self.answer or "")[:60]
        return f"RunResult(trace_id={self.trace.trace_id!r}, status={self.status!r}, messages={len(self.messages)}, answer={answer!r})"


def default_registry() -> ToolRegistry:
    """Return the built-in tools plus `agent` and the recursive protocol tools."""
    from cyber_agent.tools.builtin import builtin_registry
    from cyber_agent.tools.builtin.protocol_tools import register_protocol_tools
    from cyber_agent.tools.builtin.subagent import register_agent_tool
    from cyber_agent.tools.builtin.web_tools import register_web_tools

    return register_web_tools(register_protocol_tools(register_agent_tool(builtin_registry())))


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
        validator_llm_call: LLMCall | None = None,
        stop_hooks: Sequence[StopHook] = (),
        post_turn_hooks: Sequence[PostTurnHook] = (),
        on_progress: Callable[[ProgressEvent], None] | None = None,
        archetypes: ArchetypeRegistry | None = None,
    ) -> None:
        self.trace_store = trace_store
        self.llm_call = llm_call
        self.validator_llm_call = validator_llm_call
        self.tool_registry = tool_registry if tool_registry is not None else default_registry()
        self.workspace = Path(workspace) if workspace is not None else None
        self.stops = stop_registry or StopRegistry()
        self.stop_hooks = list(stop_hooks)
        self.post_turn_hooks = list(post_turn_hooks)
        self.on_progress = on_progress
        self._budgets: dict[str, ResourceBudgetController] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._fences: dict[str, str] = {}
        self._providers: dict[int, str] = {}
        self._archetypes = archetypes
        self._workspace_archetypes: dict[Path, ArchetypeRegistry] = {}
        self._explicit_archetypes = archetypes is not None

    @property
    def archetypes(self) -> ArchetypeRegistry:
        """Agent archetypes: built-ins plus the workspace's `.cyber_agent/agents/` (loaded on first use)."""
        if self._archetypes is None:
            self._archetypes = ArchetypeRegistry.load(self.workspace)
        return self._archetypes

    def archetypes_for(self, workspace: str | Path | None) -> ArchetypeRegistry:
        """The archetypes a run in `workspace` sees (`RunConfig.workspace` wins over the runner's)."""
        if workspace is None or self._explicit_archetypes:
            return self.archetypes
        path = Path(workspace).resolve()
        if self.workspace is not None and path == self.workspace.resolve():
            return self.archetypes
        registry = self._workspace_archetypes.get(path)
        if registry is None:
            registry = self._workspace_archetypes[path] = ArchetypeRegistry.load(path)
        return registry

    # ---- public API ---------------------------------------------------------------------
    async def run(
        self, messages: Sequence[dict[str, Any]] = (), config: RunConfig | None = None, *, child: ChildSetup | None = None
    ) -> AsyncIterator[RunEvent]:
        """Run (or continue) a trace, yielding the Trace at start and end and every new Message."""
        config = await effective_config(self.trace_store, config or RunConfig())
        if config.trace_id is None:
            definition = self.archetypes_for(config.workspace).get(config.agent_type)
            if definition is not None:  # an archetype fills prompt, tools and limits the caller left open (H7)
                config = definition.apply_to(config, self.tool_registry.names())
        if child is not None and child.is_validator:
            llm, model = self._validator_llm(config)
        else:
            llm, model = self._resolve_llm(config)
        prepared = await prepare_run(self, list(messages), config, child)
        trace_id = prepared.trace.trace_id
        self.stops.register(trace_id, parent_id=prepared.trace.parent_trace_id, propagate=prepared.policy.propagate_stop)
        started = time.perf_counter()
        try:
            yield prepared.trace
            for message in prepared.new_messages:
                yield message
            async for event in self._loop(prepared, config, llm, model):
                yield event
            await run_post_turn_hooks(self, prepared, time.perf_counter() - started)
        except asyncio.CancelledError:
            await self._finish(prepared, "stopped", error="run cancelled")
            raise
        except Exception as exc:
            # Never leave a trace `running` behind a crash (a tool bug, a model fake that raises...).
            await self._finish(prepared, "failed", error=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self.stops.unregister(trace_id)

    async def run_result(
        self, messages: Sequence[dict[str, Any]] = (), config: RunConfig | None = None, *, child: ChildSetup | None = None
    ) -> RunResult:
        """Run to the end and return the final trace, answer and new messages."""
        trace: Trace | None = None
        new: list[Message] = []
        async for event in self.run(messages, config, child=child):
            if isinstance(event, Trace):
                trace = event
            else:
                new.append(event)
        assert trace is not None
        answer = trace.result_summary if trace.status == "completed" else None
        branch = config.side_branch if config is not None else None
        if branch is not None:
            record = trace.side_branches.get(branch)
            answer = record.answer if record is not None and record.status == "completed" else None
        return RunResult(trace=trace, answer=answer, messages=new)

    def stop(self, trace_id: str, reason: str = "stop requested") -> list[str]:
        """Ask a running trace (and, in recursive mode, its registered subtree) to stop; return flagged ids."""
        return self.stops.request_stop(trace_id, reason)

    def request_stop(self, trace_id: str, reason: str = "stop requested") -> list[str]:
        """Alias of `stop`."""
        return self.stop(trace_id, reason)

    def register_recursive_child(self, trace_id: str, parent_id: str, *, queued: bool = True) -> None:
        """Register a child before it runs so a stop of any ancestor reaches it (A8)."""
        self.stops.register(trace_id, parent_id=parent_id, propagate=True, queued=queued)

    def interrupt(self, trace_id: str, reason: str = "interrupted") -> str:
        """Trip the interrupt fence of the tree `trace_id` belongs to (H9): every run of that tree,
        in either mode, halts at its next provider call, tool execution or child spawn."""
        root = trace_id.split("@", 1)[0]
        self._fences[root] = reason
        return root

    def _halt_reason(self, prepared: PreparedRun) -> str | None:
        trace_id = prepared.trace.trace_id
        if self.stops.is_stopped(trace_id):
            return self.stops.stop_reason(trace_id)
        fence = self._fences.get(prepared.trace.root_id)
        return f"interrupt: {fence}" if fence is not None else None

    def _progress(self, kind: str, prepared: PreparedRun, **data: Any) -> None:
        if self.on_progress is not None:
            self.on_progress(ProgressEvent(kind=kind, trace_id=prepared.trace.trace_id, iteration=prepared.iterations, data=data))  # type: ignore[arg-type]

    def running(self) -> list[str]:
        """Ids of traces running in this process."""
        return self.stops.active()

    def lock(self, key: str) -> asyncio.Lock:
        """A process-wide asyncio lock for `key` (per-parent quotas, per-root budgets)."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def budget_for(self, trace: Trace) -> ResourceBudgetController:
        """The budget controller of the tree `trace` belongs to (recursive trees only)."""
        root_id = trace.root_id
        controller = self._budgets.get(root_id)
        if controller is None:
            root = trace if root_id == trace.trace_id else await self.trace_store.get_trace(root_id)
            setup = root.root_setup if root is not None else None
            if setup is None or setup.resource_budget is None:
                raise RunError(f"recursive root {root_id!r} has no resource budget snapshot; start a new task")
            controller = ResourceBudgetController(
                store=self.trace_store, root_trace_id=root_id, budget=setup.resource_budget,
                lock=self.lock(f"budget:{root_id}"),
            )
            self._budgets[root_id] = controller
        return controller

    # ---- internals ----------------------------------------------------------------------
    def _resolve_llm(self, config: RunConfig) -> tuple[LLMCall, str]:
        if self.llm_call is not None:
            return self.llm_call, config.model
        from cyber_agent.llm.resolve import resolve_llm

        resolved = resolve_llm(config.model)
        self._providers[id(resolved.llm_call)] = resolved.provider
        return resolved.llm_call, resolved.model

    def _validator_llm(self, config: RunConfig) -> tuple[LLMCall, str]:
        if self.validator_llm_call is not None:
            return self.validator_llm_call, config.model
        return self._resolve_llm(config)

    def _get_runtime_tool_names(self, config: RunConfig, trace: Trace) -> frozenset[str]:
        """Tools this run may see and call (A6): see `core/tool_rights.py:runtime_tool_names`."""
        return runtime_tool_names(self.tool_registry.names(), config.tools, trace)

    def _tool_context(self, prepared: PreparedRun, config: RunConfig, call_id: str) -> ToolContext:
        workspace = prepared.workspace
        if workspace is None:
            workspace = prepared.workspace = Path(config.workspace) if config.workspace else (self.workspace or Path.cwd())
        return ToolContext(
            trace_id=prepared.trace.trace_id,
            store=self.trace_store,
            goal_id=prepared.goal_id,
            tool_call_id=call_id,
            workspace=workspace,
            allowed_tools=prepared.static_allowed,
            runner=self,
            run_config=config,
            extra={"agent_depth": prepared.depth, "agent_mode": prepared.mode, "policy": prepared.policy},
        )

    async def _persist(self, prepared: PreparedRun, message: Message) -> Message:
        await self.trace_store.add_message(message)
        prepared.head = message.sequence
        prepared.history.append(message.to_llm_message())
        return message

    async def append_user_message(self, prepared: PreparedRun, text: str) -> Message:
        """Append a runner-authored user message (protocol feedback) to the running trace."""
        message = Message.create(
            trace_id=prepared.trace.trace_id, role="user", goal_id=prepared.goal_id, content=text,
            parent_sequence=prepared.head or None, metadata={"protocol": True}, branch=prepared.branch,
        )
        return await self._persist(prepared, message)

    async def _refresh(self, prepared: PreparedRun) -> list[dict[str, Any]] | None:
        trace = await self.trace_store.get_trace(prepared.trace.trace_id)
        if trace is not None:
            prepared.trace = trace
            prepared.goal_id = trace.current_goal_id
        prepared.allowed = tighten_by_state(prepared.static_allowed, prepared.trace, side_branch=prepared.branch)
        return self.tool_registry.schemas(sorted(prepared.allowed)) if prepared.allowed else None

    async def _call_model(self, prepared: PreparedRun, llm: LLMCall, model: str, schemas: Any, config: RunConfig) -> LLMResponse:
        if prepared.budget is not None:
            assignment = prepared.trace.protocol.validator
            root_validator = prepared.is_validator and assignment is not None and assignment.scope == "root"
            await prepared.budget.reserve_llm_call(root_validator=root_validator)
        if self.on_progress is not None:
            raw = await llm(prepared.history, model, schemas, config.temperature,
                            on_delta=lambda text: self._progress("text_delta", prepared, text=text))
        else:
            raw = await llm(prepared.history, model, schemas, config.temperature)
        return LLMResponse.coerce(raw)

    async def _loop(self, prepared: PreparedRun, config: RunConfig, llm: LLMCall, model: str) -> AsyncIterator[RunEvent]:
        trace_id = prepared.trace.trace_id
        prepared.harness = RunHarness(llm=llm, model=model, config=config, budget=prepared.budget)
        llm = wrap_dialect(llm, provider=self._providers.get(id(llm)), model=model, override=config.tool_dialect)
        prepared.static_allowed = prepared.allowed
        schemas = await self._refresh(prepared)
        if prepared.resume_batch is not None:
            async for message in resume_batch(self, prepared, config):
                yield message
            schemas = await self._refresh(prepared)
        for _ in range(config.max_iterations):
            halt = self._halt_reason(prepared) or stop_hook_reason(self, prepared)
            if halt is not None:
                yield await self._finish(prepared, "stopped", error=halt)
                return
            self._progress("iteration", prepared)
            try:
                await prepared.harness.compact(prepared, self.trace_store)
            except CyberAgentError as exc:
                yield await self._finish(prepared, "failed", error=f"context compaction failed: {exc}")
                return
            started = time.perf_counter()
            try:
                response = await self._call_model(prepared, llm, model, schemas, config)
            except BudgetExceededError as exc:
                yield await self._finish(prepared, "failed", error=str(exc))
                return
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
                branch=prepared.branch,
            )
            # Book the spend before the message is persisted: a kill between the two must never
            # leave tokens and cost that reached the trace unbooked in the tree budget.
            overrun = None
            booking_error: str | None = None
            if prepared.budget is not None:
                try:
                    overrun = await prepared.budget.book_llm_usage(
                        prompt_tokens=response.usage.prompt_tokens, completion_tokens=response.usage.completion_tokens,
                        cost_usd=response.cost,
                    )
                except CyberAgentError as exc:
                    booking_error = f"could not book usage: {exc}"
            yield await self._persist(prepared, assistant)
            prepared.iterations += 1
            prepared.prompt_tokens += response.usage.prompt_tokens
            prepared.completion_tokens += response.usage.completion_tokens
            prepared.cost += response.cost
            self._progress("cost", prepared, cost_usd=prepared.cost, tokens=prepared.prompt_tokens + prepared.completion_tokens)
            if booking_error is not None:
                yield await self._finish(prepared, "failed", error=booking_error)
                return
            halt = self._halt_reason(prepared)
            if halt is not None:
                # The in-flight response is recorded; its tool calls are not executed.
                yield await self._finish(prepared, "stopped", error=halt)
                return
            if overrun is not None:
                yield await self._finish(prepared, "failed", error=f"budget exceeded after a response: {overrun}")
                return
            if not response.tool_calls:
                decision = await on_final_text(self, prepared, response.content)
                for message in decision.messages:
                    yield message
                if decision.finish is not None:
                    status, answer, error = decision.finish
                    yield await self._finish(prepared, status, answer=answer, error=error, protocol=decision.protocol)
                    return
                continue
            if needs_approval(self, prepared, response.tool_calls):
                await open_batch(self.trace_store, self.tool_registry, trace_id, assistant.message_id, response.tool_calls)
                trace = await self.trace_store.update_trace(trace_id, head_sequence=prepared.head, current_goal_id=prepared.goal_id)
                prepared.trace = trace
                yield trace
                return
            refresh = False
            try:
                async for message in execute_calls(self, prepared, config, [(c, c.arguments, None) for c in response.tool_calls]):
                    yield message
                    if message.tool_name in STATE_TOOLS:
                        refresh = True
                        schemas = await self._refresh(prepared)
            except CyberAgentError as exc:  # budget refusals and unreadable usage end the run, closed
                yield await self._finish(prepared, "failed", error=str(exc))
                return
            if refresh:
                ended = prepared.trace.protocol.ended_by
                if ended is not None:
                    yield await self._finish(prepared, "completed", answer=ended.summary)
                    return
        yield await self._finish(
            prepared, "stopped", error=f"max_iterations ({config.max_iterations}) reached without a final answer"
        )

    async def _finish(
        self, prepared: PreparedRun, status: str, *, answer: str | None = None, error: str | None = None,
        protocol: dict[str, Any] | None = None,
    ) -> Trace:
        """End the run: root goal, then status and result (with `protocol` changes) in one trace write."""
        store = self.trace_store
        trace_id = prepared.trace.trace_id
        if prepared.branch is not None:
            # A side branch never moves the head, changes the trace's status or touches protocol state.
            current = await store.get_trace(trace_id)
            branches = dict(current.side_branches if current is not None else {})
            branches[prepared.branch] = SideBranchRecord(status=status, answer=answer, error=error, head_sequence=prepared.head)
            trace = await store.update_trace(trace_id, side_branches=branches)
            prepared.trace = trace
            return trace
        current = await store.get_trace(trace_id) if protocol else None
        new_protocol = with_protocol(current, protocol) if protocol and current is not None else None
        updates: dict[str, Any] = {"status": status, "head_sequence": prepared.head, "current_goal_id": prepared.goal_id}
        if answer is not None:
            updates["result_summary"] = answer
        if error is not None:
            updates["error_message"] = error
        if status == "completed" and prepared.root_goal_id is not None:
            tree = await store.get_goal_tree(trace_id)
            goal = tree.find(prepared.root_goal_id) if tree else None
            first_line = _clip((answer or "").strip().splitlines()[0]) if (answer or "").strip() else ""
            if goal is not None and goal.status not in FINAL_GOAL_STATUSES:
                await store.update_goal(trace_id, goal.id, status="completed", summary=first_line)
            elif goal is not None and goal.status == "completed" and goal.summary != first_line:
                # A revised run (review → revise) completes again: the goal shows the latest answer.
                await store.update_goal(trace_id, goal.id, summary=first_line)
        if new_protocol is not None:
            updates["protocol"] = new_protocol
        trace = await store.update_trace(trace_id, **updates)
        if status == "completed":
            await store.append_event(trace_id, "trace_completed", {"trace_id": trace_id, "total_messages": trace.total_messages})
        prepared.trace = trace
        return trace


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
