"""Runtime extensions of the protocol (SPEC A5, A8, A10): root gate, validator budget, after a stop."""

from __future__ import annotations

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
    pending_of,
    protocol,
    rooted,
    run_root,
    text,
    validators_of,
)

from cyber_agent.errors import LLMTransportError


async def test_the_root_answer_is_only_a_candidate_until_the_root_validator_passes_it():
    brain = new_brain(levels=0)
    seen = []

    async def validator(turn):
        root = await brain.store.get_trace(ROOT_ID)
        seen.append((root.status, root.result_summary))
        if len(seen) == 1:
            return text("I could not decide.")
        return None

    def root(turn):
        last = turn.messages[-1]["content"]
        if last.startswith("[root validator]"):
            seen.append(("feedback", last))
        return None

    brain.hooks = {"validator": validator, "d0": root}
    result = await run_root(make_runner(brain), rooted())
    assert result.status == "completed" and result.answer == brain.answer
    (first, feedback, second, _submit) = seen
    assert first == ("running", None) and second == ("running", None)
    assert "verdict: unknown" in feedback[1] and "Revise and answer again" in feedback[1]
    assert [v["verdict"] for v in protocol(result.trace)["validations"]] == ["unknown", "pass"]


def _budget(monkeypatch, calls: int, reserved: int) -> None:
    monkeypatch.setenv("AGENT_MAX_LLM_CALLS", str(calls))
    monkeypatch.setenv("AGENT_RESERVED_FINAL_CALLS", str(reserved))


def _list_then_answer(turn):
    return call("list_files") if not turn.results else None


async def test_the_root_validator_runs_on_the_reserved_calls(monkeypatch, tmp_path):
    _budget(monkeypatch, calls=4, reserved=2)
    brain = new_brain(levels=0)
    brain.hooks = {"d0": _list_then_answer}
    result = await run_root(make_runner(brain), rooted(workspace=str(tmp_path)))
    assert result.status == "completed"
    usage = await brain.store.get_resource_usage(ROOT_ID)
    assert (usage.llm_calls, usage.root_validator_calls, usage.refusals) == (4, 2, 0)
    assert protocol(result.trace)["validations"][0]["verdict"] == "pass"


async def test_an_agent_cannot_touch_the_reserve_after_a_rejection(monkeypatch, tmp_path):
    _budget(monkeypatch, calls=4, reserved=2)
    brain = new_brain(levels=0)
    brain.hooks = {"d0": _list_then_answer}
    brain.verdicts = lambda turn: [{"criterion": 1, "verdict": "fail", "evidence": "no"}]
    result = await run_root(make_runner(brain), rooted(workspace=str(tmp_path)))
    assert result.status == "failed"
    assert "llm_calls" in result.trace.error_message
    usage = await brain.store.get_resource_usage(ROOT_ID)
    assert usage.llm_calls == 4 and usage.refusals == 1
    assert "llm_calls" in usage.last_refusal
    assert len(brain.llm.requests) == 4


async def test_a_criteria_validator_cannot_use_the_reserve_and_yields_unknown(monkeypatch):
    _budget(monkeypatch, calls=5, reserved=2)
    brain = new_brain(levels=1)
    result = await run_root(make_runner(brain), rooted())
    (child,) = await children_of(brain.store, ROOT_ID)
    (validation,) = judged(child)
    assert validation["verdict"] == "unknown"
    assert "llm_calls" in validation["summary"]
    (validator,) = await validators_of(brain.store, child.trace_id)
    assert validator.status == "failed"
    assert result.status == "failed" and "llm_calls" in result.trace.error_message
    assert (await brain.store.get_resource_usage(ROOT_ID)).root_validator_calls == 0


async def test_validator_tool_calls_are_budgeted_and_an_exhausted_validator_never_passes(monkeypatch):
    monkeypatch.setenv("AGENT_MAX_VALIDATION_TOOL_CALLS", "1")
    brain = new_brain(levels=1)

    def validator(turn):
        if turn.task.startswith("# Validation (criteria)") and len(turn.results) < 2:
            return call("read_trajectory")
        return None

    brain.hooks = {"validator": validator}
    await run_root(make_runner(brain), rooted())
    (child,) = await children_of(brain.store, ROOT_ID)
    (validation,) = judged(child)
    assert validation["verdict"] == "unknown"
    assert "validation_tool_calls" in validation["summary"]
    usage = await brain.store.get_resource_usage(ROOT_ID)
    assert usage.validation_tool_calls == 1 and "validation_tool_calls" in usage.last_refusal


async def test_a_validator_tool_call_over_the_budget_is_not_executed(monkeypatch):
    monkeypatch.setenv("AGENT_MAX_VALIDATION_TOOL_CALLS", "1")
    brain = new_brain(levels=1)

    def validator(turn):
        if turn.task.startswith("# Validation (criteria)") and len(turn.results) < 2:
            return call("read_trajectory")
        return None

    brain.hooks = {"validator": validator}
    await run_root(make_runner(brain), rooted())
    (child,) = await children_of(brain.store, ROOT_ID)
    (validator_trace,) = await validators_of(brain.store, child.trace_id)
    executed = [m for m in await brain.store.get_trace_messages(validator_trace.trace_id)
                if m.role == "tool" and not m.metadata.get("is_error")]
    assert len(executed) == 1
    assert validator_trace.status == "failed" and "validation_tool_calls" in validator_trace.error_message


def _stopping_child(runner_box):
    async def hook(turn):
        mine = await turn.trace()
        runner_box["runner"].stop(mine.trace_id, "operator pressed stop")
        return call("read_file", path="never-read.txt")
    return hook


@pytest.mark.parametrize("ending", ["stopped", "provider-error", "out-of-iterations"])
async def test_a_child_that_did_not_report_returns_a_runner_failed_report_judged_fail(ending):
    brain = new_brain(levels=1)
    box = {}
    reviewed = {}

    async def child(turn):
        if ending == "stopped":
            return await _stopping_child(box)(turn)
        if ending == "provider-error":
            raise LLMTransportError("connection reset by peer")
        return call("list_files")

    async def root(turn):
        if turn.role == "parent":
            reviewed["outcome"] = turn.results[-1]
            return call("review_task", child_trace_id=(await pending_of(turn))[0], decision="fail", feedback="stopped")
        return None

    brain.hooks = {"d1": child, "d0": root}
    box["runner"] = runner = make_runner(brain)
    result = await run_root(runner, rooted(max_iterations=3))
    assert result.status == "completed"
    (trace,) = await children_of(brain.store, ROOT_ID)
    expected_status = {"stopped": "stopped", "provider-error": "failed", "out-of-iterations": "stopped"}[ending]
    assert trace.status == expected_status
    report = protocol(trace)["report"]
    assert (report["outcome"], report["submitted_by"]) == ("failed", "runner")
    reason = {"stopped": "operator pressed stop", "provider-error": "connection reset",
              "out-of-iterations": "max_iterations (3)"}[ending]
    assert reason in report["summary"]
    assert await validators_of(brain.store, trace.trace_id) == []
    assert f"Child {trace.trace_id} [{expected_status}] outcome=failed" in reviewed["outcome"]
    assert "Validation [criteria] verdict: fail (validator None)" in reviewed["outcome"]
    if ending == "stopped":
        messages = await brain.store.get_trace_messages(trace.trace_id)
        assert messages[-1].role == "assistant" and messages[-1].tool_calls[0].name == "read_file"
        assert not calls_of([m.to_llm_message() for m in messages], "submit_report")


async def test_the_fail_verdict_of_a_stopped_child_is_recorded_on_the_child():
    brain = new_brain(levels=1)
    box = {}
    brain.hooks = {"d1": _stopping_child(box)}
    box["runner"] = runner = make_runner(brain)
    await run_root(runner, rooted())
    (trace,) = await children_of(brain.store, ROOT_ID)
    (validation,) = protocol(trace).get("validations", [])
    assert validation["verdict"] == "fail" and validation["validator_trace_id"] is None


async def test_stopping_a_child_leaves_its_parent_running():
    brain = new_brain(levels=1)
    box = {}
    brain.hooks = {"d1": _stopping_child(box)}
    box["runner"] = runner = make_runner(brain)
    result = await run_root(runner, rooted())
    assert result.status == "completed"
    assert [r["decision"] for r in protocol(result.trace)["reviews"]] == ["accept"]
    assert protocol(result.trace)["validations"][-1]["verdict"] == "pass"
    assert runner.running() == []
