"""ArtifactRef resolution (SPEC A5): hashes filled at report time, checked at validation, one tree only."""

from __future__ import annotations

import hashlib

import pytest
from protocol_helpers import (
    judged,
    ROOT_ID,
    call,
    calls_of,
    children_of,
    clean_agent_env,  # noqa: F401 - autouse fixture
    make_runner,
    new_brain,
    protocol,
    rooted,
    run_root,
)


def _reading_child(artifact_of):
    """A depth-1 hook: read data.txt, then report with the artifacts `artifact_of(turn, own_result_id)` names."""
    async def hook(turn):
        if not turn.results:
            return call("read_file", path="data.txt")
        if calls_of(turn.messages, "submit_report"):
            return None
        mine = await turn.trace()
        own_result = f"{mine.trace_id}-{len(turn.messages):04d}"
        hook.own_result = own_result
        return call("submit_report", outcome="completed", summary="checksum found", outputs=["7781"],
                    artifacts=artifact_of(turn, own_result))
    return hook


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "data.txt").write_text("checksum: 7781")
    return str(tmp_path)


async def test_submit_report_fills_the_hash_of_each_artifact_and_ignores_a_claimed_one(workspace):
    brain = new_brain(levels=1)
    child = _reading_child(lambda turn, own: [{"message_id": own, "title": "file", "sha256": "forged"}])
    brain.hooks = {"d1": child}
    await run_root(make_runner(brain), rooted(workspace=workspace))
    (trace,) = await children_of(brain.store, ROOT_ID)
    (artifact,) = protocol(trace)["report"]["artifacts"]
    message = await brain.store.get_message(child.own_result)
    assert message.text == "checksum: 7781"
    assert artifact == {"message_id": child.own_result, "title": "file",
                        "sha256": hashlib.sha256(b"checksum: 7781").hexdigest()}


@pytest.mark.parametrize("tamper", [False, True])
async def test_read_artifact_reports_a_hash_mismatch_when_the_message_changed(workspace, tamper):
    brain = new_brain(levels=1)
    child = _reading_child(lambda turn, own: [{"message_id": own, "title": "file"}])
    seen = {}

    async def validator(turn):
        if not turn.task.startswith("# Validation (criteria)"):
            return None
        if not turn.results:
            if tamper:
                await brain.store.update_message(child.own_result, content="checksum: 1111")
            return call("read_artifact", message_id=child.own_result)
        seen["artifact"] = turn.results[0]
        ok = "HASH MISMATCH" not in turn.results[0]
        return call("submit_validation", verdicts=[{"criterion": 1, "verdict": "pass" if ok else "fail"}])

    brain.hooks = {"d1": child, "validator": validator}
    await run_root(make_runner(brain), rooted(workspace=workspace))
    (trace,) = await children_of(brain.store, ROOT_ID)
    if tamper:
        assert "HASH MISMATCH" in seen["artifact"] and "checksum: 1111" in seen["artifact"]
        assert judged(trace)[0]["verdict"] == "fail"
    else:
        assert "HASH MISMATCH" not in seen["artifact"] and "checksum: 7781" in seen["artifact"]
        assert judged(trace)[0]["verdict"] == "pass"


async def test_artifacts_and_trajectories_of_another_tree_are_refused(workspace):
    brain = new_brain(levels=0)
    runner = make_runner(brain)
    other = (await run_root(runner, task="another tree")).trace.trace_id
    seen = {}

    def validator(turn):
        if not turn.task.startswith("# Validation (criteria)"):
            return None
        probes = [call("read_artifact", message_id=f"{other}-0002"), call("read_trajectory", trace_id=other),
                  call("read_artifact", message_id=f"{ROOT_ID}-0002")]
        if len(turn.results) < len(probes):
            return probes[len(turn.results)]
        seen["results"] = turn.results
        return None

    brain.levels = 1
    brain.hooks = {"validator": validator}
    await run_root(runner, rooted(workspace=workspace))
    foreign_artifact, foreign_trajectory, own_tree = seen["results"]
    assert "not part of this task tree" in foreign_artifact and "another tree" not in foreign_artifact
    assert "neither the validation target" in foreign_trajectory
    assert own_tree.startswith(f"Artifact {ROOT_ID}-0002")


async def test_a_child_can_only_cite_its_own_messages(workspace):
    brain = new_brain(levels=0)
    runner = make_runner(brain)
    other = (await run_root(runner, task="another tree")).trace.trace_id
    attempts = [
        lambda own: [{"message_id": f"{ROOT_ID}-0002"}],
        lambda own: [{"message_id": f"{other}-0002"}],
        lambda own: [{"message_id": own.rsplit("-", 1)[0] + "-0099"}],
        lambda own: [{"message_id": own, "title": "file"}],
    ]
    refusals = []

    async def child(turn):
        if not turn.results:
            return call("read_file", path="data.txt")
        tried = len(calls_of(turn.messages, "submit_report"))
        if tried:
            refusals.append(turn.results[-1])
        if tried == len(attempts):
            return None
        mine = await turn.trace()
        own = f"{mine.trace_id}-0004"
        return call("submit_report", outcome="completed", summary="s", artifacts=attempts[tried](own))

    brain.levels = 1
    brain.hooks = {"d1": child}
    result = await run_root(runner, rooted(workspace=workspace))
    assert result.status == "completed"
    parent_message, foreign_message, missing = refusals[:3]
    assert "is not a message of your own trace" in parent_message
    assert "is not a message of your own trace" in foreign_message
    assert "does not exist" in missing
    (trace,) = await children_of(brain.store, ROOT_ID)
    (artifact,) = protocol(trace)["report"]["artifacts"]
    assert artifact["message_id"] == f"{trace.trace_id}-0004"
