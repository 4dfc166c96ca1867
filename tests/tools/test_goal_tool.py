"""The goal tool against InMemoryTraceStore: add/under/after/focus/done/abandon, cascade, errors."""

from __future__ import annotations

import pytest

from cyber_agent.errors import GoalError
from cyber_agent.tools.builtin import builtin_registry
from cyber_agent.tools.context import ToolContext
from cyber_agent.trace import GoalTree, InMemoryTraceStore
from cyber_agent.trace.goal_tool import goal, split_goal_descriptions


async def tree_of(ctx: ToolContext) -> GoalTree:
    tree = await ctx.store.get_goal_tree(ctx.trace_id)
    assert tree is not None
    return tree


async def statuses(ctx: ToolContext) -> dict[str, str]:
    return {g.id: g.status for g in (await tree_of(ctx)).goals}


async def current(ctx: ToolContext) -> str | None:
    trace = await ctx.store.get_trace(ctx.trace_id)
    tree = await tree_of(ctx)
    assert trace is not None and trace.current_goal_id == tree.current_id
    return tree.current_id


async def event_types(ctx: ToolContext) -> list[str]:
    return [e.type for e in await ctx.store.get_events(ctx.trace_id)]


async def no_cascade(ctx: ToolContext) -> None:
    tree = await tree_of(ctx)
    tree.cascade_completion = False
    await ctx.store.update_goal_tree(ctx.trace_id, tree)


def test_split_goal_descriptions() -> None:
    assert split_goal_descriptions("Read; Compute\nReport;") == ["Read", "Compute", "Report"]
    assert split_goal_descriptions([" a ", "b; c"]) == ["a", "b; c"]
    for empty in (" ; \n", [], ["a", " "]):
        with pytest.raises(GoalError, match="non-empty"):
            split_goal_descriptions(empty)


async def test_first_add_goes_top_level_and_takes_focus(ctx: ToolContext) -> None:
    text = await goal(ctx, add="Read data; Compute totals\nReport", reason="the task")
    tree = await tree_of(ctx)
    assert [(g.id, g.parent_id, g.description, g.reason) for g in tree.goals] == [
        ("1", None, "Read data", "the task"), ("2", None, "Compute totals", "the task"), ("3", None, "Report", "the task")]
    assert await statuses(ctx) == {"1": "in_progress", "2": "pending", "3": "pending"}
    assert await current(ctx) == "1"
    assert text.startswith("Added goals 1, 2, 3 at top level; focus moved to goal 1.\n\nPlan:\n")
    assert "[>] 1. Read data  <- current" in text
    assert await event_types(ctx) == ["goal_added"] * 3 + ["goal_updated"]


async def test_add_defaults_under_the_current_goal_and_keeps_focus(ctx: ToolContext) -> None:
    await goal(ctx, add="Parent")
    await goal(ctx, add=["Child a", "Child b"])
    tree = await tree_of(ctx)
    assert [g.parent_id for g in tree.children("1")] == ["1", "1"]
    assert await current(ctx) == "1"


async def test_add_under_and_after_place_goals(ctx: ToolContext) -> None:
    await goal(ctx, add="A; B; C")
    await goal(ctx, add="B1; B2", under="2")
    text = await goal(ctx, add="A2; A3", after="1")
    tree = await tree_of(ctx)
    assert [g.description for g in tree.children(None)] == ["A", "A2", "A3", "B", "C"]
    assert [g.description for g in tree.children("2")] == ["B1", "B2"]
    assert "Added goals 6, 7 after goal 1" in text
    lines = text.split("Plan:\n")[1].splitlines()
    assert [line.strip()[4:] for line in lines] == [
        "1. A  <- current", "6. A2", "7. A3", "2. B", "4. B1", "5. B2", "3. C"]


async def test_focus_moves_and_puts_the_previous_goal_back(ctx: ToolContext) -> None:
    await goal(ctx, add="A; B")
    await goal(ctx, add="A1", under="1")
    await goal(ctx, focus="3")  # a child of the current goal: the parent stays active
    assert await statuses(ctx) == {"1": "in_progress", "2": "pending", "3": "in_progress"}
    text = await goal(ctx, focus="2")
    assert await statuses(ctx) == {"1": "in_progress", "2": "in_progress", "3": "pending"}
    assert await current(ctx) == "2" and "focus moved to goal 2" in text
    assert "already in focus" in await goal(ctx, focus="2")


async def test_done_cascades_and_auto_advances_on_legacy_trees(ctx: ToolContext) -> None:
    await goal(ctx, add="Task; Other")
    await goal(ctx, add="Step 1; Step 2", under="1")
    await goal(ctx, focus="3")
    text = await goal(ctx, done="step one finished")
    assert text.startswith("Completed goal 3; focus moved to goal 4.")
    assert await current(ctx) == "4"
    text = await goal(ctx, done="step two finished")
    assert "Completed goal 4 (parents completed too: 1); focus moved to goal 2" in text
    assert await statuses(ctx) == {"1": "completed", "2": "in_progress", "3": "completed", "4": "completed"}
    tree = await tree_of(ctx)
    assert tree.get("3").summary == "step one finished"
    text = await goal(ctx, done="all done")
    assert "no open goals left" in text and await current(ctx) is None
    last = (await ctx.store.get_events(ctx.trace_id))[-1]
    assert last.type == "goal_updated" and last.payload["goal_id"] == "2"


async def test_done_advances_to_an_open_ancestor(ctx: ToolContext) -> None:
    await goal(ctx, add="Parent")
    await goal(ctx, add="Only child; Second", under="1")
    await goal(ctx, focus="2")
    await goal(ctx, abandon="not needed")
    assert await current(ctx) == "3"
    await goal(ctx, focus="1")
    await goal(ctx, add="Late child")
    await goal(ctx, focus="4")
    text = await goal(ctx, abandon="skip it")
    # 4 was the last child; the parent is open, so focus returns to it.
    assert "focus moved to goal 1" in text and await current(ctx) == "1"


async def test_without_cascade_nothing_completes_or_advances_by_itself(ctx: ToolContext) -> None:
    await no_cascade(ctx)
    await goal(ctx, add="Parent; Sibling")
    await goal(ctx, add="Child", under="1")
    await goal(ctx, focus="3")
    text = await goal(ctx, done="child finished")
    assert await statuses(ctx) == {"1": "in_progress", "2": "pending", "3": "completed"}
    assert await current(ctx) is None
    assert "does not auto-advance" in text
    await goal(ctx, focus="1", done=None)
    assert await current(ctx) == "1"


async def test_abandon_takes_open_sub_goals_along(ctx: ToolContext) -> None:
    await goal(ctx, add="Parent; Next")
    await goal(ctx, add="Done child; Open child", under="1")
    await goal(ctx, focus="3")
    await goal(ctx, done="ok")
    await goal(ctx, focus="1")
    text = await goal(ctx, abandon="wrong approach")
    assert await statuses(ctx) == {"1": "abandoned", "2": "in_progress", "3": "completed", "4": "abandoned"}
    tree = await tree_of(ctx)
    assert tree.get("1").summary == "wrong approach"
    assert text.startswith("Abandoned goal 1; focus moved to goal 2.")


async def test_one_call_runs_done_then_focus_then_add(ctx: ToolContext) -> None:
    await no_cascade(ctx)
    await goal(ctx, add="A; B")
    text = await goal(ctx, done="a finished", focus="2", add="B detail")
    tree = await tree_of(ctx)
    assert tree.get("3").parent_id == "2"  # added under the focus set earlier in the same call
    assert await current(ctx) == "2"
    assert text.startswith("Completed goal 1; no goal in focus now")
    assert "focus moved to goal 2; Added goal 3 under goal 2." in text


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"focus": "9"}, "cannot focus on goal '9': no such goal; existing ids: 1, 2"),
    ({"add": "x", "under": "9"}, "cannot add under goal '9': no such goal; existing ids: 1, 2"),
    ({"add": "x", "after": "9"}, "cannot add after goal '9': no such goal; existing ids: 1, 2"),
    ({"add": "x", "after": "1", "under": "2"}, "either after=<sibling id> or under=<parent id>"),
    ({"add": " ; "}, "non-empty goal description"),
    ({"add": ["ok", ""]}, "non-empty goal description"),
    ({"reason": "why"}, "only apply together with add"),
    ({"done": "  "}, "done needs a short summary"),
    ({"abandon": ""}, "abandon needs the reason"),
])
async def test_invalid_calls_raise_and_change_nothing(ctx: ToolContext, kwargs: dict, message: str) -> None:
    await goal(ctx, add="A; B")
    before = (await tree_of(ctx)).model_dump(), await event_types(ctx)
    with pytest.raises(GoalError) as info:
        await goal(ctx, **kwargs)
    assert message in str(info.value)
    assert ((await tree_of(ctx)).model_dump(), await event_types(ctx)) == before


async def test_done_and_abandon_need_a_goal_in_focus(ctx: ToolContext) -> None:
    with pytest.raises(GoalError, match="done: no goal is in focus.*existing ids: none"):
        await goal(ctx, done="x")
    await no_cascade(ctx)
    await goal(ctx, add="A; B")
    with pytest.raises(GoalError, match="abandon: no goal is in focus"):
        await goal(ctx, done="a", abandon="b")  # done clears the focus, so abandon has nothing
    assert await statuses(ctx) == {"1": "in_progress", "2": "pending"}  # the whole call was refused


async def test_finished_goals_cannot_take_focus_or_children(ctx: ToolContext) -> None:
    await goal(ctx, add="A; B")
    await goal(ctx, done="a")
    with pytest.raises(GoalError, match="cannot focus goal 1: it is completed"):
        await goal(ctx, focus="1")
    with pytest.raises(GoalError, match="cannot add under goal 1: it is completed"):
        await goal(ctx, add="late", under="1")


async def test_focus_follows_the_trace_current_goal_set_by_the_runner(
    ctx: ToolContext, store: InMemoryTraceStore,
) -> None:
    await goal(ctx, add="Root task")
    tree = await tree_of(ctx)
    tree.current_id = None  # the runner records focus on the trace only
    await store.update_goal_tree(ctx.trace_id, tree)
    await goal(ctx, add="Sub")
    assert (await tree_of(ctx)).get("2").parent_id == "1"


async def test_through_the_registry_errors_are_results_and_ids_may_be_numbers(ctx: ToolContext) -> None:
    registry = builtin_registry(["goal"])
    allowed = {"goal"}
    await registry.execute("goal", {"add": ["A", "B"]}, allowed=allowed, context=ctx)
    moved = await registry.execute("goal", {"focus": 2}, allowed=allowed, context=ctx)
    assert not moved.is_error and await current(ctx) == "2"
    bad = await registry.execute("goal", {"focus": "7"}, allowed=allowed, context=ctx)
    assert bad.is_error and bad.content == "cannot focus on goal '7': no such goal; existing ids: 1, 2"
    assert "ctx" not in registry.schemas(["goal"])[0]["function"]["parameters"]["properties"]
