"""Tree-wide resource budget of a recursive task tree (SPEC A10).

`ResourceBudget` is parsed once from the environment when a recursive root is created and
frozen into the root's `Trace.root_setup` (the model lives in `trace/budget_limits.py`). Live
usage lives in the root's `resource_usage` side record. Every reservation and booking is ONE
atomic step of the store (`TraceStore.update_resource_usage`: the check and the write happen
under the root's writer lock, a file lock or a `BEGIN IMMEDIATE` transaction), so processes
sharing a tree through a SQLite or file store never exceed a limit between them. LLM calls are
reserved before the call; tokens and cost are booked after.
Nothing is refunded except agent reservations for children that were never created. Missing or
corrupt usage fails closed. A booking that changes nothing is not written. A booking is also
where a reply's overrun is found (tokens, cost, duration), before any of its tools run; a reply
with unpriced usage (a model without a price, `llm/pricing.py`) fails the USD limit closed.
"""

from __future__ import annotations

import math

import asyncio
from collections.abc import Callable


from cyber_agent.core.hooks import UNPRICED_HELP
from cyber_agent.errors import BudgetExceededError, RunError
from cyber_agent.trace.budget_limits import BUDGET_ENV, ResourceBudget, ResourceUsage
from cyber_agent.trace.models import utc_now
from cyber_agent.trace.protocols import TraceStore

__all__ = ["BUDGET_ENV", "ResourceBudget", "ResourceBudgetController", "ResourceUsage"]




class _Refusal(Exception):
    """A step refused: the refusal is counted in the same write, then raised as BudgetExceededError."""

    def __init__(self, resource: str, used: float, limit: float) -> None:
        super().__init__(resource)
        self.resource, self.used, self.limit = resource, used, limit


_Step = Callable[[ResourceUsage], bool]
"""Change the usage in place; return whether to write it (raise `_Refusal` to refuse)."""


class ResourceBudgetController:
    """Reserve, book and refuse against one root's budget, atomically across processes."""

    def __init__(self, *, store: TraceStore, root_trace_id: str, budget: ResourceBudget, lock: asyncio.Lock) -> None:
        self.store = store
        self.root_trace_id = root_trace_id
        self.budget = budget
        self._lock = lock  # orders this process's steps fairly; atomicity comes from the store

    async def initialize(self) -> ResourceUsage:
        """Write the initial usage of a new root (the root counts as one agent)."""
        usage = ResourceUsage()
        await self.store.replace_resource_usage(self.root_trace_id, usage)
        return usage

    def _require(self, usage: ResourceUsage | None) -> ResourceUsage:
        # The store parsed the record (an incomplete or invalid one raised CorruptRecordError: fail closed).
        if usage is None:
            raise RunError(
                f"resource usage of recursive root {self.root_trace_id!r} is missing; the tree cannot continue "
                "safely — start a new task"
            )
        return usage

    async def usage(self) -> ResourceUsage:
        """Return the persisted usage; fail closed when it is missing or corrupt."""
        return self._require(await self.store.get_resource_usage(self.root_trace_id))

    async def _atomically(self, step: _Step) -> ResourceUsage:
        """Run `step` on the persisted usage as one store step; a refusal is counted, then raised."""
        refused: list[_Refusal] = []
        result: list[ResourceUsage] = []

        def change(current: ResourceUsage | None) -> ResourceUsage | None:
            refused.clear()
            usage = self._require(current)
            try:
                write = step(usage)
            except _Refusal as refusal:
                usage.last_refusal = f"{refusal.resource}: used {refusal.used} of {refusal.limit}"
                usage.refusals += 1
                refused.append(refusal)
                write = True
            result[:] = [usage]
            if not write:
                return None
            usage.updated_at = utc_now()
            return usage

        async with self._lock:
            await self.store.update_resource_usage(self.root_trace_id, change)
        if refused:
            raise BudgetExceededError(refused[0].resource, refused[0].used, refused[0].limit)
        return result[0]

    def _exhausted(self, usage: ResourceUsage) -> tuple[str, float, float] | None:
        b = self.budget
        if usage.total_tokens >= b.max_total_tokens:
            return "tokens", usage.total_tokens, b.max_total_tokens
        if usage.cost_usd >= b.max_total_cost_usd:
            return "cost_usd", usage.cost_usd, b.max_total_cost_usd
        if usage.elapsed_seconds() >= b.max_duration_seconds:
            return "duration_seconds", round(usage.elapsed_seconds(), 3), b.max_duration_seconds
        return None

    def _refuse_if_exhausted(self, usage: ResourceUsage) -> None:
        exhausted = self._exhausted(usage)
        if exhausted is not None:
            raise _Refusal(*exhausted)

    async def reserve_llm_call(self, *, root_validator: bool = False) -> None:
        """Reserve one model call before it is made; the last calls are kept for the root validator."""
        def step(usage: ResourceUsage) -> bool:
            if self.budget.enabled:
                limit = self.budget.max_llm_calls - (0 if root_validator else self.budget.reserved_final_calls)
                if usage.llm_calls + 1 > limit:
                    raise _Refusal("llm_calls", usage.llm_calls, limit)
                self._refuse_if_exhausted(usage)
            usage.llm_calls += 1
            usage.root_validator_calls += int(root_validator)
            return True

        await self._atomically(step)

    async def book_llm_usage(
        self, *, prompt_tokens: int, completion_tokens: int, cost_usd: float, unpriced: bool = False,
    ) -> str | None:
        """Book tokens and cost after a call; return the exceeded resource if this response overran.

        Tokens, cost and wall time are all checked here: a reply that arrives after a limit passed
        overran it, and its tools must not run. Unpriced usage (`unpriced=True`) fails the USD
        limit closed. A call that reported no tokens and no cost changes nothing and is not
        written (unless the tree is over a limit, which is flagged).
        """
        overran: list[str] = []
        # Budgets never decrease: the provider boundary already replaced unsound usage, and
        # whatever still reaches here negative counts 0 and a non-finite cost fails the USD limit closed.
        prompt_tokens, completion_tokens = max(0, int(prompt_tokens)), max(0, int(completion_tokens))
        if not math.isfinite(cost_usd):
            cost_usd, unpriced = 0.0, True
        cost_usd = max(0.0, cost_usd)

        def step(usage: ResourceUsage) -> bool:
            overran.clear()
            spent = bool(prompt_tokens or completion_tokens or cost_usd or unpriced)
            usage.prompt_tokens += prompt_tokens
            usage.completion_tokens += completion_tokens
            usage.total_tokens += prompt_tokens + completion_tokens
            usage.cost_usd += cost_usd
            usage.unpriced_calls += int(unpriced)
            over = self._overrun(usage) if self.budget.enabled else None
            if over:
                usage.last_refusal = over
                usage.refusals += 1
                overran.append(over)
            return spent or bool(over)

        await self._atomically(step)
        return overran[0] if overran else None

    def _overrun(self, usage: ResourceUsage) -> str | None:
        b = self.budget
        if usage.total_tokens > b.max_total_tokens:
            return f"tokens: used {usage.total_tokens} of {b.max_total_tokens}"
        if usage.cost_usd > b.max_total_cost_usd:
            return f"cost_usd: used {usage.cost_usd:.4f} of {b.max_total_cost_usd}"
        if usage.unpriced_calls:
            return (f"cost_usd: {usage.unpriced_calls} model repl{'y' if usage.unpriced_calls == 1 else 'ies'} "
                    f"without a price cannot be held to {b.max_total_cost_usd}; {UNPRICED_HELP}")
        if usage.elapsed_seconds() >= b.max_duration_seconds:
            return f"duration_seconds: used {round(usage.elapsed_seconds(), 3)} of {b.max_duration_seconds}"
        return None

    async def reserve_agents(self, count: int) -> None:
        """Reserve `count` new agents for a batch, all or nothing."""
        def step(usage: ResourceUsage) -> bool:
            if self.budget.enabled:
                if usage.agents + count > self.budget.max_total_agents:
                    raise _Refusal("agents", usage.agents + count, self.budget.max_total_agents)
                self._refuse_if_exhausted(usage)
            usage.agents += count
            return True

        await self._atomically(step)

    async def release_agents(self, count: int) -> None:
        """Roll back agent reservations of children that were never created (the only refund)."""
        if count <= 0:
            return

        def step(usage: ResourceUsage) -> bool:
            usage.agents = max(1, usage.agents - count)
            return True

        await self._atomically(step)

    async def record_validation_work(self, *, tool_calls: int = 0, material_chars: int = 0, cost_usd: float = 0.0) -> None:
        """Count validator tool calls and material characters; refuse past the limits (nothing to count: no write)."""
        def step(usage: ResourceUsage) -> bool:
            b = self.budget
            if b.enabled:
                if usage.validation_tool_calls + tool_calls > b.max_validation_tool_calls:
                    raise _Refusal("validation_tool_calls", usage.validation_tool_calls + tool_calls,
                                   b.max_validation_tool_calls)
                if usage.validation_material_chars + material_chars > b.max_validation_material_chars:
                    raise _Refusal("validation_material_chars", usage.validation_material_chars + material_chars,
                                   b.max_validation_material_chars)
            if not (tool_calls or material_chars or cost_usd):
                return False
            usage.validation_tool_calls += tool_calls
            usage.validation_material_chars += material_chars
            usage.cost_usd += cost_usd
            return True

        await self._atomically(step)
