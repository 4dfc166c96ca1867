"""What a run may do with shell tools: hide them, put every call before a reviewer, or run them.

    RunConfig.shell_tools ──► shell_policy_view(registry, policy) ──► the registry the run sees

A shell tool is a registered tool whose `category` is `"shell"` (`bash_command`, and its
self-healing wrapper). `off` leaves them out of the run's registry, so neither the model nor a
sub-agent can call them (a call gets the unknown-tool error); `confirm` makes each call wait
for a human decision (T8, the server's approval routes; a self-healing `bash_command` then
only reports a missing command, as when it is registered under approval); `allow` keeps them as registered (a
tool registered with `requires_confirmation` still waits). The policy is a run-config field, so
the trace's run-config snapshot records it and children inherit it.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Literal

from cyber_agent.tools.registry import ToolRegistry, ToolSpec

__all__ = ["SHELL_CATEGORY", "ShellPolicy", "shell_policy_view", "shell_tool_names"]

ShellPolicy = Literal["off", "confirm", "allow"]
"""Values of `RunConfig.shell_tools`."""
SHELL_CATEGORY = "shell"
"""The `ToolSpec.category` that marks a shell tool."""


def shell_tool_names(registry: ToolRegistry) -> list[str]:
    """Names of the registry's shell tools."""
    return [spec.name for spec in registry if spec.category == SHELL_CATEGORY]


def shell_policy_view(registry: ToolRegistry, policy: ShellPolicy) -> ToolRegistry:
    """The registry a run under `policy` sees (`registry` itself when nothing changes)."""
    shell = set(shell_tool_names(registry))
    if policy == "allow" or not shell:
        return registry
    if policy == "off":
        return ToolRegistry(spec for spec in registry if spec.name not in shell)
    return ToolRegistry(_confirmed(spec) if spec.name in shell else spec for spec in registry)


def _confirmed(spec: ToolSpec) -> ToolSpec:
    from cyber_agent.tools.builtin.self_heal import SelfHealingBash

    func = spec.func
    if isinstance(func, SelfHealingBash) and func.enabled:
        # A reviewer approves the command shown, never a polyfill written afterwards: detect, don't install.
        func = copy.copy(func)
        func.enabled = False
    return replace(spec, requires_confirmation=True, func=func)
