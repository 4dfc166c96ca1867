"""What a recursive child sees, and how its parent reviews it (SPEC A5, A9, T6)."""

from __future__ import annotations

import pytest
from protocol_helpers import (
    ROOT_ID,
    ROOT_TASK,
    brief,
    call,
    calls_of,
    children_of,
    clean_agent_env,  # noqa: F401 - autouse fixture
    goal_statuses,
    make_runner,
    new_brain,
    pending_of,
    protocol,
    rooted,
    run_root,
    text,
    validators_of,
)

from cyber_agent.core.config import RunConfig
from cyber_agent.llm.fakes import FunctionModel

REVIEW_READ_ONLY = {"review_task", "read_file", "list_files", "read_context_ref"}


def _reviewing(decision: str, feedback: str = "because I say so", *, then=None):
    """A depth-0 hook: review the pending child with `decision` once, then `then(turn)` (or defaults)."""
    async def hook(turn):
        if turn.role == "parent":
            return call("review_task", child_trace_id=(await pending_of(turn))[0], decision=decision, feedback=feedback)
        return then(turn) if then is not None else None
    return hook


async def test_the_child_sees_brief_anchor_lineage_and_refs_but_never_the_parents_history(tmp_path):
    (tmp_path / "notes.txt").write_text("PARENT-TOOL-RESULT: raw scratch data")
    brain = new_brain(levels=1)
    grant = {"message_id": f"{ROOT_ID}-0005", "title": "scratch"}
    child_brief = brief("  Derive   the checksum ", "the checksum is derived", reason="root needs it",
                        expected_outputs=["checksum"], constraints=["show the arithmetic"], context_refs=[grant])

    def root(turn):
        if turn.role == "root" and not turn.results:
            return call("read_file", path="notes.txt")
        if turn.role == "root" and len(turn.results) == 1:
            return call("agent", task_brief=child_brief)
        return None

    brain.hooks = {"d0": root}
    config = rooted(workspace=str(tmp_path), context={"parent_secret": "PARENT-CONTEXT-VALUE"})
    result = await run_root(make_runner(brain), config)
    assert result.status == "completed"
    (messages, _names), = brain.first_requests[1]
    assert [m["role"] for m in messages] == ["system", "user"]
    task = messages[1]["content"]
    for expected in ("Objective: Derive the checksum", "Reason: root needs it", "1. the checksum is derived",
                     "Expected outputs: checksum", "- show the arithmetic", "- never modify workspace files",
                     "# Root task", "Objective: Compute the launch checksum",
                     f"parent_trace_id={ROOT_ID}", f"root_trace_id={ROOT_ID}", "agent_depth=1",
                     "ref-1-1: scratch (message"):
        assert expected in task, expected
    everything = repr(messages)
    assert "ROOT-PRIVATE" not in everything
    assert "PARENT-TOOL-RESULT" not in everything
    assert "checked by an independent root validator" not in everything
    child = (await children_of(brain.store, ROOT_ID))[0]
    assert "parent_secret" not in child.context
    assert protocol(child)["brief"]["objective"] == "Derive the checksum"
    assert child.protocol.context_access.refs["ref-1-1"].content == "PARENT-TOOL-RESULT: raw scratch data"
    assert (child.lineage.depth, child.lineage.root_trace_id) == (1, ROOT_ID)


@pytest.mark.parametrize("decision, follow", [
    ("accept", "Report accepted."), ("replan", "plan a different approach"),
    ("split", "split the task"), ("fail", "rejected as failed"),
])
async def test_a_review_decision_is_recorded_and_frees_the_parent(decision, follow):
    brain = new_brain(levels=1)
    after = {}

    def then(turn):
        if calls_of(turn.messages, "review_task") and not after:
            after.update(result=turn.results[-1], names=turn.names)
        return None

    brain.hooks = {"d0": _reviewing(decision, then=then)}
    result = await run_root(make_runner(brain), rooted())
    assert result.status == "completed"
    child = (await children_of(brain.store, ROOT_ID))[0]
    root_protocol = protocol(result.trace)
    assert root_protocol["pending_reviews"] == []
    assert [(r["child_trace_id"], r["decision"]) for r in root_protocol["reviews"]] == [(child.trace_id, decision)]
    assert protocol(child)["review"]["decision"] == decision
    assert follow in after["result"] and "Pending reviews: none" in after["result"]
    assert "agent" in after["names"] and "review_task" not in after["names"]
    assert await goal_statuses(brain.store, ROOT_ID) == ["in_progress", "waiting_children", "pending_review",
                                                         "in_progress", "completed"]


async def test_revise_continues_the_same_child_with_the_feedback_and_no_new_quota():
    brain = new_brain(levels=1)
    state = {"reviews": 0}

    async def root(turn):
        if turn.role != "parent":
            return None
        state["reviews"] += 1
        child = (await pending_of(turn))[0]
        if state["reviews"] == 1:
            return call("review_task", child_trace_id=child, decision="revise", feedback="name the source file")
        state["second_outcome"] = turn.results[-1]
        return call("review_task", child_trace_id=child, decision="accept")

    brain.hooks = {"d0": root}
    runner = make_runner(brain)
    result = await run_root(runner, rooted())
    assert result.status == "completed"
    (child,) = await children_of(brain.store, ROOT_ID)
    child_requests = [r for r in brain.llm.requests if "submit_report" in r.tool_names]
    revision_request = child_requests[-1].messages
    assert revision_request[-1] == {"role": "user", "content": "[parent review] Revise your work. Feedback: name the source file"}
    assert revision_request[1] == brain.first_requests[1][0][0][1]
    assert result.trace.lineage.child_count == 1
    assert (await brain.store.get_resource_usage(ROOT_ID)).agents == 2
    assert len(await validators_of(brain.store, child.trace_id)) == 2
    assert f"Child {child.trace_id} [completed]" in state["second_outcome"]
    assert "Review it again" in state["second_outcome"]
    assert [r["decision"] for r in protocol(result.trace)["reviews"]] == ["revise", "accept"]


async def test_revise_needs_feedback_and_only_pending_children_can_be_reviewed():
    brain = new_brain(levels=1)
    refusals = []

    async def root(turn):
        if turn.role != "parent":
            return None
        child = (await pending_of(turn))[0]
        attempts = [
            call("review_task", child_trace_id=child, decision="revise", feedback="  "),
            call("review_task", child_trace_id=ROOT_ID, decision="accept"),
        ]
        done = len(calls_of(turn.messages, "review_task"))
        if done:
            refusals.append(turn.results[-1])
        return attempts[done] if done < len(attempts) else None

    brain.hooks = {"d0": root}
    result = await run_root(make_runner(brain), rooted())
    assert result.status == "completed"
    assert "needs feedback" in refusals[0]
    assert "has no report waiting" in refusals[1]


async def test_continue_from_with_a_different_task_is_refused_and_a_matching_one_revises():
    brain = new_brain(levels=1)
    results = []
    original = brain.brief_for(1)
    moves = iter([
        lambda child: call("agent", task_brief=brief("write a poem instead", "a poem exists"), continue_from=child),
        lambda child: call("agent", task_brief=brief("rewrite the checksum", *original["completion_criteria"]),
                           continue_from=child),
        lambda child: call("agent", task_brief={**original, "expected_outputs": ["checksum with file name"]},
                           continue_from=f"{ROOT_ID}@delegate-20250101000000-009"),
        lambda child: call("agent", task_brief={**original, "expected_outputs": ["checksum with file name"]},
                           continue_from=child),
    ])

    async def root(turn):
        if turn.role == "parent":
            return call("review_task", child_trace_id=(await pending_of(turn))[0], decision="replan", feedback="x")
        if not calls_of(turn.messages, "review_task"):
            return None
        if len(calls_of(turn.messages, "review_task")) > 1:
            results.append(turn.results[-2])  # the continue result; the last one is the second review
            return text("done")
        if calls_of(turn.messages, "agent")[1:]:
            results.append(turn.results[-1])
        child = (await children_of(brain.store, ROOT_ID))[0].trace_id
        return next(moves)(child)

    brain.hooks = {"d0": root}
    result = await run_root(make_runner(brain), rooted())
    different, reworded, stranger, revised = results
    assert "different objective or completion criteria" in different
    assert "different objective or completion criteria" in reworded
    assert "is not a child of this agent" in stranger
    assert "Review it again" in revised
    (child,) = await children_of(brain.store, ROOT_ID)
    assert result.trace.lineage.child_count == 1
    assert (await brain.store.get_resource_usage(ROOT_ID)).agents == 2
    child_requests = [r for r in brain.llm.requests if "submit_report" in r.tool_names]
    assert "Expected outputs: checksum with file name" in child_requests[-1].messages[-1]["content"]
    assert [r["decision"] for r in protocol(result.trace)["reviews"]] == ["replan", "replan"]


async def test_while_reports_are_pending_the_parent_can_only_review():
    brain = new_brain(levels=1)
    seen = {"names": [], "results": []}

    async def root(turn):
        if turn.role != "parent":
            return None
        seen["names"].append(turn.names)
        tries = len(seen["names"])
        if tries > 1:
            seen["results"].append(turn.messages[-1]["content"])
        if tries == 1:
            return call("agent", task_brief=brief("sneak another child"))
        if tries == 2:
            return call("goal", add="sneaky goal")
        if tries == 3:
            return text("I am done without reviewing")
        return call("review_task", child_trace_id=(await pending_of(turn))[0], decision="accept")

    brain.hooks = {"d0": root}
    result = await run_root(make_runner(brain), rooted())
    assert result.status == "completed"
    assert all(names <= REVIEW_READ_ONLY and "review_task" in names for names in seen["names"])
    forged_agent, forged_goal, reminder = seen["results"]
    assert forged_agent.startswith("tool 'agent' is not available to this agent")
    assert forged_goal.startswith("tool 'goal' is not available to this agent")
    assert reminder.startswith("[protocol] Before finishing, review every child report")
    assert len(await children_of(brain.store, ROOT_ID)) == 1
    tree = await brain.store.get_goal_tree(ROOT_ID)
    assert [g.description for g in tree.goals if "sneaky" in g.description] == []


async def test_goal_states_are_observable_while_children_run_and_wait():
    brain = new_brain(levels=1)
    live = []

    async def watch(turn):
        goal = (await brain.store.get_goal_tree(ROOT_ID)).find("1")
        live.append((turn.role, turn.depth, goal.status))
        return None

    brain.hooks = {"d0": watch, "d1": watch}
    await run_root(make_runner(brain), rooted())
    assert live == [("root", 0, "in_progress"), ("child", 1, "waiting_children"), ("parent", 0, "pending_review"),
                    ("root", 0, "in_progress")]


@pytest.mark.parametrize("mode, expected", [
    ("recursive", {"1": "in_progress", "2": "completed", "3": "pending"}),
    ("legacy", {"1": "in_progress", "2": "completed", "3": "in_progress"}),
])
async def test_recursive_goals_never_cascade_or_auto_advance(mode, expected):
    snapshots = []
    store_box = {}

    async def model(messages, tools):
        if "submit_validation" in {t["function"]["name"] for t in tools or []}:
            return call("submit_validation", verdicts=[{"criterion": 1, "verdict": "pass"}, {"criterion": 2, "verdict": "pass"}])
        step = sum(1 for m in messages if m["role"] == "tool")
        plan = [call("goal", add="step A; step B"), call("goal", focus="2"), call("goal", done="A finished"),
                call("goal", focus="3"), call("goal", done="B finished")]
        if step in (3, 5):
            tree = await store_box["store"].get_goal_tree(ROOT_ID)
            trace = await store_box["store"].get_trace(ROOT_ID)
            snapshots.append(({g.id: g.status for g in tree.goals}, trace.current_goal_id))
        if step < len(plan):
            return plan[step]
        return text("both steps done")

    runner = make_runner(FunctionModel(model))
    store_box["store"] = runner.trace_store
    config = rooted() if mode == "recursive" else RunConfig(agent_mode="legacy", new_trace_id=ROOT_ID)
    result = await runner.run_result([{"role": "user", "content": ROOT_TASK}], config)
    assert result.status == "completed"
    after_a, after_b = snapshots
    assert after_a[0] == expected
    if mode == "recursive":
        assert after_a[1] is None
        assert after_b[0] == {"1": "in_progress", "2": "completed", "3": "completed"}
    else:
        assert after_a[1] == "3"
        assert after_b[0]["1"] == "completed"
