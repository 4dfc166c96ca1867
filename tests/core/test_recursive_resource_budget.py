"""Tree budget (SPEC A10): parsing, snapshot, persisted usage, reservation, refusals, fail-closed, races."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from recursive_helpers import (
    ROOT,
    TASK,
    VALIDATOR,
    TreeModel,
    brief,
    call,
    calls,
    clean_agent_env,  # noqa: F401  (autouse fixture)
    FailingStartStore,
    YieldingStore,
    delegate,
    make_runner,
    recursive_config,
    usage_of,
)

from cyber_agent.core.config import RunConfig
from cyber_agent.core.resource_budget import BUDGET_ENV, ResourceBudget, ResourceBudgetController, ResourceUsage
from cyber_agent.core.runner import default_registry
from cyber_agent.errors import BudgetExceededError, ConfigurationError
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.llm.types import Usage
from cyber_agent.tools.context import ToolContext
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore, Trace
from cyber_agent.trace.models import utc_now

USAGE = Usage(prompt_tokens=10, completion_tokens=5)
GOALS = [call("goal", add=f"step {i}") for i in range(6)]


def set_env(monkeypatch, **values) -> None:
    for name, value in values.items():
        monkeypatch.setenv(name, str(value))


# ---- parsing -------------------------------------------------------------------------------------
def test_unset_variables_give_the_documented_defaults():
    assert ResourceBudget.from_environment({}).model_dump() == {
        "enabled": True, "max_total_agents": 50, "max_llm_calls": 150, "max_total_tokens": 1_500_000,
        "max_total_cost_usd": 15.0, "max_duration_seconds": 3600.0, "max_validation_tool_calls": 300,
        "max_validation_material_chars": 1_000_000, "reserved_final_calls": 8,
    }


def test_every_variable_is_read():
    values = {"AGENT_RESOURCE_BUDGET_ENABLED": "false", "AGENT_MAX_TOTAL_AGENTS": "7", "AGENT_MAX_LLM_CALLS": "40",
              "AGENT_MAX_TOTAL_TOKENS": "900", "AGENT_MAX_TOTAL_COST_USD": "0.25", "AGENT_MAX_DURATION_SECONDS": "60",
              "AGENT_MAX_VALIDATION_TOOL_CALLS": "3", "AGENT_MAX_VALIDATION_MATERIAL_CHARS": "5000",
              "AGENT_RESERVED_FINAL_CALLS": "2"}
    budget = ResourceBudget.from_environment(values)
    assert [getattr(budget, field) for field, _ in BUDGET_ENV.values()] == [False, 7, 40, 900, 0.25, 60.0, 3, 5000, 2]


@pytest.mark.parametrize(("name", "value"), [
    ("AGENT_MAX_TOTAL_AGENTS", "0"), ("AGENT_MAX_LLM_CALLS", "-3"), ("AGENT_MAX_TOTAL_TOKENS", "many"),
    ("AGENT_MAX_TOTAL_COST_USD", "nan"), ("AGENT_MAX_TOTAL_COST_USD", "inf"), ("AGENT_MAX_DURATION_SECONDS", "0"),
    ("AGENT_MAX_VALIDATION_TOOL_CALLS", "1.5"), ("AGENT_MAX_VALIDATION_MATERIAL_CHARS", "-1"),
    ("AGENT_RESERVED_FINAL_CALLS", "0"), ("AGENT_RESOURCE_BUDGET_ENABLED", "maybe"),
])
def test_a_bad_value_names_its_variable(name, value):
    with pytest.raises(ConfigurationError) as caught:
        ResourceBudget.from_environment({name: value})
    assert caught.value.setting == name and name in str(caught.value)


@pytest.mark.parametrize(("reserved", "calls_limit"), [(8, 8), (10, 5)])
def test_reserved_final_calls_must_stay_below_the_call_limit(reserved, calls_limit):
    env = {"AGENT_RESERVED_FINAL_CALLS": str(reserved), "AGENT_MAX_LLM_CALLS": str(calls_limit)}
    with pytest.raises(ConfigurationError) as caught:
        ResourceBudget.from_environment(env)
    assert caught.value.setting == "AGENT_RESERVED_FINAL_CALLS"


@pytest.mark.parametrize(("raw", "enabled"), [("true", True), ("1", True), ("YES", True), (" False ", False),
                                              ("0", False), ("no", False), ("", True)])
def test_the_enabled_flag_parses_common_booleans(raw, enabled):
    assert ResourceBudget.from_environment({"AGENT_RESOURCE_BUDGET_ENABLED": raw}).enabled is enabled


@given(calls_limit=st.integers(2, 10**6), agents=st.integers(1, 10**4), data=st.data())
def test_any_positive_limits_round_trip(calls_limit, agents, data):
    reserved = data.draw(st.integers(1, calls_limit - 1))
    budget = ResourceBudget.from_environment({
        "AGENT_MAX_LLM_CALLS": str(calls_limit), "AGENT_RESERVED_FINAL_CALLS": str(reserved),
        "AGENT_MAX_TOTAL_AGENTS": str(agents)})
    assert (budget.max_llm_calls, budget.reserved_final_calls, budget.max_total_agents) == (calls_limit, reserved, agents)
    assert ResourceBudget.model_validate(budget.model_dump()) == budget


async def test_a_bad_budget_refuses_a_recursive_root_before_any_model_call(monkeypatch):
    set_env(monkeypatch, AGENT_MAX_LLM_CALLS="lots")
    model = ScriptedModel(["never played"])
    runner, store = make_runner(model)
    with pytest.raises(ConfigurationError, match="AGENT_MAX_LLM_CALLS"):
        await runner.run_result(TASK, recursive_config())
    assert model.requests == [] and await store.list_traces(limit=None) == []


async def test_legacy_never_parses_the_budget(monkeypatch):
    set_env(monkeypatch, **{name: "garbage" for name in BUDGET_ENV})
    with ScriptedModel(["done"]) as model:
        runner, store = make_runner(model)
        result = await runner.run_result(TASK, RunConfig(agent_mode="legacy"))
    assert result.status == "completed" and "resource_budget" not in result.trace.context
    assert await store.get_resource_usage(result.trace.trace_id) is None


# ---- the snapshot and the persisted usage ----------------------------------------------------------
async def test_the_snapshot_is_frozen_at_root_creation(monkeypatch):
    set_env(monkeypatch, AGENT_MAX_LLM_CALLS=4, AGENT_RESERVED_FINAL_CALLS=1)

    def loosen(key, messages, names):
        monkeypatch.setenv("AGENT_MAX_LLM_CALLS", "1000")  # read at creation only: no effect

    model = TreeModel({ROOT: list(GOALS)}, on_call=loosen)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.trace.root_setup.resource_budget.max_llm_calls == 4
    assert result.status == "failed" and "llm_calls used 3 of limit 3" in result.trace.error_message
    with pytest.raises(ValidationError):
        ResourceBudget().max_llm_calls = 1000


async def test_usage_lives_in_the_roots_resource_usage_json_and_counts_validators_but_not_as_agents(tmp_path):
    model = TreeModel({ROOT: [delegate(brief("child"))]}, usage=USAGE, cost=0.01)
    runner, store = make_runner(model.llm, store=FileSystemTraceStore(tmp_path))
    result = await runner.run_result(TASK, recursive_config())
    root_id = result.trace.trace_id
    on_disk = json.loads((tmp_path / root_id / "resource_usage.json").read_text())
    assert ResourceUsage.model_validate(on_disk) == await store.get_resource_usage(root_id)  # the store reads it typed
    requests = len(model.llm.requests)
    assert model.calls[VALIDATOR] == 2 and requests == 6  # root 3, child 1, two validators
    assert (on_disk["agents"], on_disk["llm_calls"], on_disk["root_validator_calls"]) == (2, requests, 1)
    assert (on_disk["total_tokens"], on_disk["prompt_tokens"]) == (15 * requests, 10 * requests)
    assert on_disk["cost_usd"] == pytest.approx(0.01 * requests)
    assert not [d for d in os.listdir(tmp_path) if d != root_id and (tmp_path / d / "resource_usage.json").exists()]


async def test_calls_are_reserved_before_the_call_and_tokens_booked_after():
    seen: list[tuple[int, int]] = []

    async def look(key, messages, names):
        root = [t for t in await store.list_traces(limit=None) if t.parent_trace_id is None][0]
        usage = await usage_of(store, root.trace_id)
        seen.append((usage["llm_calls"], usage["total_tokens"]))

    model = TreeModel({ROOT: GOALS[:2]}, usage=USAGE, on_call=look)
    runner, store = make_runner(model.llm)
    await runner.run_result(TASK, recursive_config())
    assert seen == [(n, 15 * (n - 1)) for n in range(1, len(seen) + 1)] and len(seen) == 4


async def test_scripted_usage_and_cost_per_reply_are_booked():
    replies = [ScriptedModel.text("the answer", usage=Usage(prompt_tokens=100, completion_tokens=20), cost=0.5),
               ScriptedModel.tool_call("submit_validation", {"verdicts": [{"criterion": 1, "verdict": "pass"}]},
                                       usage=Usage(prompt_tokens=50, completion_tokens=5), cost=0.25)]
    with ScriptedModel(replies) as model:
        runner, store = make_runner(model)
        result = await runner.run_result(TASK, recursive_config())
    usage = await usage_of(store, result.trace.trace_id)
    assert result.status == "completed"
    assert {k: usage[k] for k in ("agents", "llm_calls", "root_validator_calls", "prompt_tokens", "completion_tokens",
                                  "total_tokens")} == {"agents": 1, "llm_calls": 2, "root_validator_calls": 1,
                                                       "prompt_tokens": 150, "completion_tokens": 25, "total_tokens": 175}
    assert usage["cost_usd"] == pytest.approx(0.75)


# ---- refusals ----------------------------------------------------------------------------------------
async def test_reserved_final_calls_are_kept_for_the_root_validator(monkeypatch):
    set_env(monkeypatch, AGENT_MAX_LLM_CALLS=4, AGENT_RESERVED_FINAL_CALLS=2)
    model = TreeModel({ROOT: GOALS[:1]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    usage = await usage_of(store, result.trace.trace_id)
    assert result.status == "completed" and (usage["llm_calls"], usage["root_validator_calls"]) == (3, 1)


async def test_agents_cannot_spend_the_reserved_calls_and_the_refusal_is_recorded(monkeypatch):
    set_env(monkeypatch, AGENT_MAX_LLM_CALLS=4, AGENT_RESERVED_FINAL_CALLS=2)
    model = TreeModel({ROOT: list(GOALS)})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    usage = await usage_of(store, result.trace.trace_id)
    assert result.status == "failed" and "llm_calls" in result.trace.error_message
    assert (usage["llm_calls"], usage["refusals"], usage["last_refusal"]) == (2, 1, "llm_calls: used 2 of 2")
    assert model.calls[ROOT] == 2 and model.calls[VALIDATOR] == 0


async def test_only_a_root_validator_reservation_may_use_the_final_calls():
    store = InMemoryTraceStore()
    root = Trace.create(task="t")
    await store.create_trace(root)
    budget = ResourceBudget(max_llm_calls=4, reserved_final_calls=2)
    controller = ResourceBudgetController(store=store, root_trace_id=root.trace_id, budget=budget, lock=asyncio.Lock())
    await controller.initialize()
    for _ in range(2):
        await controller.reserve_llm_call()
    with pytest.raises(BudgetExceededError):
        await controller.reserve_llm_call()  # a criteria validator or an agent
    await controller.reserve_llm_call(root_validator=True)
    await controller.reserve_llm_call(root_validator=True)
    with pytest.raises(BudgetExceededError):
        await controller.reserve_llm_call(root_validator=True)
    assert (await controller.usage()).llm_calls == 4


async def test_an_in_flight_overrun_is_recorded_but_its_tool_calls_never_run(monkeypatch):
    set_env(monkeypatch, AGENT_MAX_TOTAL_TOKENS=100)
    big = calls(("goal", {"add": "never added"}), usage=Usage(prompt_tokens=120, completion_tokens=30))
    model = TreeModel({ROOT: [big]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    usage = await usage_of(store, result.trace.trace_id)
    assert result.status == "failed" and "tokens: used 150 of 100" in result.trace.error_message
    assert usage["total_tokens"] == 150 and usage["last_refusal"].startswith("tokens")
    # The reply is recorded; its call is answered "not run" (a valid history) and never ran.
    assistant, answer = result.messages[-2:]
    assert assistant.role == "assistant" and assistant.tool_calls[0].name == "goal"
    assert answer.role == "tool" and answer.tool_call_id == assistant.tool_calls[0].id
    assert answer.content.startswith("not run: budget exceeded (tokens: used 150 of 100")
    assert len((await store.get_goal_tree(result.trace.trace_id)).goals) == 1


async def test_the_duration_budget_counts_from_the_usage_start(monkeypatch):
    async def age_the_tree(key, messages, names):
        if model.calls[ROOT] == 2:
            root = [t for t in await store.list_traces(limit=None) if t.parent_trace_id is None][0]
            usage = await usage_of(store, root.trace_id)
            usage["started_at"] = (utc_now() - timedelta(hours=2)).isoformat()
            await store.replace_resource_usage(root.trace_id, usage)

    model = TreeModel({ROOT: list(GOALS)}, on_call=age_the_tree)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "failed" and "duration_seconds" in result.trace.error_message and model.calls[ROOT] == 2


async def test_a_disabled_budget_records_without_enforcing(monkeypatch):
    set_env(monkeypatch, AGENT_RESOURCE_BUDGET_ENABLED="false", AGENT_MAX_LLM_CALLS=2, AGENT_RESERVED_FINAL_CALLS=1,
            AGENT_MAX_TOTAL_TOKENS=10)
    model = TreeModel({ROOT: GOALS[:3]}, usage=USAGE)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    usage = await usage_of(store, result.trace.trace_id)
    assert result.status == "completed"
    assert (usage["llm_calls"], usage["total_tokens"], usage["refusals"], usage["last_refusal"]) == (5, 75, 0, None)


# ---- refunds -----------------------------------------------------------------------------------------
async def test_only_reservations_of_children_never_created_are_rolled_back():
    model = TreeModel({ROOT: [delegate(brief("a"), brief("b"))]})
    runner, store = make_runner(model.llm, store=FailingStartStore())
    result = await runner.run_result(TASK, recursive_config())
    reply = next(m for m in result.messages if m.tool_name == "agent")
    # One child's failure is that child's report (issue 14): the batch completes, b was never created.
    assert not reply.metadata["is_error"] and "[not created] outcome=failed: OSError: disk full" in reply.text
    children = await store.list_traces(parent_trace_id=result.trace.trace_id, created_by_tool="agent", limit=None)
    assert [c.task.splitlines()[1] for c in children] == ["Objective: a"] and model.calls["b"] == 0
    usage = await usage_of(store, result.trace.trace_id)
    assert usage["agents"] == 2  # 2 reserved, the one never created rolled back
    assert usage["llm_calls"] == len(model.llm.requests)  # child a's and its validator's calls stay
    # The quota counts created children only (issue 29): b never existed, so it holds no slot.
    assert (await store.require_trace(result.trace.trace_id)).lineage.child_count == 1


async def test_release_rolls_back_only_the_given_count_and_never_below_the_root():
    store = InMemoryTraceStore()
    root = Trace.create(task="t")
    await store.create_trace(root)
    controller = ResourceBudgetController(store=store, root_trace_id=root.trace_id, budget=ResourceBudget(),
                                          lock=asyncio.Lock())
    await controller.initialize()
    await controller.reserve_agents(3)
    await controller.release_agents(2)
    assert (await controller.usage()).agents == 2
    await controller.release_agents(10)
    assert (await controller.usage()).agents == 1


async def test_stopped_children_and_rewinds_refund_nothing():
    async def stop_child(key, messages, names):
        if key == "child":
            child = (await store.list_traces(created_by_tool="agent", limit=None))[0]
            runner.stop(child.trace_id)

    model = TreeModel({ROOT: [delegate(brief("child"))]}, on_call=stop_child)
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    before = await usage_of(store, result.trace.trace_id)
    assert before["agents"] == 2 and before["llm_calls"] == len(model.llm.requests)
    await runner.run_result([{"role": "user", "content": "again"}],
                            RunConfig(trace_id=result.trace.trace_id, after_sequence=3))
    after = await usage_of(store, result.trace.trace_id)
    assert after["agents"] == 2 and after["llm_calls"] == len(model.llm.requests) > before["llm_calls"]


# ---- fail closed --------------------------------------------------------------------------------------
def corrupting_registry(store, payload: str | dict):
    """Default tools plus `spoil`, which overwrites the root's usage record with `payload`."""
    registry = default_registry()

    async def spoil(ctx: ToolContext) -> str:
        """Overwrite the usage record."""
        if isinstance(payload, dict):
            await store.replace_resource_usage(ctx.trace_id, payload)
        else:
            (store.trace_dir(ctx.trace_id) / "resource_usage.json").write_text(payload)
        return "spoiled"

    registry.register(spoil)
    return registry


async def test_a_missing_usage_record_fails_closed(tmp_path):
    model = TreeModel()
    runner, store = make_runner(model.llm, store=FileSystemTraceStore(tmp_path))
    first = await runner.run_result(TASK, recursive_config())
    (tmp_path / first.trace.trace_id / "resource_usage.json").unlink()
    calls_before = len(model.llm.requests)
    again = await runner.run_result([{"role": "user", "content": "again"}], RunConfig(trace_id=first.trace.trace_id))
    assert again.status == "failed" and "resource usage" in again.trace.error_message
    assert "missing" in again.trace.error_message and len(model.llm.requests) == calls_before


@pytest.mark.parametrize("payload", [
    "garbage{", "[1, 2]", {}, {**ResourceUsage().model_dump(mode="json"), "llm_calls": -100},
    {k: v for k, v in ResourceUsage().model_dump(mode="json").items() if k != "agents"},
])
async def test_a_corrupt_usage_record_refuses_the_next_call(tmp_path, payload):
    store = FileSystemTraceStore(tmp_path)
    model = TreeModel({ROOT: [call("spoil"), call("goal", add="never")]})
    runner, _ = make_runner(model.llm, store=store, registry=corrupting_registry(store, payload))
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "failed" and "resource_usage.json" in result.trace.error_message
    assert model.calls[ROOT] == 1


async def test_a_usage_record_corrupted_during_a_model_call_fails_the_run_cleanly(tmp_path):
    def spoil(key, messages, names):
        root = next(p for p in tmp_path.iterdir() if p.is_dir() and "@" not in p.name)
        (root / "resource_usage.json").write_text("garbage{")

    model = TreeModel(on_call=spoil)
    runner, store = make_runner(model.llm, store=FileSystemTraceStore(tmp_path))
    try:
        result = await runner.run_result(TASK, recursive_config())
    finally:
        roots = [t for t in await store.list_traces(limit=None) if t.parent_trace_id is None]
        assert roots[0].status == "failed", f"trace left {roots[0].status!r}"
    assert "resource_usage.json" in result.trace.error_message


async def test_a_validator_over_its_tool_budget_ends_its_trace_and_yields_no_pass(monkeypatch):
    set_env(monkeypatch, AGENT_MAX_VALIDATION_TOOL_CALLS=1)
    model = TreeModel({ROOT: [delegate(brief("child"))], VALIDATOR: [call("read_trajectory"), call("read_trajectory")]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    validators = await store.list_traces(agent_type="validator", limit=None)
    assert validators and all(v.status != "running" for v in validators)
    joined = next(m.text for m in result.messages if m.tool_name == "agent")
    verdict = next(line for line in joined.splitlines() if line.startswith("Validation [criteria]"))
    assert "verdict: unknown" in verdict  # a validator cut off by the budget never yields pass
    assert (await usage_of(store, result.trace.trace_id))["last_refusal"].startswith("validation_tool_calls")


# ---- races ---------------------------------------------------------------------------------------------
async def test_fifty_concurrent_child_reservations_never_exceed_the_agent_limit():
    store = YieldingStore()
    runner, _ = make_runner(None, store=store)
    root = Trace.create(task="t", context={"resource_budget": ResourceBudget(max_total_agents=20).model_dump()})
    await store.create_trace(root)
    await (await runner.budget_for(root)).initialize()
    # Several parents of one tree race: each asks the runner for the tree's controller.
    parents = [Trace.create(task=f"p{i}", context={"root_trace_id": root.trace_id}) for i in range(5)]

    async def reserve(parent: Trace) -> bool:
        try:
            await (await runner.budget_for(parent)).reserve_agents(1)
            return True
        except BudgetExceededError:
            return False

    outcomes = await asyncio.gather(*[reserve(parents[i % 5]) for i in range(50)])
    usage = await usage_of(store, root.trace_id)
    assert sum(outcomes) == 19 and usage["agents"] == 20 and usage["refusals"] == 31


async def test_parallel_parents_racing_for_the_last_agents_get_all_or_nothing(monkeypatch):
    set_env(monkeypatch, AGENT_MAX_TOTAL_AGENTS=6)
    grandchildren = {p: delegate(*[brief(f"{p}.{i}") for i in range(3)]) for p in ("p1", "p2")}
    model = TreeModel({ROOT: [delegate(brief("p1"), brief("p2"))], **{p: [d] for p, d in grandchildren.items()}})
    runner, store = make_runner(model.llm, store=YieldingStore())
    result = await runner.run_result(TASK, recursive_config(child_execution_mode="parallel", max_parallel_children=2))
    usage = await usage_of(store, result.trace.trace_id)
    assert usage["agents"] == 6  # root + p1 + p2 + one batch of three; the other batch refused whole
    created = [sum(model.calls[f"{p}.{i}"] > 0 for i in range(3)) for p in ("p1", "p2")]
    assert sorted(created) == [0, 3]
    assert usage["last_refusal"] == "agents: used 9 of 6"
