"""The fallible model: seeded, per-type mistakes on top of the demo model; validators catch them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.errors import ConfigurationError
from cyber_agent.llm import DemoModel, FallibleModel, resolve_llm
from cyber_agent.llm.demo_checks import arithmetic_value, grade_reply, grading_request
from cyber_agent.llm.fallible import parse_fallible_spec, task_type
from cyber_agent.trace import InMemoryTraceStore

REPO = Path(__file__).resolve().parents[2]
TASKS = [json.loads(line) for line in (REPO / "data" / "tasks" / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]
RESULT = re.compile(r"(?:=|revenue)\s*(-?\d+(?:\.\d+)?)")


def correct(task: dict, answer: str | None) -> bool:
    found = RESULT.search(answer or "")
    return found is not None and abs(float(found.group(1)) - float(task["expected"])) < 0.005


async def run(llm, task: dict, mode: str) -> tuple[InMemoryTraceStore, object]:
    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=llm, workspace=REPO)
    anchor = {"objective": task["prompt"], "completion_criteria": task["criteria"]} if mode == "recursive" else None
    config = RunConfig(model="fallible", agent_mode=mode, workspace=str(REPO), root_task_anchor=anchor)  # type: ignore[arg-type]
    return store, await runner.run_result([{"role": "user", "content": task["prompt"]}], config)


def test_spec_forms_parse_into_constructor_options():
    assert parse_fallible_spec("") == {}
    assert parse_fallible_spec("0.3") == {"error_rate": 0.3}
    assert parse_fallible_spec("rate=0.1, lookup=0.5, seed=7, latency=0.05, price=2") == {
        "error_rate": 0.1, "seed": 7, "latency": 0.05, "usd_per_million_tokens": 2.0, "error_rates": {"lookup": 0.5}}


@pytest.mark.parametrize(("spec", "setting"), [("fallible:rat=0.3", "fallible:rat"), ("fallible:rate=lots", "fallible:rate"),
                                               ("fallible:1.5", "error_rate"), ("fallible:lookup=-1", "error_rates.lookup")])
def test_bad_specs_name_the_setting(spec, setting):
    with pytest.raises(ConfigurationError) as info:
        resolve_llm(spec)
    assert info.value.setting == setting


def test_resolve_builds_a_fallible_model_named_by_its_spec():
    resolved = resolve_llm("fallible:rate=0.2,seed=3")
    assert isinstance(resolved.llm_call, FallibleModel) and resolved.provider == "fallible"
    assert resolved.model == "fallible:rate=0.2,seed=3"
    assert (resolved.llm_call.error_rate, resolved.llm_call.seed) == (0.2, 3)
    reseeded = resolved.llm_call.with_seed(9)
    assert reseeded.error_rate == 0.2 and reseeded.seed != resolved.llm_call.with_seed(10).seed
    assert resolve_llm("fallible:0.2").llm_call.with_seed(9).seed == 9  # seed 0 in the spec: the repeat's seed alone


@pytest.mark.parametrize(("text", "kind"), [
    ("What is 17 * 23 + 4?", "arithmetic"),
    ("Compute the revenue (units × unit_price) of region East in data/sales.csv.", "lookup"),
    ("Report the revenue per region from data/sales.csv and name the top region.", "report"),
    ("Write a poem.", "other"),
])
def test_task_types(text, kind):
    assert task_type(text) == kind


async def test_rate_zero_answers_exactly_as_the_demo_model_and_prices_the_tokens():
    messages = [{"role": "user", "content": "What is 17 * 23 + 4?"}]
    tools = [{"type": "function", "function": {"name": "evaluate", "parameters": {}}}]
    demo = await DemoModel()(messages, "demo", tools)
    fallible = await FallibleModel(usd_per_million_tokens=1000.0)(messages, "fallible", tools)
    assert fallible.tool_calls == demo.tool_calls and fallible.content == demo.content
    tokens = demo.usage.prompt_tokens + demo.usage.completion_tokens
    assert fallible.cost == pytest.approx(tokens * 1000.0 / 1e6) and fallible.usage.cost_usd == fallible.cost


async def test_legacy_answers_err_at_the_seeded_rate_and_the_same_seed_repeats_them():
    async def wrong_ids(seed: int) -> list[str]:
        model = FallibleModel(0.5, seed=seed)
        return [t["id"] for t in TASKS if not correct(t, (await run(model, t, "legacy"))[1].answer)]

    first, again, other = await wrong_ids(0), await wrong_ids(0), await wrong_ids(1)
    assert first == again  # deterministic for a seed
    assert first != other  # another seed, other mistakes
    assert 0 < len(first) < len(TASKS) and 0 < len(other) < len(TASKS)
    never = [t["id"] for t in TASKS if not correct(t, (await run(FallibleModel(0.0), t, "legacy"))[1].answer)]
    assert never == []
    always = [t["id"] for t in TASKS if correct(t, (await run(FallibleModel(1.0), t, "legacy"))[1].answer)]
    assert always == []


async def test_a_rate_per_task_type_only_touches_that_type():
    model = FallibleModel(0.0, error_rates={"lookup": 1.0})
    results = {t["id"]: correct(t, (await run(model, t, "legacy"))[1].answer) for t in TASKS}
    assert all(ok for key, ok in results.items() if key.startswith("arithmetic"))
    assert not any(ok for key, ok in results.items() if key.startswith("lookup"))


async def test_in_recursive_mode_validators_catch_the_mistakes_and_revisions_fix_them():
    model = FallibleModel(0.3, seed=0)
    legacy_wrong = [t["id"] for t in TASKS if not correct(t, (await run(model, t, "legacy"))[1].answer)]
    assert legacy_wrong  # the same seed does make mistakes
    failed_verdicts = revisions = 0
    for task in TASKS:
        store, result = await run(model, task, "recursive")
        assert result.status == "completed" and correct(task, result.answer), (task["id"], result.answer)
        for trace in await store.list_traces(limit=None):
            failed_verdicts += sum(v.verdict == "fail" for v in trace.protocol.validations)
            revisions += sum(r.decision == "revise" for r in trace.protocol.reviews)
        assert any(t.is_validator for t in await store.list_traces(limit=None))
    assert failed_verdicts > 0 and revisions > 0


async def test_validators_are_never_corrupted_even_at_rate_one():
    lookup = next(t for t in TASKS if t["type"] == "lookup")
    store, result = await run(FallibleModel(1.0), lookup, "recursive")
    assert not correct(lookup, result.answer)  # every report is wrong, so nothing correct is accepted
    verdicts = [v for t in await store.list_traces(limit=None) for v in t.protocol.validations]
    assert verdicts and all(v.verdict == "fail" for v in verdicts)
    expected = f"recomputed {float(lookup['expected']):.2f}"
    assert all(expected in item.evidence for v in verdicts for item in v.criteria)


def test_head_arithmetic_and_grading():
    assert arithmetic_value("9 * (39 + 56) - 30") == 825
    assert arithmetic_value("2 ** 1000") is None and arithmetic_value("__import__('os')") is None
    assert grade_reply(grading_request("t", "571.00", "Region North: revenue 571.00")).startswith("GRADE: CORRECT")
    assert grade_reply(grading_request("t", "571.00", "Region North: revenue 570.00")).startswith("GRADE: INCORRECT")
    assert grade_reply(grading_request("t", "North", "The top region is North.")).startswith("GRADE: CORRECT")
    assert grade_reply(grading_request("t", "North", "")).startswith("GRADE: INCORRECT")
