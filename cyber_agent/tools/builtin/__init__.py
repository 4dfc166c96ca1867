"""Built-in tools: goal, read_file, list_files, bash_command, evaluate.

`builtin_registry()` returns a fresh ToolRegistry holding them. The `agent` tool lives in
`cyber_agent/protocol/agent_tool.py` and is added by the runner's setup with
`register_agent_tool(registry)`, because it depends on the runner.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cyber_agent.errors import UnknownToolError
from cyber_agent.tools.builtin.bash import bash_command
from cyber_agent.tools.builtin.evaluate import evaluate
from cyber_agent.tools.builtin.files import list_files, read_file
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.goal_tool import goal

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "bash_command",
    "builtin_registry",
    "evaluate",
    "goal",
    "list_files",
    "read_file",
    "register_builtins",
]

BUILTIN_TOOL_NAMES: tuple[str, ...] = ("goal", "read_file", "list_files", "bash_command", "evaluate")
"""Names of the built-in tools, in registration order (`agent` is registered separately)."""


def register_builtins(
    registry: ToolRegistry, include: Iterable[str] | None = None, *, confirm: Iterable[str] = (),
) -> ToolRegistry:
    """Register the built-in tools (all, or those in `include`) on `registry` and return it.

    Tools named in `confirm` get `requires_confirmation=True` (T8); a confirmed bash_command
    lets the reviewer edit `command` and `timeout`.
    """
    wanted = set(BUILTIN_TOOL_NAMES if include is None else include)
    confirmed = set(confirm)
    for name in sorted((wanted | confirmed) - set(BUILTIN_TOOL_NAMES)):
        raise UnknownToolError(name, list(BUILTIN_TOOL_NAMES))

    def approval(name: str, editable: tuple[str, ...] = ()) -> dict[str, Any]:
        on = name in confirmed
        return {"requires_confirmation": on, "editable_params": editable if on else ()}

    if "goal" in wanted:
        registry.register(goal, category="planning", **approval("goal"))
    if "read_file" in wanted:
        registry.register(read_file, category="files", **approval("read_file"))
    if "list_files" in wanted:
        registry.register(list_files, category="files", **approval("list_files"))
    if "bash_command" in wanted:
        # Side effects: a crash mid-command leaves the world changed (T8 `execution_unknown`).
        registry.register(bash_command, side_effects=True, category="shell",
                          **approval("bash_command", ("command", "timeout")))
    if "evaluate" in wanted:
        registry.register(evaluate, category="compute", **approval("evaluate"))
    return registry


def builtin_registry(include: Iterable[str] | None = None, *, confirm: Iterable[str] = ()) -> ToolRegistry:
    """Return a new registry with the built-in tools (all, or those named in `include`)."""
    return register_builtins(ToolRegistry(), include, confirm=confirm)
