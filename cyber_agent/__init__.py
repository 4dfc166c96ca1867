"""cyber_agent: run LLM agents and study what they did.

    from cyber_agent import AgentRunner, RunConfig
    from cyber_agent.trace import FileSystemTraceStore

The runner is imported on first use (`__getattr__`): importing a leaf such as
`cyber_agent.trace.models` or `cyber_agent.llm.types` must not load the runner, httpx or the
providers.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

# Quiet by default (the library convention): nothing of the `cyber_agent.*` loggers reaches
# stderr unless the application configures logging (`logging.basicConfig(level=logging.INFO)`
# shows retries, waits and stops; the CLI reads CYBER_AGENT_LOG).
logging.getLogger("cyber_agent").addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner, RunResult

__all__ = ["AgentRunner", "RunConfig", "RunResult"]
__version__ = "0.1.0"

_ORIGIN = {"AgentRunner": "cyber_agent.core.runner", "RunConfig": "cyber_agent.core.config",
           "RunResult": "cyber_agent.core.runner"}


def __getattr__(name: str) -> Any:
    """Import a re-exported name from its module on first use."""
    module = _ORIGIN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
