"""AgentRunner: turn a task into a persisted, tool-using LLM run (SPEC H1, H2, T3, A5–A12).

The loop lives here; tool dispatch is in `core/dispatch.py`, prompt assembly in
`core/prompt.py`, trace preparation in `core/trace_setup.py`; the recursive protocol (tool
rights, end-of-turn rules, delegation, validators) in `cyber_agent/protocol/`, which reaches
the runner only through `cyber_agent/protocol/ports.py:ProtocolRunner`.
Per-step work is constant: the history is loaded from the store once per run and then only
appended to.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, TypeGuard

from cyber_agent.core.archetypes import ArchetypeRegistry
from cyber_agent.core.child_run import CHILD_DELIVERED, note_waiting_child, run_child, spawn_limits, spec_run, waiting_children
from cyber_agent.core.config import RunConfig
from cyber_agent.core.harness import RunHarness, wrap_dialect
from cyber_agent.core.hooks import PostTurnHook, ProgressEvent, StopHook
from cyber_agent.core.resource_budget import ResourceBudgetController
from cyber_agent.core.run_state import RunServices, RunState
from cyber_agent.core.runner_api import RunContext, RunEvent, RunResult
from cyber_agent.core.stop import StopRegistry, ancestry
from cyber_agent.core.stop import request_stop as persist_stop
from cyber_agent.protocol.mode import AgentPolicy
from cyber_agent.protocol.ports import ChildSetup, ChildSpec, Completion
from cyber_agent.protocol.tool_rights import SIDE_BRANCH_FORBIDDEN
from cyber_agent.core.trace_setup import effective_config, prepare_run
from cyber_agent.core.turn import AwaitApproval, Continue, Finish, TurnOutcome, end_run, refresh, take_turn
from cyber_agent.core.turn_tools import resume_batch, run_post_turn_hooks
from cyber_agent.errors import RunError
from cyber_agent.llm.call_site import at_site
from cyber_agent.llm.cassette import ExchangeRecorder
from cyber_agent.llm.dialects import DialectLLM
from cyber_agent.llm.pricing import default_price_table
from cyber_agent.llm.types import LLMCall
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.tools.shell_policy import shell_policy_view
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.exchange_log import ExchangeLog

__all__ = ["HOOK_SETTLE_TIMEOUT", "AgentRunner", "RunEvent", "RunResult", "default_registry"]

HOOK_SETTLE_TIMEOUT = 30.0
"""Seconds a root's `run_result` waits for hooks marked `settle_before_return` (see `AgentRunner._settle_hooks`)."""


def _keeps_exchanges(store: object) -> TypeGuard[ExchangeLog]:
    """`isinstance(store, ExchangeLog)`; a class that defines both methods answers without the protocol check (~50 µs)."""
    kind = type(store)
    if kind not in _EXCHANGE_LOGS:
        _EXCHANGE_LOGS[kind] = all(callable(getattr(kind, name, None)) for name in ("append_exchange", "get_exchanges"))
    return _EXCHANGE_LOGS[kind] or isinstance(store, ExchangeLog)


_EXCHANGE_LOGS: dict[type, bool] = {}


def default_registry() -> ToolRegistry:
    """Return the built-in tools plus `agent` and the recursive protocol tools."""
    from cyber_agent.protocol.agent_tool import register_agent_tool
    from cyber_agent.protocol.report_tools import register_protocol_tools
    from cyber_agent.protocol.web_tools import register_web_tools
    from cyber_agent.tools.builtin import builtin_registry

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
        self._hook_tasks: set[asyncio.Task[None]] = set()
        self._settle_tasks: set[asyncio.Task[None]] = set()
        self._held: dict[str, list[str]] = {}
        self._unrecorded: set[str] = set()  # roots run with record_exchanges=False

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
        # Unset provider settings and dialect come from the environment once, so the snapshot records them.
        config = (await effective_config(self.trace_store, config or RunConfig())).with_environment()
        if config.trace_id is None:
            definition = self.archetypes_for(config.workspace).get(config.agent_type)
            if definition is not None:  # an archetype fills prompt, tools and limits the caller left open (H7)
                config = definition.apply_to(config, self.tool_registry.names())
        if child is not None and child.is_validator:
            llm, model = self._validator_llm(config)
        else:
            llm, model = self._resolve_llm(config)
        services = self._services(config)
        state = await prepare_run(services, messages if isinstance(messages, str) else list(messages), config, child)
        state.ancestry = await ancestry(self.trace_store, state.trace)
        trace_id = state.trace.trace_id
        self.stops.register(trace_id, parent_id=state.trace.parent_trace_id, propagate=state.policy.propagate_stop)
        started = time.perf_counter()
        try:
            yield state.trace
            for message in state.new_messages:
                yield message
            async for event in self._loop(services, state, config, llm, model):
                yield event
            self._after_run(services, state, time.perf_counter() - started)
        except asyncio.CancelledError:
            await end_run(services, state, Finish(status="stopped", error="run cancelled"))
            raise
        except Exception as exc:
            # Never leave a trace `running` behind a crash (a tool bug, a model fake that raises...).
            await end_run(services, state, Finish(status="failed", error=f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            self.stops.unregister(trace_id)
            self._held.pop(trace_id, None)

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
        if child is None:
            await self._settle_hooks()
        answer = trace.result_summary if trace.status == "completed" else None
        branch = config.side_branch if config is not None else None
        if branch is not None:
            record = trace.side_branches.get(branch)
            answer = record.answer if record is not None and record.status == "completed" else None
        return RunResult(trace=trace, answer=answer, messages=new)

    async def drain_hooks(self, timeout: float | None = 10.0) -> int:
        """Wait (at most `timeout` seconds) for post-turn hooks still running; cancel the rest.

        Post-turn hooks run in background tasks owned by the runner so a slow hook never delays
        `run_result` (observers never fail or delay a run). Call this before the event loop
        closes when hooks are set, or in a test before reading what a hook wrote. Returns the
        number of hook tasks cancelled because they outlived the wait.
        """
        pending = set(self._hook_tasks)
        if not pending:
            return 0
        _, late = await asyncio.wait(pending, timeout=timeout)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late)
        return len(late)

    async def _settle_hooks(self) -> None:
        """Wait (at most `HOOK_SETTLE_TIMEOUT`) for the hook tasks of hooks that must finish before `run_result` returns.

        A hook with `settle_before_return = True` (the OTel observer: it only reads the store and
        queues spans) is done when the root's `run_result` returns, so `observer.flush()` right
        after it sends every span. Tasks that outlive the wait keep running; nothing is cancelled.
        """
        pending = {task for task in self._hook_tasks if task in self._settle_tasks}
        if pending:
            await asyncio.wait(pending, timeout=HOOK_SETTLE_TIMEOUT)

    def _after_run(self, services: RunServices, state: RunState, duration_s: float) -> None:
        """Schedule the post-turn hooks of a finished run in a runner-owned background task."""
        if not services.post_turn_hooks:
            return
        task = asyncio.get_running_loop().create_task(
            run_post_turn_hooks(services, state, duration_s), name=f"post-turn-hooks:{state.trace.trace_id}",
        )
        self._hook_tasks.add(task)
        if any(getattr(hook, "settle_before_return", False) for hook in services.post_turn_hooks):
            self._settle_tasks.add(task)
        task.add_done_callback(self._hook_done)

    def _hook_done(self, task: asyncio.Task[None]) -> None:
        self._hook_tasks.discard(task)
        self._settle_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # a store failure while recording a hook error
            warnings.warn(f"post-turn hooks failed: {task.exception()!r}", RuntimeWarning, stacklevel=1)

    def stop(self, trace_id: str, reason: str = "stop requested") -> list[str]:
        """Ask a running trace and every registered descendant (legacy and recursive) to stop; return flagged ids."""
        return self.stops.request_stop(trace_id, reason)

    def request_stop(self, trace_id: str, reason: str = "stop requested") -> list[str]:
        """Alias of `stop`."""
        return self.stop(trace_id, reason)

    async def stop_everywhere(self, trace_id: str, reason: str = "stop requested") -> list[str]:
        """Stop the trace's subtree here and persist the stop, so runs of it in other processes halt too."""
        await persist_stop(self.trace_store, trace_id, reason)
        return self.stop(trace_id, reason)

    def register_recursive_child(self, trace_id: str, parent_id: str, *, queued: bool = True) -> None:
        """Register a child before it runs so a stop of any ancestor reaches it (A8)."""
        self.stops.register(trace_id, parent_id=parent_id, propagate=True, queued=queued)

    def interrupt(self, trace_id: str, reason: str = "interrupted") -> str:
        """Trip the interrupt fence of the tree `trace_id` belongs to (H9): every run of that tree,
        in either mode, halts at its next provider call, tool execution or child spawn (a spawn is
        refused with a tool error naming the interrupt; no child is created). The fence holds
        until `clear_interrupt`; return the root id."""
        root = trace_id.split("@", 1)[0]
        self._fences[root] = reason
        return root

    def clear_interrupt(self, trace_id: str) -> bool:
        """Lift the interrupt fence of `trace_id`'s tree so its traces can be continued on this runner.

        Clearing is explicit: a fence never lifts by itself. Runs that halted stay `stopped`;
        continue them with `RunConfig(trace_id=...)`. Return True when a fence was lifted.
        """
        return self._fences.pop(trace_id.split("@", 1)[0], None) is not None

    def hold_for_child(self, trace_id: str, child_trace_id: str) -> None:
        """End the running `trace_id` `waiting_confirmation` after its current turn: a sub-agent awaits an approval."""
        self._held.setdefault(trace_id, []).append(child_trace_id)

    def interrupt_reason(self, trace_id: str) -> str | None:
        """The reason of the interrupt fence of `trace_id`'s tree, or None when it is not interrupted."""
        return self._fences.get(trace_id.split("@", 1)[0])

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

    # ---- the protocol's port (cyber_agent/protocol/ports.py:ProtocolRunner) --------------
    def tool_names(self) -> list[str]:
        """Names of the registered tools."""
        return self.tool_registry.names()

    def release_child(self, trace_id: str) -> None:
        """Forget a child's stop registration once its run is over."""
        self.stops.unregister(trace_id)

    async def check_spawn(self, parent: Trace, *, workspace: str | None, agent_type: str | None) -> int:
        """Check that `parent` may start children (of `agent_type`); return the child depth (ToolError names the limit)."""
        return await spawn_limits(self, parent, policy=AgentPolicy.of(parent), archetypes=self.archetypes_for(workspace),
                                  child_agent_type=agent_type)

    async def run_child(
        self, spec: ChildSpec, *, complete: Completion | None = None, on_started: Callable[[], None] | None = None,
    ) -> RunResult:
        """Run one child of the protocol (`core/child_run.py`: config inheritance, events in pairs)."""
        return await run_child(self, spec_run(spec), complete=complete, on_started=on_started)

    async def note_waiting_child(self, parent_trace_id: str, child: Trace) -> str | None:
        """A sub-agent ended waiting for an approval: note it on the parent and hold the parent."""
        return await note_waiting_child(self, parent_trace_id, child)

    # ---- internals ----------------------------------------------------------------------
    def _resolve_llm(self, config: RunConfig) -> tuple[LLMCall, str]:
        if self.llm_call is not None:
            return self.llm_call, config.model
        from cyber_agent.llm.resolve import resolve_llm

        resolved = resolve_llm(config.model, settings=config.provider)
        self._providers[id(resolved.llm_call)] = resolved.provider
        return resolved.llm_call, resolved.model

    def _validator_llm(self, config: RunConfig) -> tuple[LLMCall, str]:
        if self.validator_llm_call is not None:
            return self.validator_llm_call, config.model
        return self._resolve_llm(config)

    def _services(self, config: RunConfig | None = None) -> RunServices:
        # The run sees the registry through its shell policy (one view per run; `allow` is the registry itself).
        registry = self.tool_registry if config is None else shell_policy_view(self.tool_registry, config.shell_tools)
        return RunServices(
            store=self.trace_store, registry=registry, stops=self.stops, fences=self._fences,
            budget_for=self.budget_for, stop_hooks=self.stop_hooks, post_turn_hooks=self.post_turn_hooks,
            on_progress=self.on_progress, workspace=self.workspace,
        )

    async def append_user_message(self, state: RunState, text: str) -> Message:
        """Append a runner-authored user message (protocol feedback) to the running trace."""
        return await self._services().append_user_message(state, text)

    async def _loop(
        self, services: RunServices, state: RunState, config: RunConfig, llm: LLMCall, model: str
    ) -> AsyncIterator[RunEvent]:
        """Take turns until one does not continue, then end the run in one place (`core/turn.py:end_run`)."""
        provider = self._providers.get(id(llm))
        if not config.record_exchanges:  # off for a root: off for every run of its tree in this runner
            self._unrecorded.add(state.trace.root_id)
        elif state.trace.root_id not in self._unrecorded and _keeps_exchanges(services.store):
            # Kept with the trace; a store that can writes it with the reply's message (one transaction).
            sink = getattr(services.store, "defer_exchange", None) or services.store.append_exchange
            llm = ExchangeRecorder(llm, sink, state.trace.trace_id)
        # Every call of this run is marked with its trace: a recording is keyed by position in the tree.
        llm = at_site(llm, state.trace.trace_id)
        state.harness = RunHarness(llm=llm, model=model, config=config, budget=state.budget)
        ctx = RunContext(
            services=services, runner=self, model=model, config=config,
            llm=wrap_dialect(llm, provider=provider, model=model, override=config.tool_dialect),
            # Settled once per run, not read from the environment on every reply.
            prices=config.provider.price_table() or default_price_table(),
        )
        state.static_allowed = state.allowed
        if isinstance(ctx.llm, DialectLLM):  # a text dialect renders the tools into the system prompt: keep it fixed
            fixed = state.static_allowed - SIDE_BRANCH_FORBIDDEN if state.branch is not None else state.static_allowed
            state.fixed_schemas = services.registry.schemas(sorted(fixed)) if fixed else None
        # prepare_run has just read or written the trace: no need to read it again.
        await refresh(services, state, reread=False)
        if state.resume_batch is not None:
            async for message in resume_batch(ctx, state):
                yield message
            await refresh(services, state)
        outcome: Finish | AwaitApproval = Finish(
            status="stopped", error=f"max_iterations ({config.max_iterations}) reached without a final answer"
        )
        held = False
        self._held.pop(state.trace.trace_id, None)  # nothing left over from an earlier run of this trace
        if state.branch is None:
            async for message in self._deliver_waiting_children(services, state):
                yield message
            held = state.trace.trace_id in self._held
        for _ in range(0 if held else config.max_iterations):
            step: TurnOutcome = Continue()
            async for item in take_turn(ctx, state):
                if isinstance(item, (Continue, Finish, AwaitApproval)):
                    step = item
                else:
                    yield item
            if state.branch is None and state.trace.trace_id in self._held:  # a sub-agent awaits an approval: wait with it
                held = True
                break
            if not isinstance(step, Continue):
                outcome = step
                break
        if held:
            self._held.pop(state.trace.trace_id, None)
            state.trace = await services.store.update_trace(state.trace.trace_id, status="waiting_confirmation")
            outcome = AwaitApproval()
        yield await end_run(services, state, outcome)

    async def _deliver_waiting_children(self, services: RunServices, state: RunState) -> AsyncIterator[Message]:
        """On a continued run: hand the results of sub-agents that waited for an approval to this trace.

        A sub-agent still waiting (or running) keeps this trace waiting: the run ends
        `waiting_confirmation` again without a model call. A finished one becomes a runner-written
        user message with its status and answer, recorded by a `child_result_delivered` event.
        """
        if not any(m.get("role") == "tool" and "(waiting_confirmation: sub-agent" in str(m.get("content"))
                   for m in state.history):
            return  # cheap gate: only a trace that was told a sub-agent waits reads its events
        for child_id in await waiting_children(services.store, state.trace.trace_id):
            child = await services.store.get_trace(child_id)
            if child is None:
                continue
            if child.status in ("waiting_confirmation", "running"):
                self.hold_for_child(state.trace.trace_id, child_id)
                continue
            answer = child.result_summary if child.status == "completed" else None
            summary = answer if answer is not None else f"({child.status}: {child.error_message or 'no answer'})"
            yield await services.append_user_message(
                state, f"[sub-agent {child_id} finished after its tool approval] [{child.status}]: {summary}")
            await services.store.append_event(state.trace.trace_id, "progress", {
                "stage": CHILD_DELIVERED, "child_trace_id": child_id, "status": child.status,
            })
