"""Pure rules of the trace stores: which fields an update may touch, copies, and counting a message.

Module-level helpers of `cyber_agent.trace.store_base.BaseTraceStore` (and `store.py`, which
reads the sequence announced by a `message_added` event). Nothing here does I/O or holds state.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from cyber_agent.errors import InvalidUpdateError
from cyber_agent.trace.goal_models import Goal, GoalTree
from cyber_agent.trace.models import Message, Trace

__all__: list[str] = []

_M = TypeVar("_M", bound=BaseModel)

_FINAL = frozenset({"completed", "failed", "stopped"})
# Totals are derived from the messages; total_messages is also the sequence counter.
_TRACE_DERIVED = frozenset(
    {"total_messages", "total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_tokens", "total_cost"}
)
_TRACE_FIELDS = frozenset(Trace.model_fields) - {"trace_id"} - _TRACE_DERIVED
# Identity, tree shape and the numbers already counted in totals and goal stats are fixed.
_MESSAGE_FIXED = frozenset({
    "message_id", "trace_id", "sequence", "parent_sequence", "branch",
    "goal_id", "prompt_tokens", "completion_tokens", "cached_tokens", "cost",
})
_MESSAGE_FIELDS = frozenset(Message.model_fields) - _MESSAGE_FIXED
_GOAL_FIELDS = frozenset(Goal.model_fields) - {"id", "self_stats", "cumulative_stats"}


def _copy(model: _M) -> _M:
    """Return an independent copy; a JSON round trip is several times cheaper than a deep copy."""
    return type(model).model_validate_json(model.model_dump_json())


def _assign(model: _M, updates: dict[str, Any], what: str) -> _M:
    """Return a shallow copy of `model` with `updates` validated and applied."""
    candidate = model.model_copy()
    try:
        for field, value in updates.items():
            type(model).__pydantic_validator__.validate_assignment(candidate, field, value)
    except ValidationError as exc:
        raise InvalidUpdateError(f"invalid update of {what}: {exc}") from None
    return candidate


def _check_counted_fields(message: Message) -> None:
    # Fields may have been reassigned without validation; a bad type must fail before any write.
    m = message.__dict__
    if not (type(m["prompt_tokens"]) is int and type(m["completion_tokens"]) is int
            and type(m["cached_tokens"]) is int and isinstance(m["cost"], (int, float))):
        raise InvalidUpdateError(
            f"message token counts must be int and cost a number, got {m['prompt_tokens']!r}, "
            f"{m['completion_tokens']!r}, {m['cached_tokens']!r} and {m['cost']!r}")
    if message.goal_id is not None and not isinstance(message.goal_id, str):
        raise InvalidUpdateError(f"message goal_id must be a string, got {message.goal_id!r}")


def _account(trace: Trace, tree: GoalTree, message: Message, now: datetime | None = None) -> list[Goal]:
    """Count a message in the totals and its goal's stats; return the goals whose stats changed.

    `now` stamps `updated_at`; without it (adopting a persisted message) the message's own
    creation time does, so every reader of the same files sees the same trace.
    """
    # Straight into __dict__: this runs on every add, and pydantic's __setattr__ costs ~0.5 us a
    # field. The values are ints and floats the store computed, so there is nothing to validate.
    totals, m = trace.__dict__, message.__dict__
    tokens = m["prompt_tokens"] + m["completion_tokens"]
    totals["total_messages"] = max(totals["total_messages"], m["sequence"])
    totals["total_prompt_tokens"] += m["prompt_tokens"]
    totals["total_completion_tokens"] += m["completion_tokens"]
    totals["total_cached_tokens"] += m["cached_tokens"]
    totals["total_tokens"] += tokens
    totals["total_cost"] += m["cost"]
    totals["updated_at"] = now or max(totals["updated_at"], m["created_at"])
    if m["branch"] is None:
        # The newest main-branch message is the head, also when it starts a branch after a rewind.
        totals["head_sequence"] = m["sequence"]
    goal_id = m["goal_id"]
    if goal_id is None or tree.stats_sequence >= m["sequence"] or tree.find(goal_id) is None:
        return []
    tree.__dict__["stats_sequence"] = m["sequence"]
    return tree.record_message(goal_id, tokens, m["cost"])


def _evented_sequence(payload: Mapping[str, Any]) -> int:
    message = payload.get("message")
    sequence = message.get("sequence") if isinstance(message, Mapping) else None
    return sequence if isinstance(sequence, int) else 0
