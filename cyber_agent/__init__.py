"""cyber_agent: run LLM agents and study what they did.

    from cyber_agent import AgentRunner, RunConfig, open_store

    runner = AgentRunner(trace_store=open_store("sqlite:///runs.db"))
    result = await runner.run_result([{"role": "user", "content": "..."}], RunConfig(model="demo"))

The front door: the names most programs need, from the packages below (docs/README.md "Start
here"). Every name is imported on first use (`__getattr__`): importing a leaf such as
`cyber_agent.trace.models` or `cyber_agent.llm.types` must not load the runner, httpx or the
providers.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cyber_agent._lazy import lazy_exports as _lazy_exports

# Quiet by default (the library convention): nothing of the `cyber_agent.*` loggers reaches
# stderr unless the application configures logging (`logging.basicConfig(level=logging.INFO)`
# shows retries, waits and stops; the CLI reads CYBER_AGENT_LOG).
logging.getLogger("cyber_agent").addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner, default_registry
    from cyber_agent.core.runner_api import RunResult
    from cyber_agent.tools.builtin import builtin_registry
    from cyber_agent.tools.context import ToolContext
    from cyber_agent.tools.registry import ToolRegistry, ToolResult
    from cyber_agent.trace.memory_store import InMemoryTraceStore
    from cyber_agent.trace.models import Message, Trace
    from cyber_agent.trace.protocol_records import RootTaskAnchor, TaskBrief
    from cyber_agent.trace.sqlite_store import SQLiteTraceStore
    from cyber_agent.trace.store import FileSystemTraceStore
    from cyber_agent.trace.store_url import open_store

__version__ = "0.1.0"

__all__ = [
    "AgentRunner",
    "FileSystemTraceStore",
    "InMemoryTraceStore",
    "Message",
    "RootTaskAnchor",
    "RunConfig",
    "RunResult",
    "SQLiteTraceStore",
    "TaskBrief",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "Trace",
    "builtin_registry",
    "default_registry",
    "open_store",
]

_LAZY: dict[str, tuple[str, ...]] = {
    "cyber_agent.core.config": ("RunConfig",),
    "cyber_agent.core.runner": ("AgentRunner", "default_registry",),
    "cyber_agent.core.runner_api": ("RunResult",),
    "cyber_agent.tools.builtin": ("builtin_registry",),
    "cyber_agent.tools.context": ("ToolContext",),
    "cyber_agent.tools.registry": ("ToolRegistry", "ToolResult",),
    "cyber_agent.trace.memory_store": ("InMemoryTraceStore",),
    "cyber_agent.trace.models": ("Message", "Trace",),
    "cyber_agent.trace.protocol_records": ("RootTaskAnchor", "TaskBrief",),
    "cyber_agent.trace.sqlite_store": ("SQLiteTraceStore",),
    "cyber_agent.trace.store": ("FileSystemTraceStore",),
    "cyber_agent.trace.store_url": ("open_store",),
}

__getattr__, __dir__ = _lazy_exports(globals(), _LAZY)
