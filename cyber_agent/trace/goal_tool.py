"""The `goal` tool (SPEC T12, T6, A12): the agent manages its own plan, a trace's GoalTree.

One call may do several things; they are applied in the order done → abandon → focus → add.
The whole call is first worked out on a copy of the tree, so an invalid call changes nothing;
then it is written through the TraceStore (`add_goal` / `update_goal`, which append the
`goal_added` / `goal_updated` events), and the focus is saved on the tree and on the trace.

Legacy trees (`cascade_completion=True`) complete parents whose children are all done and move
the focus to the next open sibling or ancestor. Trees with cascade off (recursive) never
advance on their own: after done/abandon nothing is in focus until the agent picks a goal.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Protocol

from pydantic import BeforeValidator

from cyber_agent.errors import GoalError, ToolError
from cyber_agent.trace.goal_models import FINAL_GOAL_STATUSES, Goal, GoalStatus, GoalTree
from cyber_agent.trace.protocols import TraceStore

__all__ = ["GoalContext", "GoalId", "goal", "split_goal_descriptions"]


class GoalContext(Protocol):
    """What the goal tool reads of the `ToolContext` the registry injects: the calling trace and its store.

    A structural view, so `trace/` never imports `tools/`: `cyber_agent/tools/registry.py`
    injects the ToolContext into a parameter annotated with it.
    """

    @property
    def trace_id(self) -> str:
        """Trace of the calling agent."""
        ...

    @property
    def store(self) -> TraceStore:
        """Store the run persists to."""
        ...


def _id_to_str(value: Any) -> Any:
    # Models often send goal ids as numbers; ids are strings.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


GoalId = Annotated[str, BeforeValidator(_id_to_str)]
"""A goal id as the model may send it ("3" or 3)."""


async def goal(
    ctx: GoalContext,
    add: str | list[str] | None = None,
    reason: str | None = None,
    after: GoalId | None = None,
    under: GoalId | None = None,
    done: str | None = None,
    abandon: str | None = None,
    focus: GoalId | None = None,
) -> str:
    """Manage your plan: add goals, mark the current goal done or abandoned, or move the focus.
    Steps run in the order done, abandon, focus, add; the updated plan is returned.

    Args:
        add: New goal description(s): a list, or one string with items separated by newlines or ';'.
        reason: Why the new goals are needed (applies to every goal in `add`).
        after: Insert the new goals right after this sibling goal id.
        under: Insert the new goals as children of this goal id (default: the current goal).
        done: Complete the current goal with this short summary of the outcome.
        abandon: Abandon the current goal (and its open sub-goals) for this reason.
        focus: Goal id to work on next; it becomes in_progress.
    """
    trace = await ctx.store.get_trace(ctx.trace_id)
    tree = await ctx.store.get_goal_tree(ctx.trace_id)
    if trace is None or tree is None:
        raise ToolError(f"trace {ctx.trace_id!r} does not exist; the goal tool needs the calling trace")
    current = trace.current_goal_id if tree.find(trace.current_goal_id) else tree.current_id
    edit = _PlanEdit(tree, current)
    edit.apply(add=add, reason=reason, after=after, under=under, done=done, abandon=abandon, focus=focus)
    for step in edit.steps:
        if isinstance(step, Goal):
            await ctx.store.add_goal(ctx.trace_id, step)
        else:
            goal_id, status, summary = step
            updates: dict[str, Any] = {"status": status}
            if summary is not None:
                updates["summary"] = summary
            await ctx.store.update_goal(ctx.trace_id, goal_id, **updates)
    stored = await ctx.store.get_goal_tree(ctx.trace_id)
    assert stored is not None
    # The store appends inserted goals; restore the order worked out (matters for `after`).
    order = {g.id: i for i, g in enumerate(edit.tree.goals)}
    stored.goals.sort(key=lambda g: order.get(g.id, len(order)))
    stored.current_id = edit.current
    await ctx.store.update_goal_tree(ctx.trace_id, stored)
    if trace.current_goal_id != edit.current:
        await ctx.store.update_trace(ctx.trace_id, current_goal_id=edit.current)
    change = "; ".join(edit.notes) or "No changes"
    return f"{change}.\n\nPlan:\n{stored.to_prompt()}"


def split_goal_descriptions(add: str | list[str]) -> list[str]:
    """Turn `add` into descriptions: a list as is, a string split on newlines and ';'."""
    if isinstance(add, str):
        items = [part.strip() for part in re.split(r"[;\n]", add)]
        items = [item for item in items if item]
    else:
        items = [item.strip() for item in add]
    if not items or any(not item for item in items):
        raise GoalError("add needs at least one non-empty goal description (e.g. add='Read the data; Summarize it')")
    return items


class _PlanEdit:
    """Work out one goal call on a copy of the tree, recording the store writes it needs."""

    def __init__(self, tree: GoalTree, current: str | None) -> None:
        self.tree = tree.model_copy(deep=True)
        self.current = current
        self.steps: list[Goal | tuple[str, GoalStatus, str | None]] = []
        self.notes: list[str] = []

    def apply(
        self, *, add: str | list[str] | None, reason: str | None, after: str | None, under: str | None,
        done: str | None, abandon: str | None, focus: str | None,
    ) -> None:
        if after is not None and under is not None:
            raise GoalError("pass either after=<sibling id> or under=<parent id>, not both")
        if add is None and (reason is not None or after is not None or under is not None):
            raise GoalError("reason, after and under only apply together with add=<description>")
        descriptions = split_goal_descriptions(add) if add is not None else []
        if done is not None:
            self._finish("completed", _required_text(done, "done", "a short summary of the outcome"))
        if abandon is not None:
            self._finish("abandoned", _required_text(abandon, "abandon", "the reason"))
        if focus is not None:
            self._focus(self._existing(focus, "focus on"))
        if descriptions:
            self._add(descriptions, reason, after, under)

    # ---- steps --------------------------------------------------------------------------
    def _finish(self, status: GoalStatus, text: str) -> None:
        verb = "done" if status == "completed" else "abandon"
        if self.current is None or self.tree.find(self.current) is None:
            raise GoalError(f"{verb}: no goal is in focus; pick one with focus=<id> first "
                            f"(existing ids: {self._ids()})")
        target = self.tree.get(self.current)
        if target.status in FINAL_GOAL_STATUSES:
            raise GoalError(f"{verb}: goal {target.id} in focus is already {target.status}; pick another with focus=<id>")
        if status == "abandoned":
            # Open sub-goals of an abandoned goal are abandoned with it, so none is left dangling.
            for child in self._open_descendants(target.id):
                self._set(child.id, "abandoned", f"parent goal {target.id} abandoned")
        changed = self._set(target.id, status, text)
        cascaded = [g.id for g in changed[1:]]
        note = f"{'Completed' if status == 'completed' else 'Abandoned'} goal {target.id}"
        if cascaded:
            note += f" (parents completed too: {', '.join(cascaded)})"
        self.notes.append(note)
        self._advance(target)

    def _advance(self, finished: Goal) -> None:
        if not self.tree.cascade_completion:
            self.current = None
            self.notes.append("no goal in focus now (this plan does not auto-advance); choose the next with focus=<id>")
            return
        following = self.tree.next_open(finished)
        if following is None:
            self.current = None
            self.notes.append("no open goals left")
            return
        self._focus(following)

    def _focus(self, target: Goal) -> None:
        if target.status in FINAL_GOAL_STATUSES:
            raise GoalError(f"cannot focus goal {target.id}: it is {target.status}; add a new goal instead")
        if target.id == self.current:
            self.notes.append(f"goal {target.id} is already in focus")
            return
        previous = self.tree.find(self.current)
        in_target_chain = {g.id for g in self.tree.ancestors(target.id)}
        if previous is not None and previous.status == "in_progress" and previous.id not in in_target_chain:
            # Leaving a goal unfinished puts it back in the queue; ancestors of the new focus stay active.
            self._set(previous.id, "pending", None)
        if target.status != "in_progress":
            self._set(target.id, "in_progress", None)
        self.current = target.id
        self.notes.append(f"focus moved to goal {target.id}")

    def _add(self, descriptions: list[str], reason: str | None, after: str | None, under: str | None) -> None:
        parent_id: str | None = self.current
        anchor: str | None = None
        if under is not None:
            parent = self._existing(under, "add under")
            if parent.status in FINAL_GOAL_STATUSES:
                raise GoalError(f"cannot add under goal {parent.id}: it is {parent.status}; "
                                "add under an open goal or at top level")
            parent_id = parent.id
        elif after is not None:
            anchor = self._existing(after, "add after").id
        added: list[Goal] = []
        for description in descriptions:
            new = self.tree.add(description, parent_id=parent_id, reason=reason, after_id=anchor)
            self.steps.append(new.model_copy(deep=True))
            added.append(new)
            if anchor is not None:
                anchor = new.id  # keep the new goals in the order given
        where = f"after goal {after}" if after is not None else (
            f"under goal {added[0].parent_id}" if added[0].parent_id else "at top level")
        self.notes.append(f"Added goal{'s' if len(added) > 1 else ''} {', '.join(g.id for g in added)} {where}")
        if self.current is None:
            self._focus(added[0])

    # ---- helpers ------------------------------------------------------------------------
    def _set(self, goal_id: str, status: GoalStatus, summary: str | None) -> list[Goal]:
        self.steps.append((goal_id, status, summary))
        return self.tree.set_status(goal_id, status, summary=summary)

    def _existing(self, goal_id: str, action: str) -> Goal:
        found = self.tree.find(goal_id)
        if found is None:
            raise GoalError(f"cannot {action} goal {goal_id!r}: no such goal; existing ids: {self._ids()}")
        return found

    def _open_descendants(self, goal_id: str) -> list[Goal]:
        out: list[Goal] = []
        stack = list(self.tree.children(goal_id))
        while stack:
            node = stack.pop()
            stack.extend(self.tree.children(node.id))
            if node.status not in FINAL_GOAL_STATUSES:
                out.append(node)
        return out

    def _ids(self) -> str:
        return ", ".join(g.id for g in self.tree.goals) or "none (the plan is empty)"


def _required_text(value: str, name: str, what: str) -> str:
    text = value.strip()
    if not text:
        raise GoalError(f"{name} needs {what}; got an empty string")
    return text
