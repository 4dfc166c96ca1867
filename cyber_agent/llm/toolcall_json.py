"""Turn a provider's tool-call argument text into a ToolCall, never raising."""

from __future__ import annotations

import json
from typing import Any

from cyber_agent.llm.types import ToolCall

__all__ = ["parse_tool_arguments"]


def parse_tool_arguments(call_id: str, name: str, arguments: Any) -> ToolCall:
    """Parse JSON arguments; malformed JSON becomes a ToolCall carrying `parse_error`."""
    if arguments is None or arguments == "":
        return ToolCall(id=call_id, name=name, arguments={})
    if isinstance(arguments, dict):
        return ToolCall(id=call_id, name=name, arguments=arguments)
    text = str(arguments)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        why = f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
        return ToolCall(
            id=call_id, name=name, raw_arguments=text, incomplete=f"its {why}",
            parse_error=f"{why}; resend the call with a JSON object",
        )
    except (ValueError, RecursionError) as exc:
        # Valid-looking JSON can still fail: an integer over Python's digit limit (ValueError) or
        # nesting deeper than the recursion limit. A model can emit either; neither may crash the run.
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
        return ToolCall(
            id=call_id, name=name, raw_arguments=text,
            parse_error=f"arguments could not be decoded ({reason}); resend the call with a smaller JSON object",
        )
    if not isinstance(value, dict):
        return ToolCall(
            id=call_id, name=name, raw_arguments=text,
            parse_error=f"arguments must be a JSON object, got {type(value).__name__}; resend the call with a JSON object",
        )
    return ToolCall(id=call_id, name=name, arguments=value)
