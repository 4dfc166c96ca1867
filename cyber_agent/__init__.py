"""cyber_agent: run LLM agents and study what they did.

    from cyber_agent import AgentRunner, RunConfig
    from cyber_agent.trace import FileSystemTraceStore
"""

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner, RunResult

__all__ = ["AgentRunner", "RunConfig", "RunResult"]
__version__ = "0.1.0"
