"""Limits of a recursive tree's resource budget (SPEC A10), as persisted on the root.

`ResourceBudget` is parsed once from the environment when a recursive root is created and
frozen into the root's `Trace.root_setup`; the controller that enforces it lives in
`cyber_agent/core/resource_budget.py` (which re-exports this model at the seed's path).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cyber_agent.errors import ConfigurationError
from cyber_agent.trace.clock import utc_now

__all__ = ["BUDGET_ENV", "ResourceBudget", "ResourceUsage"]

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


class ResourceUsage(BaseModel):
    """Live usage of a tree, persisted as the root's `resource_usage` side record (booked by `core/resource_budget.py`)."""

    model_config = ConfigDict(extra="ignore")

    agents: int = Field(default=1, ge=1)
    """Root plus local business descendants created (validators excluded)."""
    llm_calls: int = Field(default=0, ge=0)
    """Model calls reserved (agents and validators)."""
    root_validator_calls: int = Field(default=0, ge=0)
    """Of which by the root validator (may use the reserved final calls)."""
    prompt_tokens: int = Field(default=0, ge=0)
    """Input tokens booked."""
    completion_tokens: int = Field(default=0, ge=0)
    """Output tokens booked."""
    total_tokens: int = Field(default=0, ge=0)
    """Input plus output tokens booked."""
    cost_usd: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    """Model and search cost booked, in USD."""
    validation_tool_calls: int = Field(default=0, ge=0)
    """Controlled validator searches and page reads."""
    validation_material_chars: int = Field(default=0, ge=0)
    """Characters of material parsed by validators."""
    started_at: datetime = Field(default_factory=utc_now)
    """When the root's usage was initialised (the duration budget counts from here)."""
    updated_at: datetime = Field(default_factory=utc_now)
    """Last write."""
    unpriced_calls: int = Field(default=0, ge=0)
    """Model replies booked at $0 because their model has no price (the USD limit fails closed)."""
    last_refusal: str | None = None
    """Why the budget last refused (or flagged an overrun)."""
    refusals: int = Field(default=0, ge=0)
    """How many times the budget refused."""

    def elapsed_seconds(self) -> float:
        """Seconds since the usage record was initialised."""
        return (utc_now() - self.started_at).total_seconds()
