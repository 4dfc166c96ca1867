"""Goal and GoalTree (SPEC T5, T6): a per-trace plan with stats and completion rules.

The tree is stored flat (each goal names its `parent_id`). Ids are dense integers as strings,
allocated per trace. `self_stats` counts the messages recorded under a goal;
`cumulative_stats` adds those of every descendant.

Cascade completion (a parent completes when all its children have) is legacy behaviour;
recursive trees switch it off with `cascade_completion=False` so the parent reviews first.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from cyber_agent.errors import GoalError, GoalNotFoundError
from cyber_agent.trace.models import utc_now

__all__ = ["FINAL_GOAL_STATUSES", "Goal", "GoalStats", "GoalStatus", "GoalTree", "GoalType"]

GoalStatus = Literal[
    "pending", "in_progress", "completed", "abandoned", "failed", "waiting_children", "pending_review"
]
GoalType = Literal["normal", "agent_call"]
FINAL_GOAL_STATUSES: frozenset[str] = frozenset({"completed", "abandoned", "failed"})


class GoalStats(BaseModel):
    """Message count, tokens and cost recorded under a goal."""

    message_count: int = 0
    """Messages recorded."""
    total_tokens: int = 0
    """Input plus output tokens."""
    total_cost: float = 0.0
    """USD cost."""

    def add(self, tokens: int, cost: float) -> None:
        """Count one more message."""
        # Straight into __dict__: pydantic's __setattr__ costs ~0.5 us a field, and this runs
        # for the goal and every ancestor on every message.
        fields = self.__dict__
        fields["message_count"] += 1
        fields["total_tokens"] += tokens
        fields["total_cost"] += cost


class Goal(BaseModel):
    """One step of a plan."""

    id: str
    """Dense integer id within the trace, as a string."""
    description: str
    """What the step achieves."""
    reason: str | None = None
    """Why the step exists."""
    parent_id: str | None = None
    """Parent goal; None for top-level goals."""
    type: GoalType = "normal"
    """`agent_call` when the goal delegates to sub-agents."""
    status: GoalStatus = "pending"
    """Lifecycle state."""
    summary: str | None = None
    """Outcome summary when done or abandoned."""
    sub_trace_ids: list[str] = Field(default_factory=list)
    """Sub-traces started for this goal."""
    self_stats: GoalStats = Field(default_factory=GoalStats)
    """Messages recorded directly under this goal."""
    cumulative_stats: GoalStats = Field(default_factory=GoalStats)
    """This goal's and all descendants' messages."""
    created_at: datetime = Field(default_factory=utc_now)
    """Creation time (UTC)."""
    completed_at: datetime | None = None
    """When the goal reached a final status."""


class GoalTree(BaseModel):
    """The flat goal list of one trace, with focus and completion rules."""

    mission: str | None = None
    """The trace's task, shown above the plan."""
    goals: list[Goal] = Field(default_factory=list)
    """All goals in creation order."""
    current_id: str | None = None
    """Goal in focus."""
    cascade_completion: bool = True
    """Legacy: complete a parent when all its children complete, and move focus to the next sibling."""
    next_id: int = 1
    """Next goal id to allocate."""
    stats_sequence: int = 0
    """Highest message sequence already counted in the stats (keeps crash recovery exact)."""

    def find(self, goal_id: str | None) -> Goal | None:
        """Return the goal with this id, or None."""
        if goal_id is None:
            return None
        for goal in self.goals:
            if goal.id == goal_id:
                return goal
        return None

    def get(self, goal_id: str, trace_id: str = "") -> Goal:
        """Return the goal with this id or raise GoalNotFoundError."""
        goal = self.find(goal_id)
        if goal is None:
            raise GoalNotFoundError(trace_id, goal_id)
        return goal

    def children(self, goal_id: str | None) -> list[Goal]:
        """Direct children of `goal_id` (top-level goals for None)."""
        return [g for g in self.goals if g.parent_id == goal_id]

    def ancestors(self, goal_id: str) -> list[Goal]:
        """The goal itself and its ancestors, nearest first."""
        chain: list[Goal] = []
        seen: set[str] = set()
        goal = self.find(goal_id)
        while goal is not None and goal.id not in seen:
            chain.append(goal)
            seen.add(goal.id)
            goal = self.find(goal.parent_id)
        return chain

    def depth(self, goal_id: str) -> int:
        """0 for a top-level goal."""
        return len(self.ancestors(goal_id)) - 1

    def add(
        self, description: str, *, parent_id: str | None = None, reason: str | None = None,
        type: GoalType = "normal", after_id: str | None = None,
    ) -> Goal:
        """Add a goal under `parent_id` (or after sibling `after_id`) and return it."""
        description = description.strip()
        if not description:
            raise GoalError("a goal needs a non-empty description")
        if after_id is not None:
            anchor = self.find(after_id)
            if anchor is None:
                raise GoalError(f"cannot add after goal {after_id!r}: no such goal; existing ids: {self._ids()}")
            parent_id = anchor.parent_id
        elif parent_id is not None and self.find(parent_id) is None:
            raise GoalError(f"cannot add under goal {parent_id!r}: no such goal; existing ids: {self._ids()}")
        goal = Goal(id=str(self.next_id), description=description, reason=reason, parent_id=parent_id, type=type)
        self.next_id += 1
        if after_id is not None:
            index = self._subtree_end(after_id)
            self.goals.insert(index, goal)
        else:
            self.goals.append(goal)
        return goal

    def insert(self, goal: Goal) -> None:
        """Insert a goal built elsewhere, keeping id allocation dense and unique."""
        if self.find(goal.id) is not None:
            raise GoalError(f"goal id {goal.id!r} already exists")
        if goal.parent_id is not None and self.find(goal.parent_id) is None:
            raise GoalError(f"parent goal {goal.parent_id!r} of goal {goal.id!r} does not exist")
        self.goals.append(goal)
        if goal.id.isdigit():
            self.next_id = max(self.next_id, int(goal.id) + 1)

    def set_status(self, goal_id: str, status: GoalStatus, summary: str | None = None) -> list[Goal]:
        """Change a goal's status; return every goal changed (including cascaded parents)."""
        goal = self.get(goal_id)
        goal.status = status
        if summary is not None:
            goal.summary = summary
        goal.completed_at = utc_now() if status in FINAL_GOAL_STATUSES else None
        changed = [goal]
        if status == "completed" and self.cascade_completion:
            changed += self._cascade(goal)
        return changed

    def _cascade(self, goal: Goal) -> list[Goal]:
        changed: list[Goal] = []
        parent = self.find(goal.parent_id)
        while parent is not None and parent.status not in FINAL_GOAL_STATUSES:
            siblings = self.children(parent.id)
            if not all(s.status in ("completed", "abandoned") for s in siblings):
                break
            if not any(s.status == "completed" for s in siblings):
                break
            parent.status = "completed"
            parent.completed_at = utc_now()
            changed.append(parent)
            parent = self.find(parent.parent_id)
        return changed

    def next_open(self, after: Goal) -> Goal | None:
        """The next goal to focus after `after` finished: a pending sibling, else an open ancestor."""
        node: Goal | None = after
        while node is not None:
            siblings = self.children(node.parent_id)
            idx = next(i for i, s in enumerate(siblings) if s.id == node.id)
            for sibling in siblings[idx + 1 :]:
                if sibling.status not in FINAL_GOAL_STATUSES:
                    return sibling
            node = self.find(node.parent_id)
            if node is not None and node.status not in FINAL_GOAL_STATUSES:
                return node
        return None

    def record_message(self, goal_id: str, tokens: int, cost: float) -> list[Goal]:
        """Count a message under `goal_id`; return the goal and its ancestors (all updated)."""
        chain = self.ancestors(goal_id)
        if chain:
            chain[0].self_stats.add(tokens, cost)
        for goal in chain:
            goal.cumulative_stats.add(tokens, cost)
        return chain

    def check_structure(self) -> None:
        """Raise GoalError unless ids are unique, every parent exists and no goal is its own ancestor."""
        by_id: dict[str, Goal] = {}
        for goal in self.goals:
            if goal.id in by_id:
                raise GoalError(f"goal id {goal.id!r} appears twice in the tree")
            by_id[goal.id] = goal
        for goal in self.goals:
            seen = {goal.id}
            parent_id = goal.parent_id
            while parent_id is not None:
                parent = by_id.get(parent_id)
                if parent is None:
                    raise GoalError(f"parent goal {parent_id!r} of goal {goal.id!r} does not exist")
                if parent_id in seen:
                    raise GoalError(f"goal {goal.id!r} is its own ancestor (parent chain loops at {parent_id!r})")
                seen.add(parent_id)
                parent_id = parent.parent_id

    def recompute_cumulative(self) -> None:
        """Rebuild every cumulative_stats from the self_stats of the goal and its descendants."""
        for goal in self.goals:
            goal.cumulative_stats = goal.self_stats.model_copy()
        by_id = {goal.id: goal for goal in self.goals}
        for goal in self.goals:
            stats = goal.self_stats
            if not stats.message_count and not stats.total_tokens and not stats.total_cost:
                continue
            # Walk up with a visited set so a malformed tree cannot loop forever.
            seen = {goal.id}
            parent = by_id.get(goal.parent_id) if goal.parent_id is not None else None
            while parent is not None and parent.id not in seen:
                seen.add(parent.id)
                parent.cumulative_stats.message_count += stats.message_count
                parent.cumulative_stats.total_tokens += stats.total_tokens
                parent.cumulative_stats.total_cost += stats.total_cost
                parent = by_id.get(parent.parent_id) if parent.parent_id is not None else None

    def to_prompt(self) -> str:
        """Render the plan as indented text for the model."""
        if not self.goals:
            return "(no goals yet)"
        marks = {"completed": "[x]", "abandoned": "[-]", "failed": "[!]", "in_progress": "[>]",
                 "waiting_children": "[~]", "pending_review": "[?]", "pending": "[ ]"}
        lines = []
        for goal in self._dfs():
            # A finished goal is never "current", even while current_id still names it.
            focus = "  <- current" if goal.id == self.current_id and goal.status not in FINAL_GOAL_STATUSES else ""
            summary = f" — {goal.summary}" if goal.summary else ""
            lines.append(f"{'  ' * self.depth(goal.id)}{marks[goal.status]} {goal.id}. {goal.description}{summary}{focus}")
        return "\n".join(lines)

    def _dfs(self) -> list[Goal]:
        out: list[Goal] = []
        stack = list(reversed(self.children(None)))
        while stack:
            goal = stack.pop()
            out.append(goal)
            stack.extend(reversed(self.children(goal.id)))
        return out

    def _subtree_end(self, goal_id: str) -> int:
        ids = {goal_id}
        last = next(i for i, g in enumerate(self.goals) if g.id == goal_id)
        for i, goal in enumerate(self.goals):
            if goal.parent_id in ids:
                ids.add(goal.id)
                last = max(last, i)
        return last + 1

    def _ids(self) -> str:
        return ", ".join(g.id for g in self.goals) or "none"
