"""Prompt assembly: the system prompt is built once per trace and reused byte-for-byte (H2).

Nothing here may depend on the clock, randomness or dict ordering that can change between
turns: a changed byte invalidates the provider's prompt-cache prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["build_system_prompt", "initial_messages"]

_ROLE_LINES = {
    "main": "You are the main agent of this run. Plan with the `goal` tool, use tools to do the work, then answer.",
    "delegate": "You are a sub-agent. Complete the delegated task with your tools and answer with a concise result.",
    "explore": "You are a sub-agent exploring one option among several. Report what you found, concisely.",
}


def build_system_prompt(*, agent_type: str, tool_schemas: Sequence[dict[str, Any]], custom: str | None = None) -> str:
    """Return the system prompt for a new trace (custom text wins over the generated one)."""
    if custom is not None:
        return custom
    role = _ROLE_LINES.get(agent_type, f"You are a '{agent_type}' agent. Do the task with your tools, then answer.")
    names = [schema["function"]["name"] for schema in tool_schemas]
    lines = [
        "# cyber_agent",
        role,
        "",
        "## Working rules",
        "- Call tools when they help; each result comes back as a tool message.",
        "- When the task is done, reply with the final answer as plain text and no tool call.",
        "- Be precise: base every claim on tool results you have seen.",
    ]
    if names:
        lines += ["", "## Tools", ", ".join(names)]
    return "\n".join(lines)


def initial_messages(system_prompt: str, task_messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the first messages of a new trace: the system prompt, then the caller's messages."""
    out = [{"role": "system", "content": system_prompt}]
    out += [dict(m) for m in task_messages if m.get("role") != "system"]
    return out
