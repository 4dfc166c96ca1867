"""Independent validators (SPEC A5, A11): own traces, per-criterion verdicts, root gate."""

from __future__ import annotations

import pytest
from protocol_helpers import (
    judged,
    ROOT_ID,
    brief,
    call,
    calls_of,
    children_of,
    clean_agent_env,  # noqa: F401 - autouse fixture
    make_runner,
    new_brain,
    protocol,
    rooted,
    run_root,
    text,
    validators_of,
)

from cyber_agent.core.task_protocol import aggregate_verdict
from cyber_agent.errors import LLMTransportError
from cyber_agent.llm.types import Usage

THREE = brief("check the file", "the file is read", "the checksum is computed", "the checksum is reported")


def _child_with(criteria_brief):
    """A depth-0 hook delegating `criteria_brief` once."""
    def hook(turn):
        if turn.role == "root" and not calls_of(turn.messages, "agent"):
            return call("agent", task_brief=criteria_brief)
        return None
    return hook


async def test_validators_are_sub_traces_of_what_they_judge_and_count_for_calls_not_agents():
    brain = new_brain(levels=1, usage=Usage(prompt_tokens=10, completion_tokens=5), cost=0.01)
    result = await run_root(make_runner(brain), rooted())
    assert result.status == "completed"
    (child,) = await children_of(brain.store, ROOT_ID)
    (child_validator,) = await validators_of(brain.store, child.trace_id)
    (root_validator,) = await validators_of(brain.store, ROOT_ID)
    for validator, target, scope in ((child_validator, child, "criteria"), (root_validator, result.trace, "root")):
        assert validator.agent_type == "validator" and validator.parent_trace_id == target.trace_id
        assert validator.lineage.created_by_tool == "validator"
        assert validator.protocol.validator.scope == scope
        assert validator.protocol.validator.target_trace_id == target.trace_id
        assert validator.lineage.root_trace_id == ROOT_ID
    assert judged(child)[0]["validator_trace_id"] == child_validator.trace_id
    assert protocol(result.trace)["validations"][0]["validator_trace_id"] == root_validator.trace_id
    agents_only = await brain.store.list_traces(parent_trace_id=ROOT_ID, created_by_tool="agent")
    assert [t.trace_id for t in agents_only] == [child.trace_id]
    assert "child_count" not in result.trace.context and result.trace.lineage.child_count == 1
    usage = await brain.store.get_resource_usage(ROOT_ID)
    calls = len(brain.llm.requests)
    validator_calls = sum("submit_validation" in r.tool_names for r in brain.llm.requests)
    assert validator_calls == 4
    assert usage.agents == 2
    assert usage.llm_calls == calls
    assert usage.total_tokens == 15 * calls
    assert usage.cost_usd == pytest.approx(0.01 * calls)
    assert usage.validation_tool_calls == 2


@pytest.mark.parametrize("verdicts, aggregate, per_criterion", [
    ({1: "pass", 2: "pass", 3: "pass"}, "pass", ["pass", "pass", "pass"]),
    ({1: "pass", 2: "fail", 3: "pass"}, "fail", ["pass", "fail", "pass"]),
    ({1: "pass", 2: "unknown", 3: "pass"}, "unknown", ["pass", "unknown", "pass"]),
    ({1: "unknown", 2: "fail", 3: "pass"}, "fail", ["unknown", "fail", "pass"]),
    ({1: "pass", 3: "pass"}, "unknown", ["pass", "unknown", "pass"]),
])
async def test_each_criterion_gets_a_verdict_and_the_aggregate_follows(verdicts, aggregate, per_criterion):
    brain = new_brain(levels=1)
    brain.hooks = {"d0": _child_with(THREE)}
    brain.verdicts = lambda turn: ([{"criterion": c, "verdict": v, "evidence": f"e{c}"} for c, v in verdicts.items()]
                                   if turn.task.startswith("# Validation (criteria)") else
                                   [{"criterion": 1, "verdict": "pass"}, {"criterion": 2, "verdict": "pass"}])
    await run_root(make_runner(brain), rooted())
    (child,) = await children_of(brain.store, ROOT_ID)
    (validation,) = judged(child)
    assert validation["verdict"] == aggregate
    assert [c["criterion"] for c in validation["criteria"]] == THREE["completion_criteria"]
    assert [c["verdict"] for c in validation["criteria"]] == per_criterion
    (validator,) = await validators_of(brain.store, child.trace_id)
    assert protocol(validator)["validation"]["verdict"] == aggregate


def test_aggregate_verdict_rules():
    assert aggregate_verdict([]) == "unknown"
    assert aggregate_verdict(["pass"]) == "pass"
    assert aggregate_verdict(["pass", "unknown"]) == "unknown"
    assert aggregate_verdict(["unknown", "pass", "fail"]) == "fail"


async def test_a_verdict_for_a_criterion_that_does_not_exist_is_refused():
    brain = new_brain(levels=1)
    refusals = []

    def validator(turn):
        if not turn.task.startswith("# Validation (criteria)"):
            return None
        if not calls_of(turn.messages, "submit_validation"):
            return call("submit_validation", verdicts=[{"criterion": 4, "verdict": "pass"}])
        refusals.append(turn.results[-1])
        return call("submit_validation", verdicts=[{"criterion": 1, "verdict": "pass"}])

    brain.hooks = {"validator": validator}
    await run_root(make_runner(brain), rooted())
    assert "criterion 4 does not exist" in refusals[0]
    (child,) = await children_of(brain.store, ROOT_ID)
    assert judged(child)[0]["verdict"] == "pass"


@pytest.mark.parametrize("failure", ["crash", "provider-error", "no-submission"])
async def test_a_validator_that_fails_to_judge_yields_unknown_never_pass(failure):
    brain = new_brain(levels=1)

    def validator(turn):
        if not turn.task.startswith("# Validation (criteria)"):
            return None
        if failure == "crash":
            raise RuntimeError("validator model exploded")
        if failure == "provider-error":
            raise LLMTransportError("connection reset")
        return text("Looks fine to me, everything passes.")

    brain.hooks = {"validator": validator}
    await run_root(make_runner(brain), rooted())
    (child,) = await children_of(brain.store, ROOT_ID)
    (validation,) = judged(child)
    assert validation["verdict"] == "unknown"
    assert {c["verdict"] for c in validation["criteria"]} == {"unknown"}
    (validator_trace,) = await validators_of(brain.store, child.trace_id)
    assert validation["validator_trace_id"] == validator_trace.trace_id
    if failure == "crash":
        assert "validator crashed: RuntimeError" in validation["summary"]
    else:
        assert "no verdict" in validation["summary"]


async def test_a_crashed_validator_trace_does_not_stay_running():
    brain = new_brain(levels=1)

    def validator(turn):
        if turn.task.startswith("# Validation (criteria)"):
            raise RuntimeError("validator model exploded")
        return None

    brain.hooks = {"validator": validator}
    await run_root(make_runner(brain), rooted())
    (child,) = await children_of(brain.store, ROOT_ID)
    (validator_trace,) = await validators_of(brain.store, child.trace_id)
    assert validator_trace.status == "failed"


async def test_the_validator_judges_the_persisted_trajectory_not_the_self_description(tmp_path):
    (tmp_path / "data.txt").write_text("MAGIC-1234")
    brain = new_brain(levels=1)
    seen = {}

    def child(turn):
        if not turn.results:
            return call("read_file", path="data.txt")
        return call("submit_report", outcome="completed", summary="I read nothing but trust me", outputs=["MAGIC-0000"])

    def validator(turn):
        if not turn.task.startswith("# Validation (criteria)"):
            return None
        if not turn.results:
            return call("read_trajectory", trace_id=ROOT_ID)
        if len(turn.results) == 1:
            return call("read_trajectory")
        seen.update(task=turn.task, refused=turn.results[0], trajectory=turn.results[1])
        claimed = "MAGIC-0000" in turn.results[1].split("submit_report")[0]
        return call("submit_validation", verdicts=[{"criterion": 1, "verdict": "pass" if claimed else "fail",
                                                    "evidence": "tool result shows MAGIC-1234"}])

    brain.hooks = {"d1": child, "validator": validator}
    await run_root(make_runner(brain), rooted(workspace=str(tmp_path)))
    assert "MAGIC-0000" in seen["task"] and "claim" in seen["task"]
    assert "neither the validation target" in seen["refused"]
    assert "(read_file): MAGIC-1234" in seen["trajectory"]
    assert "submit_report" in seen["trajectory"]
    (child_trace,) = await children_of(brain.store, ROOT_ID)
    assert judged(child_trace)[0]["verdict"] == "fail"


async def test_validator_models_are_frozen_when_the_root_is_created(monkeypatch):
    monkeypatch.setenv("AGENT_VALIDATOR_MODEL", "criteria-judge-v1")
    monkeypatch.setenv("AGENT_ROOT_VALIDATOR_MODEL", "root-judge-v1")
    brain = new_brain(levels=1)

    def root(turn):
        monkeypatch.setenv("AGENT_VALIDATOR_MODEL", "criteria-judge-v2")
        monkeypatch.setenv("AGENT_ROOT_VALIDATOR_MODEL", "root-judge-v2")
        return None

    brain.hooks = {"d0": root}
    result = await run_root(make_runner(brain), rooted())
    assert result.trace.root_setup.validator_models.model_dump() == {"criteria": "criteria-judge-v1", "root": "root-judge-v1"}
    (child,) = await children_of(brain.store, ROOT_ID)
    (child_validator,) = await validators_of(brain.store, child.trace_id)
    (root_validator,) = await validators_of(brain.store, ROOT_ID)
    assert (child_validator.model, root_validator.model) == ("criteria-judge-v1", "root-judge-v1")
    assert set(brain.validator_models) == {"criteria-judge-v1", "root-judge-v1"}
    assert brain.validator_models[-1] == "root-judge-v1"
    assert child.model == "demo"


@pytest.mark.parametrize("env, expected", [
    ({"AGENT_VALIDATOR_MODEL": "judge"}, {"criteria": "judge", "root": "judge"}),
    ({}, {"criteria": "agent-model", "root": "agent-model"}),
])
async def test_validator_models_default_to_the_criteria_model_then_the_run_model(monkeypatch, env, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    brain = new_brain(levels=0)
    result = await run_root(make_runner(brain), rooted(model="agent-model"))
    assert result.trace.root_setup.validator_models.model_dump() == expected
    assert brain.validator_models == [expected["root"]] * 2


async def test_a_rejected_root_answer_goes_back_to_the_root_which_answers_again():
    brain = new_brain(levels=0)
    answers = iter(["The checksum is 1111.", "The checksum is 7781, from data.txt."])
    feedback = []

    def root(turn):
        if turn.messages[-1]["role"] == "user" and turn.messages[-1]["content"].startswith("[root validator]"):
            feedback.append(turn.messages[-1]["content"])
        return text(next(answers))

    def verdicts(turn):
        good = "7781" in turn.task
        return [{"criterion": 1, "verdict": "pass"},
                {"criterion": 2, "verdict": "pass" if good else "fail", "evidence": "no source named"}]

    brain.hooks, brain.verdicts = {"d0": root}, verdicts
    result = await run_root(make_runner(brain), rooted())
    assert result.status == "completed"
    assert result.answer == "The checksum is 7781, from data.txt."
    (note,) = feedback
    assert "not accepted" in note and "[fail] the checksum is derived from the workspace file — no source named" in note
    assert [v["verdict"] for v in protocol(result.trace)["validations"]] == ["fail", "pass"]
    assert [v.protocol.validator.scope for v in await validators_of(brain.store, ROOT_ID)] == ["root", "root"]


async def test_the_root_fails_after_three_rejected_answers():
    brain = new_brain(levels=0)
    brain.verdicts = lambda turn: [{"criterion": 1, "verdict": "fail", "evidence": "wrong"}]
    result = await run_root(make_runner(brain), rooted())
    assert result.status == "failed" and result.answer is None
    assert "after 3 attempts" in result.trace.error_message
    assert len(await validators_of(brain.store, ROOT_ID)) == 3
    assert [v["verdict"] for v in protocol(result.trace)["validations"]] == ["fail"] * 3
    root_turns = [r for r in brain.llm.requests if "submit_validation" not in r.tool_names]
    assert len(root_turns) == 3
