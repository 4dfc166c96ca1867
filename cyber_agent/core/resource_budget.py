"""Tree-wide resource budget of a recursive task tree (SPEC A10).

`ResourceBudget` is parsed once from the environment when a recursive root is created and
frozen into the root's `Trace.root_setup` (the model lives in `trace/budget_limits.py`). Live usage lives in the root's `resource_usage.json`, read and
replaced through `TraceStore.get_resource_usage` / `replace_resource_usage` under one asyncio
lock per root. LLM calls are reserved before the call; tokens and cost are booked after.
Nothing is refunded except agent reservations for children that were never created. Missing or
corrupt usage fails closed. A booking that changes nothing is not written. A booking is also
where a reply's overrun is found (tokens, cost, duration), before any of its tools run; a reply
with unpriced usage (a model without a price, `llm/pricing.py`) fails the USD limit closed.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cyber_agent.core.hooks import UNPRICED_HELP
from cyber_agent.errors import BudgetExceededError, CorruptRecordError, RunError
from cyber_agent.trace.budget_limits import BUDGET_ENV, ResourceBudget
from cyber_agent.trace.models import utc_now
from cyber_agent.trace.protocols import TraceStore

__all__ = ["BUDGET_ENV", "ResourceBudget", "ResourceBudgetController", "ResourceUsage"]


class ResourceUsage(BaseModel):
    """Live usage of a tree, persisted as the root's `resource_usage.json`."""

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


_ADDED_FIELDS = frozenset({"unpriced_calls"})
"""Fields added after records were first written: an older record without them is not corrupt."""


class ResourceBudgetController:
    """Reserve, book and refuse against one root's budget, atomically within this process."""

    def __init__(self, *, store: TraceStore, root_trace_id: str, budget: ResourceBudget, lock: asyncio.Lock) -> None:
        self.store = store
        self.root_trace_id = root_trace_id
        self.budget = budget
        self._lock = lock

    async def initialize(self) -> ResourceUsage:
        """Write the initial usage of a new root (the root counts as one agent)."""
        usage = ResourceUsage()
        await self._save(usage)
        return usage

    async def usage(self) -> ResourceUsage:
        """Return the persisted usage; fail closed when it is missing or corrupt."""
        raw = await self.store.get_resource_usage(self.root_trace_id)
        if raw is None:
            raise RunError(
                f"resource usage of recursive root {self.root_trace_id!r} is missing; the tree cannot continue "
                "safely — start a new task"
            )
        where = f"{self.root_trace_id}/resource_usage.json"
        # Defaults would silently reset a truncated record to zero usage: every field must be there.
        missing = sorted(set(ResourceUsage.model_fields) - set(raw) - _ADDED_FIELDS)
        if missing:
            raise CorruptRecordError(where, f"usage record lacks {', '.join(missing)}; the tree cannot continue safely")
        try:
            return ResourceUsage.model_validate(raw)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(p) for p in error["loc"])
            raise CorruptRecordError(where, f"invalid usage record: {field}: {error['msg']}") from None

    async def _save(self, usage: ResourceUsage) -> None:
        usage.updated_at = utc_now()
        await self.store.replace_resource_usage(self.root_trace_id, usage.model_dump(mode="json"))

    async def _refuse(self, usage: ResourceUsage, resource: str, used: float, limit: float) -> None:
        usage.last_refusal = f"{resource}: used {used} of {limit}"
        usage.refusals += 1
        await self._save(usage)
        raise BudgetExceededError(resource, used, limit)

    def _exhausted(self, usage: ResourceUsage) -> tuple[str, float, float] | None:
        b = self.budget
        if usage.total_tokens >= b.max_total_tokens:
            return "tokens", usage.total_tokens, b.max_total_tokens
        if usage.cost_usd >= b.max_total_cost_usd:
            return "cost_usd", usage.cost_usd, b.max_total_cost_usd
        if usage.elapsed_seconds() >= b.max_duration_seconds:
            return "duration_seconds", round(usage.elapsed_seconds(), 3), b.max_duration_seconds
        return None

    async def reserve_llm_call(self, *, root_validator: bool = False) -> None:
        """Reserve one model call before it is made; the last calls are kept for the root validator."""
        async with self._lock:
            usage = await self.usage()
            if self.budget.enabled:
                limit = self.budget.max_llm_calls - (0 if root_validator else self.budget.reserved_final_calls)
                if usage.llm_calls + 1 > limit:
                    await self._refuse(usage, "llm_calls", usage.llm_calls, limit)
                exhausted = self._exhausted(usage)
                if exhausted is not None:
                    await self._refuse(usage, *exhausted)
            usage.llm_calls += 1
            usage.root_validator_calls += int(root_validator)
            await self._save(usage)

    async def book_llm_usage(
        self, *, prompt_tokens: int, completion_tokens: int, cost_usd: float, unpriced: bool = False,
    ) -> str | None:
        """Book tokens and cost after a call; return the exceeded resource if this response overran.

        Tokens, cost and wall time are all checked here: a reply that arrives after a limit passed
        overran it, and its tools must not run. Unpriced usage (`unpriced=True`) fails the USD
        limit closed. A call that reported no tokens and no cost changes nothing and is not
        written (unless the tree is over a limit, which is flagged).
        """
        async with self._lock:
            usage = await self.usage()
            spent = bool(prompt_tokens or completion_tokens or cost_usd or unpriced)
            usage.prompt_tokens += prompt_tokens
            usage.completion_tokens += completion_tokens
            usage.total_tokens += prompt_tokens + completion_tokens
            usage.cost_usd += cost_usd
            usage.unpriced_calls += int(unpriced)
            over = None
            if self.budget.enabled:
                if usage.total_tokens > self.budget.max_total_tokens:
                    over = f"tokens: used {usage.total_tokens} of {self.budget.max_total_tokens}"
                elif usage.cost_usd > self.budget.max_total_cost_usd:
                    over = f"cost_usd: used {usage.cost_usd:.4f} of {self.budget.max_total_cost_usd}"
                elif usage.unpriced_calls:
                    over = (f"cost_usd: {usage.unpriced_calls} model repl{'y' if usage.unpriced_calls == 1 else 'ies'} "
                            f"without a price cannot be held to {self.budget.max_total_cost_usd}; {UNPRICED_HELP}")
                elif usage.elapsed_seconds() >= self.budget.max_duration_seconds:
                    over = (f"duration_seconds: used {round(usage.elapsed_seconds(), 3)} "
                            f"of {self.budget.max_duration_seconds}")
                if over:
                    usage.last_refusal = over
                    usage.refusals += 1
            if spent or over:
                await self._save(usage)
            return over

    async def reserve_agents(self, count: int) -> None:
        """Reserve `count` new agents for a batch, all or nothing."""
        async with self._lock:
            usage = await self.usage()
            if self.budget.enabled:
                if usage.agents + count > self.budget.max_total_agents:
                    await self._refuse(usage, "agents", usage.agents + count, self.budget.max_total_agents)
                exhausted = self._exhausted(usage)
                if exhausted is not None:
                    await self._refuse(usage, *exhausted)
            usage.agents += count
            await self._save(usage)

    async def release_agents(self, count: int) -> None:
        """Roll back agent reservations of children that were never created (the only refund)."""
        if count <= 0:
            return
        async with self._lock:
            usage = await self.usage()
            usage.agents = max(1, usage.agents - count)
            await self._save(usage)

    async def record_validation_work(self, *, tool_calls: int = 0, material_chars: int = 0, cost_usd: float = 0.0) -> None:
        """Count validator tool calls and material characters; refuse past the limits (nothing to count: no write)."""
        async with self._lock:
            usage = await self.usage()
            if self.budget.enabled:
                if usage.validation_tool_calls + tool_calls > self.budget.max_validation_tool_calls:
                    await self._refuse(usage, "validation_tool_calls", usage.validation_tool_calls + tool_calls,
                                       self.budget.max_validation_tool_calls)
                if usage.validation_material_chars + material_chars > self.budget.max_validation_material_chars:
                    await self._refuse(usage, "validation_material_chars", usage.validation_material_chars + material_chars,
                                       self.budget.max_validation_material_chars)
            if tool_calls or material_chars or cost_usd:
                usage.validation_tool_calls += tool_calls
                usage.validation_material_chars += material_chars
                usage.cost_usd += cost_usd
                await self._save(usage)
