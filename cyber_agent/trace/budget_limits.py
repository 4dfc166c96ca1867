"""Limits of a recursive tree's resource budget (SPEC A10), as persisted on the root.

`ResourceBudget` is parsed once from the environment when a recursive root is created and
frozen into the root's `Trace.root_setup`; the controller that enforces it lives in
`cyber_agent/core/resource_budget.py` (which re-exports this model at the seed's path).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from cyber_agent.errors import ConfigurationError

__all__ = ["BUDGET_ENV", "ResourceBudget"]

# env var -> (field, type)
BUDGET_ENV: dict[str, tuple[str, type]] = {
    "AGENT_RESOURCE_BUDGET_ENABLED": ("enabled", bool),
    "AGENT_MAX_TOTAL_AGENTS": ("max_total_agents", int),
    "AGENT_MAX_LLM_CALLS": ("max_llm_calls", int),
    "AGENT_MAX_TOTAL_TOKENS": ("max_total_tokens", int),
    "AGENT_MAX_TOTAL_COST_USD": ("max_total_cost_usd", float),
    "AGENT_MAX_DURATION_SECONDS": ("max_duration_seconds", float),
    "AGENT_MAX_VALIDATION_TOOL_CALLS": ("max_validation_tool_calls", int),
    "AGENT_MAX_VALIDATION_MATERIAL_CHARS": ("max_validation_material_chars", int),
    "AGENT_RESERVED_FINAL_CALLS": ("reserved_final_calls", int),
}


class ResourceBudget(BaseModel):
    """Immutable limits of one recursive tree."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    """False records usage without enforcing limits."""
    max_total_agents: int = 50
    """Root plus local business descendants (validators excluded)."""
    max_llm_calls: int = 150
    """Model calls of agents and validators."""
    max_total_tokens: int = 1_500_000
    """Input plus output tokens."""
    max_total_cost_usd: float = 15.0
    """Accumulated model cost in USD."""
    max_duration_seconds: float = 3600.0
    """Wall time from the root's usage initialisation."""
    max_validation_tool_calls: int = 300
    """Controlled validator searches and page reads."""
    max_validation_material_chars: int = 1_000_000
    """Characters of artifacts, search results and pages parsed by validators."""
    reserved_final_calls: int = 8
    """LLM calls kept for the root validator only."""

    @model_validator(mode="after")
    def _check(self) -> ResourceBudget:
        for env, (field, _) in BUDGET_ENV.items():
            value = getattr(self, field)
            if field != "enabled" and not (value > 0 and math.isfinite(value)):
                raise ConfigurationError(env, f"must be a positive finite number, got {value!r}")
        if self.reserved_final_calls >= self.max_llm_calls:
            raise ConfigurationError(
                "AGENT_RESERVED_FINAL_CALLS",
                f"must be smaller than AGENT_MAX_LLM_CALLS ({self.reserved_final_calls} >= {self.max_llm_calls})",
            )
        return self

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> ResourceBudget:
        """Parse the nine AGENT_* variables (defaults for unset ones); name the bad one on error."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, (field, kind) in BUDGET_ENV.items():
            raw = env.get(name)
            if raw is None or raw.strip() == "":
                continue
            text = raw.strip()
            if kind is bool:
                if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ConfigurationError(name, f"must be true or false, got {raw!r}")
                values[field] = text.lower() in ("true", "1", "yes")
                continue
            try:
                values[field] = kind(text)
            except ValueError:
                raise ConfigurationError(name, f"must be a positive {kind.__name__}, got {raw!r}") from None
        try:
            return cls(**values)
        except ValidationError as exc:
            cause = exc.errors()[0].get("ctx", {}).get("error")
            if isinstance(cause, ConfigurationError):
                raise cause from None
            raise
