"""The model-backed tool maker of self-healing bash (SPEC H12): the `tool_maker` archetype writes a polyfill.

`cyber_agent/tools/builtin/self_heal.py:SelfHealingBash` takes any `PolyfillMaker`; this one
asks a model with the archetype's prompt, so it lives with the archetypes in `core/`.
"""

from __future__ import annotations

from cyber_agent.core.archetypes import AgentDefinition, ArchetypeRegistry
from cyber_agent.llm.types import LLMCall, LLMResponse
from cyber_agent.tools.builtin.self_heal import extract_script

__all__ = ["LLMToolMaker"]


class LLMToolMaker:
    """A `PolyfillMaker` that asks a model, with the `tool_maker` archetype's prompt."""

    def __init__(self, llm: LLMCall, model: str, *, definition: AgentDefinition | None = None) -> None:
        self._llm = llm
        self._model = model
        self.definition = definition or ArchetypeRegistry.load().require("tool_maker")
        """The archetype whose prompt is the system prompt (pass a workspace override to change it)."""

    async def __call__(self, command_name: str, error: str) -> str | None:
        """Ask the model for a polyfill of `command_name`; None when it declines or answers no script."""
        messages = [
            {"role": "system", "content": self.definition.prompt},
            {"role": "user", "content": f"Missing command: {command_name}\n\nWhat happened:\n{error}\n\n"
                                        f"Write the polyfill script for `{command_name}`."},
        ]
        response = LLMResponse.coerce(await self._llm(messages, self._model, None, 0.0))
        return extract_script(response.content)
