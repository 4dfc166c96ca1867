"""Stop hooks and post-turn hooks (SPEC H8), and live progress events (H6).

Stop hooks are checked between iterations, before the next provider call; the first that
objects ends the run `stopped` with `"stop hook <name>: <reason>"` in the trace. Limits a reply
can overrun are checked again after the reply is booked and before any of its tools run
(`after_reply`), and per-call caps before each tool call (`admit_tool_call`): a refused call gets
an error result naming the cap and the run stops. Hook instances are the runner's, shared by
every run of it, children included: `UsdBudgetHook` sums the spend of a whole tree (keyed by the
root trace id) and fails closed on unpriced usage; `SideEffectRateHook` counts every run. Post-turn hooks
run after the run's final answer with a `TurnSnapshot`, in a background task owned by the runner
(`AgentRunner.drain_hooks` waits for them, bounded): a slow hook never delays the result and a
hook that raises never fails the run (its error is recorded as a `progress` event). Progress
events go to a live callback only (one that raises is reported once with `warnings.warn`): the
persisted `message_added` events already carry every tool result and its cost.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = [
    "CostLogHook",
    "LoopState",
    "MaxIterationsHook",
    "PostTurnHook",
    "ProgressEvent",
    "ProgressKind",
    "SideEffectRateHook",
    "StopHook",
    "TurnSnapshot",
    "UsdBudgetHook",
]


@dataclass(frozen=True, kw_only=True)
class LoopState:
    """What a stop hook sees before an iteration."""

    trace_id: str
    iteration: int
    """Iterations already done in this run (0 before the first model call)."""
    cost_usd: float
    """Cost of this run so far."""
    tool_calls: int
    """Tool calls executed in this run so far."""
    root_id: str = ""
    """Root trace id of the run's tree (the trace itself for a root run)."""


@runtime_checkable
class StopHook(Protocol):
    """Decide between iterations whether the run must stop; return a reason to stop it."""

    name: str

    def check(self, state: LoopState) -> str | None: ...

    def record_tool_call(self, name: str, side_effects: bool) -> None: ...


class _Base:
    name = "hook"

    def record_tool_call(self, name: str, side_effects: bool) -> None:
        """Observe an executed tool call (most hooks ignore it)."""

    def admit_tool_call(self, name: str, side_effects: bool) -> str | None:
        """Refuse one tool call before it runs (a per-call cap); None admits it."""
        return None

    def record_usage(self, root_id: str, cost_usd: float, *, unpriced: bool = False, model: str = "") -> None:
        """Observe a booked model reply of a run in the tree `root_id` (most hooks ignore it)."""

    def after_reply(self, state: LoopState) -> str | None:
        """Object to running a reply's tools because the reply overran a limit; None lets them run."""
        return None


UNPRICED_HELP = (
    "give the model a price: set CYBER_AGENT_PRICES to a TOML or JSON file mapping a model-name prefix to "
    '{"input": ..., "cached_input": ..., "output": ...} USD per million tokens (docs/harness.md)'
)
"""How to price a model the table lacks; part of every fail-closed error."""


class UsdBudgetHook(_Base):
    """Stop once the spend of the run's tree (the run and every descendant) reaches `max_usd`.

    The hook counts each tree's spend for its lifetime (keyed by root trace id), so a cap set
    for a run holds for the sub-agents under it; unpriced usage in the tree fails closed.
    """

    name = "usd_budget"

    def __init__(self, max_usd: float) -> None:
        if max_usd <= 0:
            raise ValueError(f"max_usd must be positive, got {max_usd}")
        self.max_usd = max_usd
        self._spent: dict[str, float] = {}
        self._unpriced: dict[str, str] = {}

    def record_usage(self, root_id: str, cost_usd: float, *, unpriced: bool = False, model: str = "") -> None:
        """Add a booked reply's cost to its tree; remember unpriced usage."""
        self._spent[root_id] = self._spent.get(root_id, 0.0) + max(cost_usd, 0.0)
        if unpriced:
            self._unpriced.setdefault(root_id, model or "a model")

    def tree_cost(self, root_id: str) -> float:
        """USD booked so far by the tree `root_id`."""
        return self._spent.get(root_id, 0.0)

    def check(self, state: LoopState) -> str | None:
        """Object when the tree's cost is at or over the budget, or when the tree has unpriced usage."""
        unpriced = self._unpriced.get(state.root_id)
        if unpriced is not None:
            return f"usage of {unpriced} has no price, so the budget of ${self.max_usd:.4f} cannot be enforced; {UNPRICED_HELP}"
        cost = max(state.cost_usd, self.tree_cost(state.root_id))
        if cost >= self.max_usd:
            return f"cost ${cost:.4f} reached the budget of ${self.max_usd:.4f} (the run and its sub-agents)"
        return None

    def after_reply(self, state: LoopState) -> str | None:
        """A reply can overrun the budget: object before its tools run."""
        return self.check(state)


class MaxIterationsHook(_Base):
    """Stop after `max_iterations` model turns (a hook-level cap below RunConfig.max_iterations)."""

    name = "max_iterations"

    def __init__(self, max_iterations: int) -> None:
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
        self.max_iterations = max_iterations

    def check(self, state: LoopState) -> str | None:
        """Object when the iteration count reached the cap."""
        if state.iteration >= self.max_iterations:
            return f"{state.iteration} iterations reached the cap of {self.max_iterations}"
        return None


class SideEffectRateHook(_Base):
    """A sliding one-hour cap on side-effecting tool calls, shared by every run of the runner."""

    name = "side_effects_per_hour"

    def __init__(self, max_per_hour: int, *, clock: Callable[[], float] = time.monotonic, window_s: float = 3600.0) -> None:
        if max_per_hour < 1:
            raise ValueError(f"max_per_hour must be >= 1, got {max_per_hour}")
        self.max_per_hour = max_per_hour
        self.window_s = window_s
        self._clock = clock
        self._calls: deque[float] = deque()

    def record_tool_call(self, name: str, side_effects: bool) -> None:
        """Count a side-effecting call."""
        if side_effects:
            self._calls.append(self._clock())

    def check(self, state: LoopState) -> str | None:
        """Object when the last hour holds `max_per_hour` side-effecting calls."""
        now = self._clock()
        while self._calls and now - self._calls[0] > self.window_s:
            self._calls.popleft()
        if len(self._calls) >= self.max_per_hour:
            return f"{len(self._calls)} side-effecting tool calls in the last hour reached the cap of {self.max_per_hour}"
        return None

    def admit_tool_call(self, name: str, side_effects: bool) -> str | None:
        """Refuse a side-effecting call once the last hour holds the cap (checked per call)."""
        return self.check(LoopState(trace_id="", iteration=0, cost_usd=0.0, tool_calls=0)) if side_effects else None


@dataclass(frozen=True, kw_only=True)
class TurnSnapshot:
    """A finished run as post-turn hooks see it."""

    trace_id: str
    status: str
    answer: str | None
    iterations: int
    tool_calls: list[str]
    duration_s: float
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    messages: list[dict[str, Any]] = field(default_factory=list)


@runtime_checkable
class PostTurnHook(Protocol):
    """Run after the reply; failures are recorded, never raised into the run."""

    name: str

    async def after_turn(self, snapshot: TurnSnapshot) -> None: ...


class CostLogHook:
    """Append one JSON line per finished run (cost, tokens, duration) to a log file."""

    name = "cost_log"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    async def after_turn(self, snapshot: TurnSnapshot) -> None:
        """Append the snapshot's accounting (without messages)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        row = {k: v for k, v in asdict(snapshot).items() if k != "messages"}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


ProgressKind = Literal["iteration", "text_delta", "tool_started", "tool_finished", "cost", "finished"]
"""What a progress notification reports."""


@dataclass(frozen=True, kw_only=True)
class ProgressEvent:
    """A live progress notification (not persisted)."""

    kind: ProgressKind
    trace_id: str
    iteration: int
    data: dict[str, Any] = field(default_factory=dict)
