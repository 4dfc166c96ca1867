"""Tools: the registry, the context injected into tools, and the built-in tools.

The built-ins live in `cyber_agent.tools.builtin` (not re-exported here, so importing the
registry never pulls in the runner through `agent()`).
"""

from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry, ToolResult, ToolSpec, render_tool_output

__all__ = ["ToolContext", "ToolRegistry", "ToolResult", "ToolSpec", "render_tool_output"]
