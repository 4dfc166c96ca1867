"""Close tool calls a stop, an interrupt or a crash left without results, so every history is valid.

Providers refuse a history in which an assistant tool call has no result, has two, or a result
answers no call (OpenAI: "tool_calls ... must be followed by tool messages"; Anthropic: every
`tool_use` needs its `tool_result` in the next user turn). A run can leave such a history
behind: a stop between two calls of a batch, a crash while a tool ran, a rewind to the middle
of a batch. `history_of` turns any stored path into a valid provider history (each call answered
exactly once, in call order, right after its assistant message; orphan and duplicate results
dropped); `open_tail_calls` names the calls of the path's last batch that still need a result,
which `core/trace_setup.py` persists.

A call that had started and has no result may have had its side effects (`execution_unknown`);
one that never started was not run (`not_executed`). The start is recorded before the tool runs
as a `progress` event with stage `tool_call_started` (`core/turn_tools.py:execute_calls`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Literal

from cyber_agent.llm.types import ToolCall
from cyber_agent.trace.events import TraceEvent
from cyber_agent.trace.models import Message, MessageMetadata

__all__ = ["TOOL_CALL_STARTED", "OpenCall", "filler_result", "has_open_calls", "history_of", "open_tail_calls", "started_calls"]

TOOL_CALL_STARTED = "tool_call_started"
"""`progress` stage written just before a tool call runs (payload: `assistant_id`, `tool_call_id`, `tool`)."""

NOT_EXECUTED = "not executed: the run stopped before this call ran"
EXECUTION_UNKNOWN = ("execution unknown: the run ended while this call was running; it may or may not have taken "
                     "effect. Check its effects before calling it again")


@dataclass(frozen=True, kw_only=True)
class OpenCall:
    """A tool call of the path's last batch that has no result yet."""

    call: ToolCall
    """The call as the assistant message holds it."""
    outcome: Literal["not_executed", "execution_unknown"]
    """`execution_unknown` when the call had started, else `not_executed`."""


def started_calls(events: Iterable[TraceEvent]) -> set[tuple[str, str]]:
    """Return (assistant message id, tool call id) of every call whose start was recorded."""
    started: set[tuple[str, str]] = set()
    for event in events:
        payload = event.payload
        if event.type == "progress" and payload.get("stage") == TOOL_CALL_STARTED:
            started.add((str(payload.get("assistant_id")), str(payload.get("tool_call_id"))))
    return started


def _answered(path: Sequence[Message], start: int) -> set[str]:
    """Ids answered by the tool messages that follow `path[start]` up to the next non-tool message."""
    ids: set[str] = set()
    for message in path[start + 1:]:
        if message.role != "tool":
            break
        ids.add(str(message.tool_call_id))
    return ids


def _last_batch(path: Sequence[Message]) -> int | None:
    """Index of the assistant message whose batch ends the path (only tool messages after it), or None."""
    for index in range(len(path) - 1, -1, -1):
        message = path[index]
        if message.role == "assistant":
            return index if message.tool_calls else None
        if message.role != "tool":
            return None
    return None


def has_open_calls(path: Sequence[Message]) -> bool:
    """True when some assistant tool call of the path has no result right after its message."""
    return any(
        message.role == "assistant" and message.tool_calls
        and not {c.id for c in message.tool_calls} <= _answered(path, index)
        for index, message in enumerate(path)
    )


def open_tail_calls(path: Sequence[Message], started: AbstractSet[tuple[str, str]]) -> tuple[Message | None, list[OpenCall]]:
    """Return the assistant message of the path's last batch and its calls that have no result, in call order."""
    index = _last_batch(path)
    if index is None:
        return None, []
    assistant = path[index]
    answered = _answered(path, index)
    return assistant, [
        OpenCall(call=call, outcome="execution_unknown" if (assistant.message_id, call.id) in started else "not_executed")
        for call in assistant.tool_calls if call.id not in answered
    ]


def filler_result(assistant: Message, item: OpenCall, *, goal_id: str | None) -> Message:
    """The tool message that answers an open call: the outcome is unknown, or the call was not run."""
    unknown = item.outcome == "execution_unknown"
    return Message.create(
        trace_id=assistant.trace_id, role="tool", tool_call_id=item.call.id, tool_name=item.call.name, goal_id=goal_id,
        content=EXECUTION_UNKNOWN if unknown else NOT_EXECUTED,
        metadata=MessageMetadata(is_error=True, execution_unknown=True) if unknown else MessageMetadata(is_error=True, not_executed=True),
    )


def history_of(path: Sequence[Message], started: AbstractSet[tuple[str, str]] = frozenset()) -> list[dict[str, Any]]:
    """Return the provider history of a stored path with every tool call answered exactly once, in order.

    Results are taken from the tool messages right after their assistant message; a call without
    one gets a filler (unknown outcome when it had started), results answering no call of that
    message and second results of a call are left out.
    """
    out: list[dict[str, Any]] = []
    index = 0
    while index < len(path):
        message = path[index]
        index += 1
        if message.role == "tool":
            continue  # a result that follows no assistant call of its batch answers nothing
        out.append(message.to_llm_message())
        if message.role != "assistant" or not message.tool_calls:
            continue
        results: dict[str, Message] = {}
        while index < len(path) and path[index].role == "tool":
            results.setdefault(str(path[index].tool_call_id), path[index])
            index += 1
        for call in message.tool_calls:
            result = results.get(call.id)
            if result is None:
                outcome: Literal["not_executed", "execution_unknown"] = (
                    "execution_unknown" if (message.message_id, call.id) in started else "not_executed")
                result = filler_result(message, OpenCall(call=call, outcome=outcome), goal_id=message.goal_id)
            out.append(result.to_llm_message())
    return out
