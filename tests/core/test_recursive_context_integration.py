"""Five levels end to end (SPEC A4, A6, A9, A5): scoped contexts, shrinking rights, refs edge by edge."""

from __future__ import annotations

import re

from protocol_helpers import (
    judged,
    ANCHOR,
    ROOT_ID,
    brief,
    call,
    calls_of,
    chain,
    clean_agent_env,  # noqa: F401 - autouse fixture
    make_runner,
    new_brain,
    protocol,
    rooted,
    run_root,
    validators_of,
)

SECRET = "launch code 7781"
FORBIDDEN_BELOW_ROOT = {"evaluate", "bash_command"}


def _brief(depth, refs):
    constraints = ["stay offline"] if depth == 1 else []
    return brief(f"level {depth} work", f"level {depth} result is reported", constraints=constraints, context_refs=refs)


def _held_refs(turn):
    return re.findall(r"^- (ref-\S+): ", turn.task, re.M)


async def _five_level_run(tmp_path):
    (tmp_path / "secret.txt").write_text(SECRET)
    brain = new_brain(levels=5)
    brain.brief_for = lambda depth: _brief(depth, [])
    seen = {"refused": {}, "d5": []}

    async def d1(turn):
        if turn.role == "parent" or calls_of(turn.messages, "agent"):
            return None
        if not turn.results:
            return call("read_file", path="secret.txt")
        mine = await turn.trace()
        grant = {"message_id": f"{mine.trace_id}-{len(turn.messages):04d}", "title": "the launch code"}
        return call("agent", task_brief=_brief(2, [grant]))

    def relay(depth, forged=None):
        def hook(turn):
            if turn.role == "parent" or calls_of(turn.messages, "agent"):
                return None
            if forged and not turn.results:
                return call(forged, command="echo hi", code="1+1")
            if forged:
                seen["refused"][depth] = turn.results[0]
            return call("agent", task_brief=_brief(depth + 1, _held_refs(turn)))
        return hook

    def d5(turn):
        if not turn.results:
            return call("agent", task_brief=brief("go deeper"))
        if len(turn.results) == 1:
            return call("read_context_ref", ref_id=_held_refs(turn)[0])
        seen["d5"] = turn.results
        return call("submit_report", outcome="completed", summary="read the code", outputs=[turn.results[1]])

    brain.hooks = {"d1": d1, "d2": relay(2), "d3": relay(3, forged="bash_command"), "d4": relay(4, forged="evaluate"),
                   "d5": d5}
    result = await run_root(make_runner(brain), rooted(workspace=str(tmp_path)))
    return brain, result, seen


async def test_five_levels_complete_with_reviews_and_validations_at_every_level(tmp_path):
    brain, result, _ = await _five_level_run(tmp_path)
    assert result.status == "completed"
    traces = await chain(brain.store, ROOT_ID)
    assert [t.lineage.depth for t in traces] == [0, 1, 2, 3, 4, 5]
    for parent, child in zip(traces, traces[1:]):
        assert child.parent_trace_id == parent.trace_id and child.lineage.root_trace_id == ROOT_ID
        assert child.status == "completed"
        assert [(r["child_trace_id"], r["decision"]) for r in protocol(parent)["reviews"]] == [(child.trace_id, "accept")]
        assert protocol(parent)["pending_reviews"] == []
        (validation,) = judged(child)
        assert validation["verdict"] == "pass" and validation["scope"] == "criteria"
        assert len(await validators_of(brain.store, child.trace_id)) == 1
    (root_validation,) = protocol(traces[0])["validations"]
    assert (root_validation["scope"], root_validation["verdict"]) == ("root", "pass")
    usage = await brain.store.get_resource_usage(ROOT_ID)
    assert usage.agents == 6


async def test_each_level_starts_from_its_own_brief_anchor_and_refs_only(tmp_path):
    brain, _, _ = await _five_level_run(tmp_path)
    traces = await chain(brain.store, ROOT_ID)
    for depth in range(1, 6):
        (messages, _names), = brain.first_requests[depth]
        assert [m["role"] for m in messages] == ["system", "user"]
        task = messages[1]["content"]
        assert f"Objective: level {depth} work" in task and f"agent_depth={depth}" in task
        assert f"Objective: {ANCHOR['objective']}" in task
        assert f"parent_trace_id={traces[depth - 1].trace_id}" in task
        assert f"level {depth - 1} work" not in task
        assert "ROOT-PRIVATE" not in repr(messages) and SECRET not in repr(messages)
        for constraint in ("- stay offline", "- never modify workspace files"):
            assert constraint in task
        refs = traces[depth].protocol.context_access.refs
        assert sorted(refs) == ([] if depth == 1 else ["ref-1-1"])
        if depth > 1:
            assert "ref-1-1: the launch code (message" in task


async def test_tool_rights_shrink_with_depth_and_forged_calls_are_refused(tmp_path):
    brain, _, seen = await _five_level_run(tmp_path)
    root_names = brain.first_requests[0][0][1]
    assert FORBIDDEN_BELOW_ROOT <= root_names and "submit_report" not in root_names
    for depth in range(1, 6):
        names = brain.first_requests[depth][0][1]
        assert not names & FORBIDDEN_BELOW_ROOT
        assert "submit_report" in names and "read_context_ref" in names
        assert ("agent" in names) is (depth < 5)
    assert seen["refused"][3].startswith("tool 'bash_command' is not available to this agent")
    assert seen["refused"][4].startswith("tool 'evaluate' is not available to this agent")
    assert seen["d5"][0].startswith("tool 'agent' is not available to this agent")
    traces = await chain(brain.store, ROOT_ID)
    assert len(traces) == 6
    assert "agent" not in traces[5].lineage.tool_snapshot


async def test_a_ref_granted_at_depth_one_reaches_depth_five_edge_by_edge(tmp_path):
    brain, _, seen = await _five_level_run(tmp_path)
    traces = await chain(brain.store, ROOT_ID)
    read = seen["d5"][1]
    assert read.startswith("[ref-1-1] the launch code (message from ") and SECRET in read
    snapshots = [traces[d].protocol.context_access.refs["ref-1-1"] for d in range(2, 6)]
    assert all(s == snapshots[0] for s in snapshots)
    assert snapshots[0].source.startswith(traces[1].trace_id + "-")
    assert protocol(traces[5])["report"]["outputs"] == [read]
