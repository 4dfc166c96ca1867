"""Five levels, the deepest report rejected by its validator, revised, and the root validated (SPEC A5)."""

from __future__ import annotations

from protocol_helpers import (
    judged,
    ROOT_ID,
    brief,
    call,
    chain,
    clean_agent_env,  # noqa: F401 - autouse fixture
    make_runner,
    new_brain,
    numbered,
    pending_block,
    pending_of,
    protocol,
    rooted,
    run_root,
    validators_of,
)

DEEPEST = brief("level 5 work", "the data file is read", "the checksum is stated as checksum=NNNN")
FEEDBACK = "criterion 2 failed: state the checksum as checksum=7781"


async def _run(tmp_path):
    (tmp_path / "data.txt").write_text("bytes: 7 7 8 1")
    brain = new_brain(levels=5)
    brain.brief_for = lambda depth: DEEPEST if depth == 5 else brief(f"level {depth} work")
    seen = {"d4_outcomes": [], "d5_prompts": []}

    def d5(turn):
        seen["d5_prompts"].append(turn.messages[-1]["content"])
        if not turn.results:
            return call("read_file", path="data.txt")
        revised = turn.messages[-1]["content"].startswith("[parent review]")
        outputs = ["checksum=7781"] if revised else ["the bytes are 7 7 8 1"]
        return call("submit_report", outcome="completed", summary="read the data file", outputs=outputs,
                    evidence=["read_file of data.txt"])

    async def d4(turn):
        if turn.role != "parent":
            return None
        child = (await pending_of(turn))[0]
        outcome = pending_block(turn.messages, child)
        seen["d4_outcomes"].append(outcome)
        if "verdict: fail" in outcome:
            return call("review_task", child_trace_id=child, decision="revise", feedback=FEEDBACK)
        return call("review_task", child_trace_id=child, decision="accept", feedback="checksum present")

    def verdicts(turn):
        criteria = numbered(turn.task, "Completion criteria:")
        if criteria != DEEPEST["completion_criteria"]:
            return [{"criterion": i, "verdict": "pass", "evidence": "ok"} for i in range(1, len(criteria) + 1)]
        trajectory = turn.results[-1]
        latest_report = trajectory.rsplit("calls: submit_report(", 1)[-1]
        read = "(read_file): bytes: 7 7 8 1" in trajectory
        stated = "checksum=7781" in latest_report
        return [{"criterion": 1, "verdict": "pass" if read else "fail", "evidence": "read_file result in trajectory"},
                {"criterion": 2, "verdict": "pass" if stated else "fail",
                 "evidence": "latest report states it" if stated else "no checksum=NNNN in the latest report"}]

    brain.hooks = {"d4": d4, "d5": d5}
    brain.verdicts = verdicts
    result = await run_root(make_runner(brain), rooted(workspace=str(tmp_path)))
    return brain, result, seen


async def test_the_deepest_report_is_rejected_by_its_validator_then_revised_and_accepted(tmp_path):
    brain, result, seen = await _run(tmp_path)
    assert result.status == "completed"
    traces = await chain(brain.store, ROOT_ID)
    d4, d5 = traces[4], traces[5]
    first, second = judged(d5)
    assert first["verdict"] == "fail"
    assert [c["verdict"] for c in first["criteria"]] == ["pass", "fail"]
    assert first["criteria"][1]["evidence"] == "no checksum=NNNN in the latest report"
    assert second["verdict"] == "pass" and [c["verdict"] for c in second["criteria"]] == ["pass", "pass"]
    validator_ids = [v.trace_id for v in await validators_of(brain.store, d5.trace_id)]
    assert [first["validator_trace_id"], second["validator_trace_id"]] == validator_ids
    rejected, accepted = seen["d4_outcomes"]
    assert "Validation [criteria] verdict: fail" in rejected and "[fail] the checksum is stated" in rejected
    assert "Validation [criteria] verdict: pass" in accepted and "output: checksum=7781" in accepted
    assert f"[parent review] Revise your work. Feedback: {FEEDBACK}" in seen["d5_prompts"]
    assert [(r["decision"], r["feedback"]) for r in protocol(d4)["reviews"]] == [
        ("revise", FEEDBACK), ("accept", "checksum present")]
    assert protocol(d5)["review"]["decision"] == "accept"
    assert protocol(d5)["report"]["outputs"] == ["checksum=7781"]
    assert d4.lineage.child_count == 1
    assert (await brain.store.get_resource_usage(ROOT_ID)).agents == 6


async def test_every_level_accepts_and_the_root_result_is_independently_validated(tmp_path):
    brain, result, _ = await _run(tmp_path)
    traces = await chain(brain.store, ROOT_ID)
    assert len(traces) == 6
    for parent, child in zip(traces[:4], traces[1:4]):
        assert [r["decision"] for r in protocol(parent)["reviews"]] == ["accept"]
        assert [v["verdict"] for v in judged(child)] == ["pass"]
    assert all(protocol(t)["pending_reviews"] == [] for t in traces[:5])
    (root_validator,) = await validators_of(brain.store, ROOT_ID)
    assert root_validator.protocol.validator.scope == "root"
    assert root_validator.agent_type == "validator" and root_validator.status == "completed"
    assert protocol(root_validator)["validation"]["verdict"] == "pass"
    (root_validation,) = protocol(traces[0])["validations"]
    assert (root_validation["verdict"], root_validation["validator_trace_id"]) == ("pass", root_validator.trace_id)
    assert root_validation["target_trace_id"] == ROOT_ID
    root_messages = await brain.store.get_trace_messages(root_validator.trace_id)
    assert "Candidate answer (claim):\nThe checksum is 7781." in root_messages[1].text
    assert result.answer == "The checksum is 7781."
    # The deepest level finished (and was accepted) before its ancestors reported.
    d5_done = traces[5].completed_at
    assert all(d5_done <= t.completed_at for t in traces[:5])
