"""One turn's tool work: approval gate, executing calls, resuming decided batches, and the hook
checks around them. Collaborators of the loop (`core/turn.py`): they get the run's state and
services, never the runner."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from cyber_agent.core.approvals import save_batch
from cyber_agent.core.dispatch import run_tool_call
from cyber_agent.core.hooks import LoopState, TurnSnapshot
from cyber_agent.core.open_calls import TOOL_CALL_STARTED
from cyber_agent.core.run_state import RunServices, RunState
from cyber_agent.core.runner_api import RunContext
from cyber_agent.protocol.tool_rights import WEB_TOOLS
from cyber_agent.protocol.web_evidence import VALIDATION_METERED
from cyber_agent.llm.types import ToolCall
from cyber_agent.tools.context import ToolContext
from cyber_agent.trace.message_metadata import tool_metadata
from cyber_agent.trace.models import Message

__all__ = ["ToolPlan", "after_reply_reason", "answer_not_run", "execute_calls", "flag_unpriced", "needs_approval", "record_reply_usage",
           "resume_batch", "run_post_turn_hooks", "stop_hook_reason", "tool_context"]

ToolPlan = list[tuple[ToolCall, dict[str, Any], str | None]]
"""Calls to run in order: (call, arguments, rejection reason or None)."""


async def run_post_turn_hooks(services: RunServices, prepared: RunState, duration_s: float) -> None:
    """Run post-turn hooks with a snapshot of the finished run; a failing hook is recorded, never raised."""
    if not services.post_turn_hooks:
        return
    trace = prepared.trace
    snapshot = TurnSnapshot(
        trace_id=trace.trace_id, status=trace.status, answer=trace.result_summary, iterations=prepared.iterations,
        tool_calls=list(prepared.tool_names), duration_s=duration_s, prompt_tokens=prepared.prompt_tokens,
        completion_tokens=prepared.completion_tokens, cost_usd=prepared.cost, messages=list(prepared.history),
    )
    for hook in services.post_turn_hooks:
        try:
            await hook.after_turn(snapshot)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing hook never fails the run
            await services.store.append_event(trace.trace_id, "progress", {
                "post_turn_hook": getattr(hook, "name", type(hook).__name__), "error": f"{type(exc).__name__}: {exc}",
            })


def _loop_state(prepared: RunState) -> LoopState:
    return LoopState(trace_id=prepared.trace.trace_id, iteration=prepared.iterations, cost_usd=prepared.cost,
                     tool_calls=len(prepared.tool_names), root_id=prepared.trace.root_id)


def stop_hook_reason(services: RunServices, prepared: RunState) -> str | None:
    """The first stop hook's objection, as the trace will record it, or None."""
    if not services.stop_hooks:
        return None
    state = _loop_state(prepared)
    for hook in services.stop_hooks:
        reason = hook.check(state)
        if reason is not None:
            return f"stop hook {hook.name}: {reason}"
    return None


def record_reply_usage(services: RunServices, prepared: RunState, cost_usd: float, *, unpriced: bool, model: str) -> None:
    """Tell the stop hooks a reply of this run was booked (tree-wide caps count it)."""
    for hook in services.stop_hooks:
        record = getattr(hook, "record_usage", None)
        if record is not None:
            record(prepared.trace.root_id, cost_usd, unpriced=unpriced, model=model)


async def flag_unpriced(services: RunServices, prepared: RunState, model: str) -> None:
    """Mark the trace as having unpriced usage (`Trace.cost_unpriced`, the models in `Trace.unpriced_models`)."""
    trace = prepared.trace
    if trace.cost_unpriced and model in trace.unpriced_models:
        return
    prepared.trace = await services.store.update_trace(
        trace.trace_id, cost_unpriced=True, unpriced_models=sorted({*trace.unpriced_models, model}))


def after_reply_reason(services: RunServices, prepared: RunState) -> str | None:
    """The first stop hook objecting to a booked reply's tools (a limit the reply overran), or None."""
    if not services.stop_hooks:
        return None
    state = _loop_state(prepared)
    for hook in services.stop_hooks:
        check = getattr(hook, "after_reply", None)
        reason = check(state) if check is not None else None
        if reason is not None:
            return f"stop hook {hook.name}: {reason}"
    return None


def _refusal(services: RunServices, call: ToolCall) -> str | None:
    if not services.stop_hooks:
        return None
    spec = services.registry.get(call.name)
    side_effects = bool(spec and spec.side_effects)
    for hook in services.stop_hooks:
        admit = getattr(hook, "admit_tool_call", None)
        reason = admit(call.name, side_effects) if admit is not None else None
        if reason is not None:
            return f"stop hook {hook.name}: {reason}"
    return None


async def answer_not_run(
    services: RunServices, prepared: RunState, calls: list[ToolCall], reason: str,
) -> AsyncIterator[Message]:
    """Answer each call with a `not run: <reason>` error result, so the history stays valid."""
    for call in calls:
        message = Message.create(
            trace_id=prepared.trace.trace_id, role="tool", goal_id=prepared.goal_id, tool_call_id=call.id,
            tool_name=call.name, content=f"not run: {reason}", parent_sequence=prepared.head,
            branch=prepared.branch, metadata={"is_error": True, "rejected": True, "not_run": reason},
        )
        yield await services.persist(prepared, message)


def needs_approval(services: RunServices, prepared: RunState, calls: list[ToolCall]) -> bool:
    """True when any exposed call of the batch requires a human decision (T8)."""
    for call in calls:
        spec = services.registry.get(call.name)
        if spec is not None and spec.requires_confirmation and call.name in prepared.allowed:
            return True
    return False


def tool_context(ctx: RunContext, prepared: RunState, call_id: str) -> ToolContext:
    """What a tool call of this run receives besides its arguments."""
    workspace = prepared.workspace
    if workspace is None:
        configured = ctx.config.workspace
        workspace = prepared.workspace = Path(configured) if configured else (ctx.services.workspace or Path.cwd())
    return ToolContext(
        trace_id=prepared.trace.trace_id,
        store=ctx.services.store,
        goal_id=prepared.goal_id,
        tool_call_id=call_id,
        workspace=workspace,
        allowed_tools=prepared.static_allowed,
        runner=ctx.runner,
        run_config=ctx.config,
        agent_mode=prepared.mode,
        agent_depth=prepared.depth,
    )


async def execute_calls(ctx: RunContext, prepared: RunState, calls: ToolPlan, *, assistant_id: str,
                        checked: bool = False) -> AsyncIterator[Message]:
    """Run tool calls in order (a rejection reason instead of arguments skips the call), persisting each result.

    The halt check runs before every call; `checked`: the caller has just made it, with nothing
    awaited since, so the first call goes without a second one (one store read fewer per tool turn).
    Before a call runs, a `tool_call_started` progress event records it: after a crash, a call
    with that record and no result reads as `execution_unknown`, never as not run
    (`cyber_agent/core/open_calls.py`).
    """
    services = ctx.services
    trace_id = prepared.trace.trace_id
    capped: str | None = None
    for index, (call, arguments, rejected) in enumerate(calls):
        if (index or not checked) and await services.halt_reason(prepared) is not None:
            return
        if rejected is None:
            # Caps apply per call: once one refuses, the rest of the batch is not run either and
            # the run stops at its next check (the cap still objects there).
            capped = capped or _refusal(services, call)
            if capped is not None:
                rejected = f"not run: {capped}"
        if services.on_progress is not None:  # the call's kwargs cost more than the check
            services.progress("tool_started", prepared, tool=call.name, call_id=call.id)
        budget = prepared.budget if prepared.is_validator else None
        metered = budget is not None and call.name != "submit_validation"
        if budget is not None and metered and rejected is None and call.name not in WEB_TOOLS:
            # Reserve the validator's tool call before it runs; a refusal stops the validator.
            await budget.record_validation_work(tool_calls=1)
        if rejected is not None:
            content, is_error, duration, meta = rejected, True, 0.0, {"rejected": True}
        else:
            started = {"stage": TOOL_CALL_STARTED, "assistant_id": assistant_id, "tool_call_id": call.id, "tool": call.name}
            spec = services.registry.get(call.name)
            defer = getattr(services.store, "defer_event", None) if spec is not None and spec.inline else None
            if defer is not None:
                # An inline tool has no side effects and runs without yielding: its start commits with
                # its result (a kill in between reads as not run, which it was in effect).
                await defer(trace_id, "progress", started)
            else:
                await services.store.append_event(trace_id, "progress", started)
            outcome = await run_tool_call(
                call if arguments is call.arguments else call.model_copy(update={"arguments": arguments}),
                registry=services.registry,
                allowed=prepared.allowed, context=tool_context(ctx, prepared, call.id),
            )
            content, is_error = outcome.result.content, outcome.result.is_error
            duration, meta = outcome.duration_ms, dict(outcome.result.metadata)
            content, shaped = await prepared.run_harness.shape(prepared, services.store, call.name, content, is_error)
            meta.update(shaped)
        tool_message = Message.create(
            trace_id=trace_id, role="tool", goal_id=prepared.goal_id, tool_call_id=call.id,
            tool_name=call.name, content=content, parent_sequence=prepared.head,
            duration_ms=duration, branch=prepared.branch, metadata=tool_metadata({"is_error": is_error, **meta}),
        )
        yield await services.persist(prepared, tool_message)
        prepared.tool_names.append(call.name)
        if services.stop_hooks:
            spec = services.registry.get(call.name)
            for hook in services.stop_hooks:
                hook.record_tool_call(call.name, bool(spec and spec.side_effects) and rejected is None)
        if services.on_progress is not None:
            services.progress("tool_finished", prepared, tool=call.name, call_id=call.id, is_error=is_error)
        if budget is not None and metered and not meta.get(VALIDATION_METERED):
            await budget.record_validation_work(material_chars=len(content))


async def resume_batch(ctx: RunContext, prepared: RunState) -> AsyncIterator[Message]:
    """Execute a decided approval batch from the persisted assistant tool calls."""
    store = ctx.services.store
    batch = prepared.resume_batch
    if batch is None:
        return
    assistant = await store.get_message(batch.assistant_message_id)
    calls = {c.id: c for c in (assistant.tool_calls if assistant else [])}
    plan: ToolPlan = []
    for item in batch.calls:
        call = calls[item.call_id]
        if item.decision == "approve":
            plan.append((call, {**call.arguments, **item.edited_arguments}, None))
        else:
            plan.append((call, call.arguments, f"rejected by the reviewer: {item.feedback or 'no reason given'}"))
    batch.status = "executing"  # from here on a crash means unknown side effects (fail closed)
    await save_batch(store, batch)
    async for message in execute_calls(ctx, prepared, plan, assistant_id=batch.assistant_message_id):
        yield message
    batch.status = "done"
    await save_batch(store, batch)
    prepared.resume_batch = None
