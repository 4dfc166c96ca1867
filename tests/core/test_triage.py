"""Trigger triage (SPEC H11): strict JSON from a cheap model, fallback, safe default, a cache
of decisions for identical events, and the runs react and full_run start."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.core.triage import (
    REACT_MAX_ITERATIONS,
    Triage,
    TriageDecision,
    TriggerEnvelope,
    parse_decision,
)
from cyber_agent.errors import LLMTransportError
from cyber_agent.llm.fakes import FunctionModel, ScriptedModel
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore


def event(payload: dict[str, Any] | None = None, **fields: Any) -> TriggerEnvelope:
    return TriggerEnvelope(**{"source": "github", "kind": "webhook", "name": "push",
                              "payload": {"ref": "main"} if payload is None else payload, **fields})


def decision_json(action: str, **fields: Any) -> str:
    return json.dumps({"action": action, "reason": f"because {action}", **fields})


# ---- classification ----------------------------------------------------------------------
async def test_cheap_model_json_decides_and_sees_the_event():
    with ScriptedModel(["```json\n" + decision_json("React", task="label the PR",) + "\n```"]) as cheap:
        decision = await Triage(cheap, "tiny").classify(event({"pr": 7}))
    assert decision.action == "react" and decision.task == "label the PR"
    assert decision.model_used == "tiny" and decision.cached is False
    request = cheap.requests[0]
    assert request.model == "tiny" and request.tools is None and request.temperature == 0.0
    assert request.messages[0]["role"] == "system" and '"full_run"' in request.messages[0]["content"]
    prompt = request.messages[1]["content"]
    assert prompt.startswith("SOURCE: github\nKIND: webhook\nNAME: push\nPAYLOAD:\n") and '"pr": 7' in prompt


async def test_a_large_payload_is_cut_for_the_prompt_with_a_marker():
    with ScriptedModel([decision_json("drop")]) as cheap:
        await Triage(cheap, "tiny").classify(event({"log": "é" * 10_000}))
    prompt = cheap.requests[0].messages[1]["content"]
    assert len(prompt.encode()) < 8500 and "\n[...truncated " in prompt and prompt.endswith(" bytes]")


@pytest.mark.parametrize(("reply", "action"), [
    ('Sure. {"action": "DROP", "reason": "heartbeat",}', "drop"),
    ('{"action": "acknowledge", "reason": "fyi"}', "notify"),
    ('{"action": "escalate", "reason": "big", "task": "fix it", "meta": {"n": 1}}', "full_run"),
    ('use {braces} carefully\n{"action": "full run", "reason": "r", "task": "t"}', "full_run"),
])
def test_parse_is_tolerant_like_the_original(reply: str, action: str):
    assert parse_decision(reply).action == action


@pytest.mark.parametrize(("reply", "problem"), [
    ("no json here", "no JSON object"),
    ('{"action": "panic", "reason": "r"}', "invalid decision"),
    ('{"action": "react", "reason": "r"}', "needs a non-blank task"),
    ('{"action": "drop"}', "reason"),
])
def test_parse_failures_say_why(reply: str, problem: str):
    with pytest.raises(ValueError, match=problem):
        parse_decision(reply)


def test_notify_text_defaults_to_the_reason_and_the_model_cannot_claim_a_cache_hit():
    decision = parse_decision('{"action": "notify", "reason": "deploy finished", "cached": true, "model_used": "x"}')
    assert decision.notify_text == "deploy finished"
    assert decision.cached is False and decision.model_used is None


async def test_fallback_model_answers_when_the_cheap_one_cannot_be_parsed():
    with ScriptedModel(["I think you should drop it"]) as cheap, \
            ScriptedModel([decision_json("notify", notify_text="build broke")]) as fallback:
        decision = await Triage(cheap, "tiny", fallback, "big").classify(event())
    assert decision.action == "notify" and decision.notify_text == "build broke" and decision.model_used == "big"


async def test_fallback_model_answers_when_the_cheap_one_fails_or_picks_an_invalid_action():
    with ScriptedModel([LLMTransportError("local model down")]) as cheap, \
            ScriptedModel([decision_json("drop")]) as fallback:
        assert (await Triage(cheap, "tiny", fallback, "big").classify(event())).model_used == "big"
    with ScriptedModel([decision_json("celebrate")]) as cheap, ScriptedModel([decision_json("drop")]) as fallback:
        assert (await Triage(cheap, "tiny", fallback, "big").classify(event())).action == "drop"


async def test_both_failing_gives_the_safe_default_notify_with_the_reasons():
    with ScriptedModel(["nonsense"]) as cheap, ScriptedModel([LLMTransportError("offline")]) as fallback:
        decision = await Triage(cheap, "tiny", fallback, "big").classify(event())
    assert decision.action == "notify" and decision.model_used is None
    assert "tiny: ValueError: no JSON object" in decision.reason and "big: LLMTransportError: offline" in decision.reason
    assert decision.notify_text and "webhook/github/push" in decision.notify_text


async def test_without_a_fallback_a_failure_gives_the_safe_default():
    with ScriptedModel(["{}"]) as cheap:
        decision = await Triage(cheap, "tiny").classify(event())
    assert decision.action == "notify" and decision.reason.startswith("triage failed")


# ---- cache -------------------------------------------------------------------------------
async def test_identical_events_hit_the_cache_and_different_payloads_miss():
    with ScriptedModel([decision_json("drop"), decision_json("notify")]) as cheap:
        triage = Triage(cheap, "tiny")
        first = await triage.classify(event({"a": 1, "b": [1, 2]}))
        # Same event: key order and received_at do not matter.
        again = await triage.classify(event({"b": [1, 2], "a": 1}, received_at="2030-01-01T00:00:00Z"))
        other = await triage.classify(event({"a": 2, "b": [1, 2]}))
    assert len(cheap.requests) == 2
    assert (first.action, first.cached) == ("drop", False)
    assert (again.action, again.cached, again.model_used) == ("drop", True, "tiny")
    assert (other.action, other.cached) == ("notify", False)


async def test_source_kind_and_name_are_part_of_the_key():
    model = FunctionModel(lambda messages, tools: decision_json("drop"))
    triage = Triage(model, "tiny")
    for envelope in (event(), event(source="gitlab"), event(kind="cron"), event(name="tag")):
        assert (await triage.classify(envelope)).cached is False
    assert len(model.requests) == 4 and triage.cache_len == 4


async def test_the_cache_is_lru_bounded_and_the_safe_default_is_not_cached():
    model = FunctionModel(lambda messages, tools: decision_json("drop"))
    triage = Triage(model, "tiny", cache_size=2)
    a, b, c = event({"n": 1}), event({"n": 2}), event({"n": 3})
    await triage.classify(a)
    await triage.classify(b)
    assert (await triage.classify(a)).cached  # a is now the most recent
    await triage.classify(c)  # evicts b
    assert triage.cached_decision(b) is None and triage.cached_decision(a) is not None
    with ScriptedModel(["junk", "junk"]) as broken:
        failing = Triage(broken, "tiny")
        assert not (await failing.classify(a)).cached
        assert not (await failing.classify(a)).cached  # asked again: failures are not remembered


# ---- acting on a decision ----------------------------------------------------------------
def make_runner(model) -> tuple[AgentRunner, InMemoryTraceStore]:
    store = InMemoryTraceStore()
    return AgentRunner(trace_store=store, llm_call=model, tool_registry=ToolRegistry()), store


async def test_full_run_starts_a_normal_trace(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("AGENT_MODE", raising=False)
    with ScriptedModel([decision_json("full_run", task="Investigate the failing nightly build.")]) as cheap, \
            ScriptedModel(["The build fails because of a missing dependency."]) as agent:
        runner, store = make_runner(agent)
        outcome = await Triage(cheap, "tiny").handle(event(kind="cron", source="scheduler", name="nightly"), runner)
    assert outcome.decision.action == "full_run" and outcome.status == "completed"
    assert outcome.answer == "The build fails because of a missing dependency."
    trace = await store.get_trace(outcome.trace_id)
    assert trace is not None and trace.parent_trace_id is None and trace.agent_type == "orchestrator"
    assert trace.task == "Investigate the failing nightly build."
    assert trace.context["trigger"]["action"] == "full_run" and trace.context["trigger"]["name"] == "nightly"
    assert agent.requests[0].messages[-1] == {"role": "user", "content": "Investigate the failing nightly build."}


async def test_react_runs_briefly_and_drop_and_notify_start_nothing(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AGENT_MODE", "recursive")  # a reaction is legacy unless the template says otherwise
    replies = [decision_json("react", task="Say hi."), decision_json("drop"), decision_json("notify")]
    with ScriptedModel(replies) as cheap, ScriptedModel(["hi"]) as agent:
        runner, store = make_runner(agent)
        triage = Triage(cheap, "tiny")
        reacted = await triage.handle(event({"n": 1}), runner)
        dropped = await triage.handle(event({"n": 2}), runner)
        notified = await triage.handle(event({"n": 3}), runner)
    trace = await store.get_trace(reacted.trace_id)
    assert trace is not None and trace.agent_type == "trigger_reactor" and reacted.answer == "hi"
    assert trace.lineage.mode == "legacy"
    assert trace.run_config is not None and trace.run_config.config["max_iterations"] == REACT_MAX_ITERATIONS
    assert dropped.trace_id is None and notified.trace_id is None and notified.decision.notify_text
    assert len(await store.list_traces()) == 1


def test_plan_keeps_the_template_and_always_starts_a_new_root():
    decision = TriageDecision(action="full_run", reason="r", task="do it")
    template = RunConfig(model="openai:gpt-x", max_iterations=7, trace_id="old", context={"team": "ops"})
    planned = Triage(ScriptedModel(), "tiny").plan(event(), decision, template)
    assert planned is not None
    config = planned.config
    assert config.trace_id is None and config.new_trace_id == planned.trace_id
    assert (config.model, config.max_iterations, config.agent_type) == ("openai:gpt-x", 7, "orchestrator")
    assert config.context["team"] == "ops" and config.context["trigger"]["reason"] == "r"
    assert config.root_task_anchor is not None and config.root_task_anchor["objective"] == "do it"


# ---- never raises --------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
model_outputs = st.one_of(
    st.text(max_size=300),
    st.builds(lambda d: json.dumps(d), st.dictionaries(st.sampled_from(["action", "reason", "task", "notify_text", "x"]),
                                                       json_values, max_size=5)),
    st.builds(lambda a, r, t: f'```\n{{"action": {json.dumps(a)}, "reason": {json.dumps(r)}, "task": {json.dumps(t)},}}\n```',
              st.sampled_from(["drop", "notify", "react", "full_run", "FULL-RUN", "??"]), st.text(max_size=20),
              st.none() | st.text(max_size=20)),
    st.just(LLMTransportError("down")),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=st.dictionaries(st.text(max_size=10), json_values, max_size=5), first=model_outputs, second=model_outputs)
async def test_classify_never_raises(payload: dict[str, Any], first: Any, second: Any):
    triage = Triage(ScriptedModel([first]), "tiny", ScriptedModel([second]), "big")
    decision = await triage.classify(event(payload))
    assert decision.action in ("drop", "notify", "react", "full_run")
    assert decision.reason
    if decision.action in ("react", "full_run"):
        assert decision.task
    if decision.action == "notify":
        assert decision.notify_text
