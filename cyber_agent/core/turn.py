"""One model turn of a run, as a typed outcome, and the one place a run ends.

`take_turn` yields the turn's messages as they are persisted and, last, a `TurnOutcome`:
`Continue`, `Finish` (status, answer, error, protocol changes) or `AwaitApproval`. The loop
(`core/runner.py:AgentRunner._loop`) stops at the first outcome that is not `Continue` and
hands it to `end_run`, which also ends crashed and cancelled runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cyber_agent.core.approvals import open_batch
from cyber_agent.protocol.flow import STATE_TOOLS, on_final_text
from cyber_agent.protocol.state import with_protocol
from cyber_agent.core.run_state import RunServices, RunState
from cyber_agent.core.runner_api import RunContext, RunEvent
from cyber_agent.protocol.tool_rights import tighten_by_state
from cyber_agent.core.turn_tools import (
    ToolPlan, after_reply_reason, answer_not_run, execute_calls, flag_unpriced, needs_approval, record_reply_usage,
    stop_hook_reason,
)
from cyber_agent.errors import BudgetExceededError, CyberAgentError, LLMError
from cyber_agent.llm.boundary import normalise_reply
from cyber_agent.llm.pricing import ModelPrice, is_unpriced
from cyber_agent.llm.types import LLMResponse, RetryRecord, ToolCall
from cyber_agent.trace.goal_models import FINAL_GOAL_STATUSES
from cyber_agent.trace.models import Message, MessageContent, Trace, TraceStatus
from cyber_agent.trace.state import SideBranchRecord

__all__ = ["AwaitApproval", "Continue", "Finish", "TurnOutcome", "end_run", "refresh", "take_turn"]


@dataclass(frozen=True, kw_only=True)
class Continue:
    """The run takes another turn."""


@dataclass(frozen=True, kw_only=True)
class Finish:
    """The run ends with this status."""

    status: TraceStatus
    """Final status of the trace (or of the side branch)."""
    answer: str | None = None
    """The answer, stored as `result_summary`."""
    error: str | None = None
    """Why the run did not complete, stored as `error_message`."""
    protocol: dict[str, Any] | None = None
    """Protocol changes persisted in the same trace write as the status."""


@dataclass(frozen=True, kw_only=True)
class AwaitApproval:
    """The turn's tool calls wait for a human decision (T8); the run ends waiting for it."""


TurnOutcome = Continue | Finish | AwaitApproval
"""What one turn means for the run."""

CONTINUE = Continue()
_log = logging.getLogger("cyber_agent.runner")


async def refresh(services: RunServices, state: RunState, *, reread: bool = True) -> None:
    """Re-read the trace (focus, protocol state) when a tool may have changed it; recompute the tools offered."""
    if reread:
        trace = await services.store.get_trace(state.trace.trace_id)
        if trace is not None:
            state.trace = trace
            state.goal_id = trace.current_goal_id
    state.allowed = tighten_by_state(state.static_allowed, state.trace, side_branch=state.branch)
    state.schemas = services.registry.schemas(sorted(state.allowed)) if state.allowed else None


async def _call_model(ctx: RunContext, state: RunState) -> LLMResponse:
    if state.budget is not None:
        assignment = state.trace.protocol.validator
        root_validator = state.is_validator and assignment is not None and assignment.scope == "root"
        await state.budget.reserve_llm_call(root_validator=root_validator)
    services = ctx.services
    # A text dialect always gets the static tool list (a fixed system prompt, H2); native gets the tightened one.
    tools = state.fixed_schemas if state.fixed_schemas is not None else state.schemas
    if services.on_progress is not None:
        raw = await ctx.llm(state.history, ctx.model, tools, ctx.config.temperature,
                            on_delta=lambda text: services.progress("text_delta", state, text=text))
    else:
        raw = await ctx.llm(state.history, ctx.model, tools, ctx.config.temperature)
    # The runner's side of the provider boundary: a reply cut by the output limit marks every one
    # of its calls incomplete, unsound usage is replaced by the estimate, a reply without a cost is priced.
    return normalise_reply(raw, state.history, ctx.model, _prices(ctx))


def _prices(ctx: RunContext) -> Mapping[str, ModelPrice] | None:
    return ctx.prices if ctx.prices is not None else ctx.config.provider.price_table()


def _rights_notice(state: RunState) -> str | None:
    """Under a text dialect, the message telling the model its tool rights changed since it was last told, or None.

    The system prompt lists the static tools and never changes (H2); a withheld tool still gets a
    tool error when called. Native calls send the tightened list itself and get no message.
    """
    if state.fixed_schemas is None:
        return None
    if state.trace.protocol.pending_reviews:
        if state.announced == state.allowed:
            return None
        state.announced = state.allowed
        shown = ", ".join(sorted(state.allowed)) or "none"
        return f"[protocol] Until you review the pending child reports with review_task, only these tools are available: {shown}."
    if state.announced is None:
        return None
    state.announced = None
    return "[protocol] Reviews done; your tools are available again."


async def _before_call(ctx: RunContext, state: RunState) -> Finish | None:
    """Halt checks and context compaction before the provider call."""
    services = ctx.services
    halt = await services.halt_reason(state) or stop_hook_reason(services, state)
    if halt is not None:
        return Finish(status="stopped", error=halt)
    if services.on_progress is not None:  # the call's kwargs cost more than the check (four a step)
        services.progress("iteration", state)
    try:
        await state.run_harness.compact(state, services.store)
    except CyberAgentError as exc:
        return Finish(status="failed", error=f"context compaction failed: {exc}")
    return None


async def _record_retries(services: RunServices, state: RunState, retries: Sequence[object], model: str) -> None:
    """Append one `llm_retry` event per retried attempt of the call just made, answered or failed."""
    for record in retries:
        if isinstance(record, RetryRecord):
            _log.info("trace %s: model call attempt %d failed (%s); waited %.2f s before retrying",
                      state.trace.trace_id, record.attempt, record.error, record.wait_s)
            payload = record.model_dump(mode="json", exclude=None if record.partial_text else {"partial_text"})
            await services.store.append_event(state.trace.trace_id, "llm_retry", {**payload, "model": model})


async def _book(state: RunState, response: LLMResponse, *, unpriced: bool = False) -> Finish | str | None:
    """Book the response's spend in the tree budget: a failure to book, an overrun text, or None."""
    if state.budget is None:
        return None
    try:
        return await state.budget.book_llm_usage(
            prompt_tokens=response.usage.prompt_tokens, completion_tokens=response.usage.completion_tokens,
            cost_usd=response.cost, unpriced=unpriced,
        )
    except CyberAgentError as exc:
        return Finish(status="failed", error=f"could not book usage: {exc}")


def _count(services: RunServices, state: RunState, response: LLMResponse) -> None:
    state.iterations += 1
    state.prompt_tokens += response.usage.prompt_tokens
    state.completion_tokens += response.usage.completion_tokens
    state.cost += response.cost
    if services.on_progress is not None:
        services.progress("cost", state, cost_usd=state.cost, tokens=state.prompt_tokens + state.completion_tokens)


async def take_turn(ctx: RunContext, state: RunState) -> AsyncIterator[RunEvent | TurnOutcome]:
    """Take one model turn: yield each message as it is persisted, then the turn's outcome."""
    services = ctx.services
    early = await _before_call(ctx, state)
    if early is None:
        notice = _rights_notice(state)
        if notice is not None:
            yield await services.append_user_message(state, notice)
        started = time.perf_counter()
        try:
            sent = len(state.history)
            response = await _call_model(ctx, state)
            state.run_harness.note_prompt(response.usage.prompt_tokens, sent)
        except BudgetExceededError as exc:
            early = Finish(status="failed", error=str(exc))
        except CyberAgentError as exc:
            early = Finish(status="failed", error=f"model call failed: {exc}")
            if isinstance(exc, LLMError):
                await _record_retries(services, state, exc.retries, ctx.model)
    if early is not None:
        yield early
        return
    if response.retries:
        await _record_retries(services, state, response.retries, ctx.model)
    if response.usage.invalid:
        _log.warning("trace %s: %s reported unbookable usage: %s", state.trace.trace_id, ctx.model, response.usage.invalid)
        await services.store.append_event(state.trace.trace_id, "usage_invalid", {
            "reason": response.usage.invalid, "prompt_tokens": response.usage.prompt_tokens,
            "completion_tokens": response.usage.completion_tokens, "model": ctx.model})
    unpriced = is_unpriced(response, ctx.model, _prices(ctx))
    metadata: dict[str, Any] = {"model": response.model or ctx.model, "cost_estimated": response.cost_estimated}
    if unpriced:  # the optional keys in this order, each only when it holds
        metadata["cost_unpriced"] = True
    if not response.usage.reported:
        metadata["usage_estimated"] = True
    if response.usage.invalid:
        metadata["usage_invalid"] = response.usage.invalid
    if response.retries:
        metadata["http_retries"] = len(response.retries)
        metadata["retry_wait_s"] = round(sum(r.wait_s for r in response.retries), 3)
    assistant = Message.create(
        trace_id=state.trace.trace_id, role="assistant", goal_id=state.goal_id,
        content=MessageContent(text=response.content or None, tool_calls=response.tool_calls),
        parent_sequence=state.head or None,
        prompt_tokens=response.usage.prompt_tokens, completion_tokens=response.usage.completion_tokens,
        cached_tokens=response.usage.cached_tokens, cost=response.cost,
        duration_ms=(time.perf_counter() - started) * 1000,
        metadata=metadata, branch=state.branch,
    )
    # Book the spend before the message is persisted: a kill between the two must never
    # leave tokens and cost that reached the trace unbooked in the tree budget.
    booked = await _book(state, response, unpriced=unpriced) if state.budget is not None else None
    yield await services.persist(state, assistant)
    _count(services, state, response)
    record_reply_usage(services, state, response.cost, unpriced=unpriced, model=response.model or ctx.model)
    if unpriced:
        await flag_unpriced(services, state, response.model or ctx.model)
    async for item in _after_response(ctx, state, response, assistant, booked):
        yield item


async def _after_response(
    ctx: RunContext, state: RunState, response: LLMResponse, assistant: Message, booked: Finish | str | None,
) -> AsyncIterator[RunEvent | TurnOutcome]:
    services = ctx.services
    halt = await services.halt_reason(state)
    if isinstance(booked, Finish):
        yield booked
    elif halt is not None:
        # The in-flight response is recorded; its tool calls are not executed.
        yield Finish(status="stopped", error=halt)
    elif booked is not None:
        # Limits a reply can overrun are checked before any of its tools run; its calls are
        # answered so the history stays valid.
        async for message in answer_not_run(services, state, response.tool_calls, f"budget exceeded ({booked})"):
            yield message
        yield Finish(status="failed", error=f"budget exceeded after a response: {booked}")
    elif (objection := after_reply_reason(services, state)) is not None:
        async for message in answer_not_run(services, state, response.tool_calls, objection):
            yield message
        yield Finish(status="stopped", error=objection)
    elif not response.tool_calls:
        decision = await on_final_text(ctx.runner, state, response.content,
                                       note=lambda text: services.append_user_message(state, text))
        for message in decision.messages:
            yield message
        if decision.finish is None:
            yield CONTINUE
        else:
            status, answer, error = decision.finish
            yield Finish(status=status, answer=answer, error=error, protocol=decision.protocol)
    elif not any(c.incomplete for c in response.tool_calls) and needs_approval(services, state, response.tool_calls):
        await open_batch(services.store, services.registry, state.trace.trace_id, assistant.message_id, response.tool_calls)
        yield AwaitApproval()
    else:
        async for item in _run_tools(ctx, state, response, assistant.message_id):
            yield item


def _plan(ctx: RunContext, state: RunState, calls: list[ToolCall]) -> ToolPlan:
    """Which calls of a reply run: an incomplete call never does; its answer is a tool error.

    When a reply holds an incomplete call, a complete call that needs a human decision is held
    back too (an approval batch is all or nothing): the model sends the calls again.
    """
    cut = any(c.incomplete for c in calls)
    plan: ToolPlan = []
    for call in calls:
        if call.incomplete:
            reason = f"error: tool {call.name!r} not run: {call.incomplete}; send it again complete"
        elif cut and needs_approval(ctx.services, state, [call]):
            reason = (f"error: tool {call.name!r} not run: another call of the same reply was incomplete; "
                      "send the calls again complete")
        else:
            reason = None
        plan.append((call, call.arguments, reason))
    return plan


async def _run_tools(
    ctx: RunContext, state: RunState, response: LLMResponse, assistant_id: str,
) -> AsyncIterator[RunEvent | TurnOutcome]:
    refreshed = False
    try:
        # `_after_response` has just checked for a halt: the first call needs no second check.
        plan = _plan(ctx, state, response.tool_calls)
        async for message in execute_calls(ctx, state, plan, assistant_id=assistant_id, checked=True):
            yield message
            if message.tool_name in STATE_TOOLS:
                refreshed = True
                await refresh(ctx.services, state)
    except CyberAgentError as exc:  # budget refusals and unreadable usage end the run, closed
        yield Finish(status="failed", error=str(exc))
        return
    ended = state.trace.protocol.ended_by if refreshed else None
    yield Finish(status="completed", answer=ended.summary) if ended is not None else CONTINUE


async def end_run(services: RunServices, state: RunState, outcome: Finish | AwaitApproval) -> Trace:
    """End the run: wait for approval, or write root goal, then status and result (with protocol changes) once."""
    store = services.store
    trace_id = state.trace.trace_id
    if isinstance(outcome, AwaitApproval):
        state.trace = await store.update_trace(trace_id, head_sequence=state.head, current_goal_id=state.goal_id)
        return state.trace
    status, answer, error = outcome.status, outcome.answer, outcome.error
    if status != "completed":
        _log.info("trace %s %s: %s", trace_id, status, error or "no reason given")
    if state.branch is not None:
        # A side branch never moves the head, changes the trace's status or touches protocol state.
        current = await store.get_trace(trace_id)
        branches = dict(current.side_branches if current is not None else {})
        branches[state.branch] = SideBranchRecord(status=status, answer=answer, error=error, head_sequence=state.head)
        state.trace = await store.update_trace(trace_id, side_branches=branches)
        return state.trace
    # Protocol changes merge into the stored state: other steps of the tree may have written it.
    current = await store.get_trace(trace_id) if outcome.protocol else None
    new_protocol = with_protocol(current, outcome.protocol) if outcome.protocol and current is not None else None
    updates: dict[str, Any] = {"status": status, "head_sequence": state.head, "current_goal_id": state.goal_id}
    if answer is not None:
        updates["result_summary"] = answer
    if error is not None:
        updates["error_message"] = error
    goal = (await _root_goal_change(services, state, answer)
            if status == "completed" and state.root_goal_id is not None else None)
    if new_protocol is not None:
        updates["protocol"] = new_protocol
    finish = getattr(store, "end_trace", None)  # the built-in stores: the three writes below in one
    trace: Trace
    if finish is not None:
        trace = await finish(trace_id, updates, goal=goal)
    else:
        if goal is not None:
            await store.update_goal(trace_id, goal[0], **goal[1])
        trace = await store.update_trace(trace_id, **updates)
        if status == "completed":
            await store.append_event(trace_id, "trace_completed", {"trace_id": trace_id, "total_messages": trace.total_messages})
    state.trace = trace
    return trace


async def _root_goal_change(services: RunServices, state: RunState, answer: str | None) -> tuple[str, dict[str, Any]] | None:
    """The change a completed run makes to its root goal (id, fields), or None."""
    tree = await services.store.get_goal_tree(state.trace.trace_id)
    goal = tree.find(state.root_goal_id) if tree and state.root_goal_id else None
    first_line = _clip((answer or "").strip().splitlines()[0]) if (answer or "").strip() else ""
    if goal is not None and goal.status not in FINAL_GOAL_STATUSES:
        return goal.id, {"status": "completed", "summary": first_line}
    if goal is not None and goal.status == "completed" and goal.summary != first_line:
        # A revised run (review → revise) completes again: the goal shows the latest answer.
        return goal.id, {"summary": first_line}
    return None


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
