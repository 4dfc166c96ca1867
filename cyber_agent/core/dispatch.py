"""Tool dispatch: run one tool call of a model turn and time it."""

from __future__ import annotations

import time
from dataclasses import dataclass

from cyber_agent.llm.types import ToolCall
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry, ToolResult

__all__ = ["DispatchOutcome", "run_tool_call"]


@dataclass(frozen=True, kw_only=True)
class DispatchOutcome:
    """The result of one tool call, ready to persist."""

    call: ToolCall
    """The call as the model made it."""
    result: ToolResult
    """What the tool returned (errors included)."""
    duration_ms: float
    """Wall time of the execution."""


async def run_tool_call(
    call: ToolCall, *, registry: ToolRegistry, allowed: frozenset[str], context: ToolContext
) -> DispatchOutcome:
    """Execute one call; malformed arguments and refused tools come back as error results."""
    started = time.perf_counter()
    if call.parse_error:
        result = ToolResult(content=f"error: tool {call.name!r}: {call.parse_error}", is_error=True)
    else:
        result = await registry.execute(call.name, call.arguments, allowed=allowed, context=context)
    return DispatchOutcome(call=call, result=result, duration_ms=(time.perf_counter() - started) * 1000)
