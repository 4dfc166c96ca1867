"""Core: the `AgentRunner` loop and what it composes — run state, turns, tool dispatch, prompt
assembly, child runs, budgets, approvals, hooks, harness, archetypes, triage.

Start with `AgentRunner` and `RunConfig`. Every name below is imported on first use
(`__getattr__`), so importing one module of `core/` never loads the runner. The rule for what
is public: the names in `__all__` of a package's `__init__`; modules are implementation, named
in the docs where a reader needs them (`tests/test_front_door.py` checks the exports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cyber_agent._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from cyber_agent.core.archetypes import AgentDefinition, ArchetypeRegistry
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.hooks import CostLogHook, MaxIterationsHook, PostTurnHook, ProgressEvent, SideEffectRateHook, StopHook, UsdBudgetHook
    from cyber_agent.core.resource_budget import ResourceBudget, ResourceBudgetController
    from cyber_agent.core.runner import AgentRunner, default_registry
    from cyber_agent.core.runner_api import RunEvent, RunResult, RunnerHandle
    from cyber_agent.core.stop import StopRegistry
    from cyber_agent.core.tool_maker import LLMToolMaker

__all__ = [
    "AgentDefinition",
    "AgentRunner",
    "ArchetypeRegistry",
    "CostLogHook",
    "LLMToolMaker",
    "MaxIterationsHook",
    "PostTurnHook",
    "ProgressEvent",
    "ResourceBudget",
    "ResourceBudgetController",
    "RunConfig",
    "RunEvent",
    "RunResult",
    "RunnerHandle",
    "SideEffectRateHook",
    "StopHook",
    "StopRegistry",
    "UsdBudgetHook",
    "default_registry",
]

_LAZY: dict[str, tuple[str, ...]] = {
    "cyber_agent.core.archetypes": ("AgentDefinition", "ArchetypeRegistry",),
    "cyber_agent.core.config": ("RunConfig",),
    "cyber_agent.core.hooks": ("CostLogHook", "MaxIterationsHook", "PostTurnHook", "ProgressEvent", "SideEffectRateHook", "StopHook", "UsdBudgetHook",),
    "cyber_agent.core.resource_budget": ("ResourceBudget", "ResourceBudgetController",),
    "cyber_agent.core.runner": ("AgentRunner", "default_registry",),
    "cyber_agent.core.runner_api": ("RunEvent", "RunResult", "RunnerHandle",),
    "cyber_agent.core.stop": ("StopRegistry",),
    "cyber_agent.core.tool_maker": ("LLMToolMaker",),
}

__getattr__, __dir__ = _lazy_exports(globals(), _LAZY)
