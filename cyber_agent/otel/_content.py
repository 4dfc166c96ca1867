"""Message content as the GenAI conventions shape it, opt-in and cut to size as valid JSON.

Content (prompts, answers, tool arguments and results, the protocol's texts) is off by default;
`ContentPolicy(capture=True)` turns it on. Every captured value is JSON text of at most
`max_chars` characters that still parses (`bounded_json`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cyber_agent.trace.models import Message

__all__ = ["DEFAULT_MAX_CONTENT_CHARS", "ContentPolicy", "bounded_json", "input_messages", "output_message",
           "system_instructions"]

DEFAULT_MAX_CONTENT_CHARS = 8192
_MIN_STRING = 16
_MARK = "…[truncated {n} chars]"


@dataclass(frozen=True, kw_only=True)
class ContentPolicy:
    """Whether content is exported, and the size of each captured value."""

    capture: bool = False
    """False (the default): only structure leaves the process, never a prompt or an answer."""
    max_chars: int = DEFAULT_MAX_CONTENT_CHARS
    """Upper bound of each captured attribute's JSON text."""

    def __post_init__(self) -> None:
        if self.max_chars < 64:
            raise ValueError(f"max_content_chars must be at least 64, got {self.max_chars}; "
                             f"the default is {DEFAULT_MAX_CONTENT_CHARS}")

    def text(self, value: str | None) -> str | None:
        """A free text cut to `max_chars` (None when content is off or there is no text)."""
        if not self.capture or value is None:
            return None
        return value if len(value) <= self.max_chars else _clip(value, self.max_chars)

    def texts(self, values: Sequence[str]) -> list[str] | None:
        """A list of free texts, each cut, or None when content is off."""
        if not self.capture:
            return None
        return [self.text(value) or "" for value in values]

    def json(self, value: Any) -> str | None:
        """`value` as bounded JSON text, or None when content is off."""
        return bounded_json(value, self.max_chars) if self.capture else None


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _clip(text: str, cap: int) -> str:
    mark = _MARK.format(n=len(text) - cap)
    return text[: max(cap - len(mark), 0)] + mark


def _clip_strings(value: Any, cap: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= cap else _clip(value, cap)
    if isinstance(value, list):
        return [_clip_strings(item, cap) for item in value]
    if isinstance(value, dict):
        return {key: _clip_strings(item, cap) for key, item in value.items()}
    return value


def bounded_json(value: Any, limit: int) -> str:
    """Return `value` as JSON text of at most `limit` characters that still parses.

    Strings are cut first (each to a shrinking cap, marked `…[truncated N chars]`); if that is not
    enough and `value` is a list, its oldest items go (the latest messages matter most). As the
    last resort the value's type is kept empty (`[]`, `{}`), or a string says how long it was.
    """
    text = _dumps(value)
    if len(text) <= limit:
        return text
    total = len(text)
    cap = limit
    while cap >= _MIN_STRING:
        clipped = _clip_strings(value, cap)
        text = _dumps(clipped)
        if len(text) <= limit:
            return text
        cap //= 2
    if isinstance(value, list):
        items = _clip_strings(value, _MIN_STRING)
        while len(items) > 1:
            items = items[1:]
            text = _dumps(items)
            if len(text) <= limit:
                return text
        return "[]"  # keeps the attribute's type: a reader expecting a list of messages still gets one
    if isinstance(value, dict):
        return "{}"
    fallback = _dumps(f"[truncated: {total} chars of JSON]")
    return fallback if len(fallback) <= limit else '""'


def _parts(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"type": "tool_call_response", "id": message.tool_call_id or "", "response": message.text}]
    parts: list[dict[str, Any]] = [{"type": "text", "content": message.text}] if message.text else []
    for call in message.tool_calls:
        parts.append({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments})
    return parts


def input_messages(history: Sequence[Message]) -> list[dict[str, Any]]:
    """The messages a model call saw, system prompt excluded, as `gen_ai.input.messages` items."""
    return [{"role": m.role, "parts": _parts(m)} for m in history if m.role != "system"]


def output_message(message: Message) -> list[dict[str, Any]]:
    """The reply as `gen_ai.output.messages` (one item; the finish reason is derived, not stored)."""
    reason = "tool_call" if message.tool_calls else "stop"
    return [{"role": "assistant", "parts": _parts(message), "finish_reason": reason}]


def system_instructions(history: Sequence[Message]) -> list[dict[str, Any]]:
    """The system prompt(s) of a call as `gen_ai.system_instructions` parts."""
    return [{"type": "text", "content": m.text} for m in history if m.role == "system" and m.text]
