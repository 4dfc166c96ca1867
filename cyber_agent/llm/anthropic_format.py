"""Translate between OpenAI chat format (the runner's lingua franca) and the Anthropic Messages API."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cyber_agent.errors import LLMError
from cyber_agent.llm.toolcall_json import parse_tool_arguments
from cyber_agent.llm.usage_check import read_count
from cyber_agent.llm.types import ToolCall, Usage

__all__ = [
    "STOP_REASONS",
    "from_anthropic_content",
    "parse_anthropic_usage",
    "to_anthropic_messages",
    "to_anthropic_tools",
]

STOP_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
"""Anthropic stop reasons mapped onto OpenAI finish reasons, so the runner sees one vocabulary."""

_DATA_URL = re.compile(r"^data:(?P<media>[\w/+.-]+);base64,(?P<data>.*)$", re.DOTALL)


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        # Anthropic rejects empty text blocks; an empty string carries nothing anyway.
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, str):
            part = {"type": "text", "text": part}
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text" and str(part.get("text", "")).strip():
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            match = _DATA_URL.match(url)
            source = (
                {"type": "base64", "media_type": match["media"], "data": match["data"]}
                if match else {"type": "url", "url": url}
            )
            blocks.append({"type": "image", "source": source})
        elif kind in {"image", "document", "tool_use", "tool_result"}:
            blocks.append(dict(part))  # already Anthropic-shaped; pass through
    return blocks


def _plain_text(content: Any) -> str:
    return "\n".join(b["text"] for b in _text_blocks(content) if b["type"] == "text")


def _tool_use(call: Mapping[str, Any]) -> dict[str, Any]:
    fn = call.get("function") or {}
    parsed = parse_tool_arguments(call.get("id", ""), fn.get("name", ""), fn.get("arguments"))
    # Anthropic requires `input` to be an object; arguments that never parsed were already
    # answered with a tool error, so an empty object keeps the transcript valid.
    return {"type": "tool_use", "id": parsed.id, "name": parsed.name, "input": parsed.arguments}


def _tool_result(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):
        content = _text_blocks(content) or ""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.get("tool_call_id", ""), "content": content or ""}
    if message.get("is_error"):
        block["is_error"] = True  # a failed tool: the model must not read the text as a result
    return block


def to_anthropic_messages(messages: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """Return `(system, messages)` for the Messages API from OpenAI-format messages.

    System messages anywhere join the `system` string; assistant `tool_calls` become `tool_use`
    blocks; `tool` messages become `tool_result` blocks in a user turn; consecutive turns of
    the same role merge, because Anthropic requires alternating roles.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role in ("system", "developer"):
            text = _plain_text(message.get("content"))
            if text:
                system.append(text)
            continue
        if role == "user":
            target, blocks = "user", _text_blocks(message.get("content"))
        elif role == "assistant":
            blocks = _text_blocks(message.get("content"))
            blocks += [_tool_use(call) for call in message.get("tool_calls") or []]
            target = "assistant"
        elif role == "tool":
            target, blocks = "user", [_tool_result(message)]
        else:
            raise LLMError(f"message {index} has role {role!r}; expected system, user, assistant or tool")
        if not blocks:
            continue
        if turns and turns[-1]["role"] == target:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": target, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            # Anthropic wants tool results before any text in the turn that answers tool calls.
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return ("\n\n".join(system) or None), turns


def to_anthropic_tools(tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Translate OpenAI function-tool schemas into Anthropic tools (`input_schema`)."""
    result: list[dict[str, Any]] = []
    for tool in tools or []:
        fn = tool.get("function", tool)
        entry: dict[str, Any] = {
            "name": fn["name"],
            "input_schema": fn.get("parameters") or {"type": "object", "properties": {}},
        }
        if fn.get("description"):
            entry["description"] = fn["description"]
        result.append(entry)
    return result


def parse_anthropic_usage(raw: Mapping[str, Any] | None) -> Usage:
    """Read Anthropic usage: prompt = input + cache read + cache creation; cached = cache read.

    A count that cannot be booked (negative, non-finite, absurd) reads 0 and is named in `Usage.invalid`.
    """
    raw = raw or {}
    problems: list[str] = []
    cache_read = read_count(raw, "cache_read_input_tokens", problems)
    prompt = read_count(raw, "input_tokens", problems) + cache_read + read_count(raw, "cache_creation_input_tokens", problems)
    return Usage(prompt_tokens=prompt, completion_tokens=read_count(raw, "output_tokens", problems), cached_tokens=cache_read,
                 invalid="; ".join(problems) or None)


def from_anthropic_content(blocks: Sequence[Mapping[str, Any]]) -> tuple[str, list[ToolCall]]:
    """Return the joined text and the tool calls of an Anthropic `content` list."""
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        if block.get("type") == "text":
            text.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            calls.append(parse_tool_arguments(block.get("id", ""), block.get("name", ""), block.get("input")))
    return "".join(text), calls
