"""Test helper: the history rules OpenAI and Anthropic enforce on a request.

`openai_problems` checks an OpenAI-format history (what the runner sends); `anthropic_problems`
checks the request `cyber_agent/llm/anthropic_format.py:to_anthropic_messages` builds from it.
Each returns the list of rules broken (empty when the provider would accept the history).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cyber_agent.llm.anthropic_format import to_anthropic_messages


def openai_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Each assistant tool call answered exactly once, in call order, right after its message; no orphans."""
    problems: list[str] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        role = message.get("role")
        if role == "tool":
            problems.append(f"message {index - 1}: tool result {message.get('tool_call_id')!r} follows no call")
            continue
        calls = [str(c["id"]) for c in message.get("tool_calls") or []] if role == "assistant" else []
        if len(set(calls)) != len(calls):
            problems.append(f"message {index - 1}: duplicate call ids {calls}")
        answered: list[str] = []
        while index < len(messages) and messages[index].get("role") == "tool":
            answered.append(str(messages[index].get("tool_call_id")))
            index += 1
        if answered != calls:
            problems.append(f"message {index - 1}: calls {calls} answered by {answered}")
    return problems


def anthropic_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Roles alternate from a user turn; each tool_use answered once, in order, first in the next user turn."""
    _, turns = to_anthropic_messages(messages)
    problems: list[str] = []
    if not turns or turns[0]["role"] != "user":
        problems.append("the first turn is not a user turn")
    if turns and turns[-1]["role"] != "user":
        problems.append("the request does not end with a user turn")
    previous_uses: list[str] = []
    for index, turn in enumerate(turns):
        if index and turn["role"] == turns[index - 1]["role"]:
            problems.append(f"turn {index}: two {turn['role']} turns in a row")
        if not turn["content"]:
            problems.append(f"turn {index}: empty content")
        blocks = turn["content"]
        if turn["role"] == "assistant":
            if any(b["type"] == "tool_result" for b in blocks):
                problems.append(f"turn {index}: tool_result in an assistant turn")
            previous_uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
            continue
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        leading = [b["tool_use_id"] for b in blocks[: len(results)] if b["type"] == "tool_result"]
        if leading != results:
            problems.append(f"turn {index}: tool results are not first in the turn")
        if results != previous_uses:
            problems.append(f"turn {index}: tool_use {previous_uses} answered by {results}")
        previous_uses = []
    if previous_uses:
        problems.append(f"end: tool_use {previous_uses} without results")
    return problems


def history_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Both providers' rules."""
    return [f"openai: {p}" for p in openai_problems(messages)] + [f"anthropic: {p}" for p in anthropic_problems(messages)]
