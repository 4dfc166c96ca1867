"""One turn's tool work for the runner: approval gate, executing calls, resuming decided batches,
and the hook checks around them. Split from `core/runner.py` to keep the loop readable."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from cyber_agent.core.dispatch import run_tool_call
from cyber_agent.core.hooks import LoopState, TurnSnapshot
from cyber_agent.core.tool_rights import WEB_TOOLS
from cyber_agent.core.validator_web import VALIDATION_METERED
from cyber_agent.trace.models import Message

if TYPE_CHECKING:
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.core.trace_setup import PreparedRun

__all__ = ["execute_calls", "needs_approval", "resume_batch", "run_post_turn_hooks", "stop_hook_reason"]


async def run_post_turn_hooks(runner: AgentRunner, prepared: PreparedRun, duration_s: float) -> None:
    """Run post-turn hooks with a snapshot of the finished run; a failing hook is recorded, never raised."""
    if not runner.post_turn_hooks:
        return
    trace = prepared.trace
    snapshot = TurnSnapshot(
        trace_id=trace.trace_id, status=trace.status, answer=trace.result_summary, iterations=prepared.iterations,
        tool_calls=list(prepared.tool_names), duration_s=duration_s, prompt_tokens=prepared.prompt_tokens,
        completion_tokens=prepared.completion_tokens, cost_usd=prepared.cost, messages=list(prepared.history),
    )
    for hook in runner.post_turn_hooks:
        try:
            await hook.after_turn(snapshot)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing hook never fails the run
            await runner.trace_store.append_event(trace.trace_id, "progress", {
                "post_turn_hook": getattr(hook, "name", type(hook).__name__), "error": f"{type(exc).__name__}: {exc}",
            })


def stop_hook_reason(runner: AgentRunner, prepared: PreparedRun) -> str | None:
    """The first stop hook's objection, as the trace will record it, or None."""
    state = LoopState(trace_id=prepared.trace.trace_id, iteration=prepared.iterations, cost_usd=prepared.cost,
                      tool_calls=len(prepared.tool_names))
    for hook in runner.stop_hooks:
        reason = hook.check(state)
        if reason is not None:
            return f"stop hook {hook.name}: {reason}"
    return None


def needs_approval(runner: AgentRunner, prepared: PreparedRun, calls: list[Any]) -> bool:
    """True when any exposed call of the batch requires a human decision (T8)."""
    for call in calls:
        spec = runner.tool_registry.get(call.name)
        if spec is not None and spec.requires_confirmation and call.name in prepared.allowed:
            return True
    return False


async def execute_calls(
    runner: AgentRunner, prepared: PreparedRun, config: RunConfig, calls: list[tuple[Any, dict[str, Any], str | None]]
) -> AsyncIterator[Message]:
    """Run tool calls in order (a rejection reason instead of arguments skips the call), persisting each result."""
    trace_id = prepared.trace.trace_id
    for call, arguments, rejected in calls:
        if runner._halt_reason(prepared) is not None:
            return
        runner._progress("tool_started", prepared, tool=call.name, call_id=call.id)
        metered = prepared.is_validator and prepared.budget is not None and call.name != "submit_validation"
        if metered and rejected is None and call.name not in WEB_TOOLS:
            # Reserve the validator's tool call before it runs; a refusal stops the validator.
            await prepared.budget.record_validation_work(tool_calls=1)
        if rejected is not None:
            content, is_error, duration, meta = rejected, True, 0.0, {"rejected": True}
        else:
            outcome = await run_tool_call(
                call.model_copy(update={"arguments": arguments}), registry=runner.tool_registry,
                allowed=prepared.allowed, context=runner._tool_context(prepared, config, call.id),
            )
            content, is_error = outcome.result.content, outcome.result.is_error
            duration, meta = outcome.duration_ms, dict(outcome.result.metadata)
            content, shaped = await prepared.harness.shape(prepared, runner.trace_store, call.name, content, is_error)
            meta.update(shaped)
        tool_message = Message.create(
            trace_id=trace_id, role="tool", goal_id=prepared.goal_id, tool_call_id=call.id,
            tool_name=call.name, content=content, parent_sequence=prepared.head,
            duration_ms=duration, branch=prepared.branch, metadata={"is_error": is_error, **meta},
        )
        yield await runner._persist(prepared, tool_message)
        prepared.tool_names.append(call.name)
        spec = runner.tool_registry.get(call.name)
        for hook in runner.stop_hooks:
            hook.record_tool_call(call.name, bool(spec and spec.side_effects) and rejected is None)
        runner._progress("tool_finished", prepared, tool=call.name, call_id=call.id, is_error=is_error)
        if metered and not meta.get(VALIDATION_METERED):
            await prepared.budget.record_validation_work(material_chars=len(content))


async def resume_batch(runner: AgentRunner, prepared: PreparedRun, config: RunConfig) -> AsyncIterator[Message]:
    """Execute a decided approval batch from the persisted assistant tool calls."""
    from cyber_agent.core.approvals import save_batch

    batch = prepared.resume_batch
    assistant = await runner.trace_store.get_message(batch.assistant_message_id)
    calls = {c.id: c for c in (assistant.tool_calls if assistant else [])}
    plan: list[tuple[Any, dict[str, Any], str | None]] = []
    for item in batch.calls:
        call = calls[item.call_id]
        if item.decision == "approve":
            plan.append((call, {**call.arguments, **item.edited_arguments}, None))
        else:
            plan.append((call, call.arguments, f"rejected by the reviewer: {item.feedback or 'no reason given'}"))
    batch.status = "executing"  # from here on a crash means unknown side effects (fail closed)
    await save_batch(runner.trace_store, batch)
    async for message in execute_calls(runner, prepared, config, plan):
        yield message
    batch.status = "done"
    await save_batch(runner.trace_store, batch)
    prepared.resume_batch = None
