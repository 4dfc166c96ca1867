"""Scorers: exact, numeric tolerance, regex, a callable, and a model-graded scorer that runs a grading trace."""

from __future__ import annotations

import pytest
from sweep_helpers import REPO, TASKS

from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments import (
    CallableScorer,
    ExactScorer,
    ModelGradedScorer,
    NumericScorer,
    RegexScorer,
    Score,
    ScoreContext,
    Sweep,
    SweepTask,
    run_sweep,
)
from cyber_agent.trace import InMemoryTraceStore

TASK = SweepTask(id="t", prompt="What is 2 + 2?", expected="4")


def ctx() -> ScoreContext:
    return ScoreContext(store=InMemoryTraceStore(), trace_id="00000000-0000-4000-8000-000000000000")


async def test_exact():
    assert (await ExactScorer().score(TASK, "  4. ", ctx())).passed
    assert not (await ExactScorer().score(TASK, "four", ctx())).passed
    assert not (await ExactScorer(normalise=False).score(TASK, "4.", ctx())).passed
    assert not (await ExactScorer().score(TASK, None, ctx())).passed


async def test_numeric_reads_the_pattern_or_the_last_number_within_tolerance():
    money = SweepTask(id="m", prompt="p", expected="152.00")
    assert (await NumericScorer(tolerance=0.005).score(money, "revenue 152.004 from 3 rows", ctx())).passed is False  # last number: 3
    pattern = NumericScorer(tolerance=0.005, pattern=r"revenue (\d+(?:\.\d+)?)")
    assert (await pattern.score(money, "revenue 152.004 from 3 rows", ctx())).passed
    assert not (await pattern.score(money, "revenue 152.01 from 3 rows", ctx())).passed
    assert (await NumericScorer(tolerance=0.01, relative=True).score(money, "about 153", ctx())).passed
    missing = await NumericScorer().score(money, "no idea", ctx())
    assert (missing.value, missing.explanation) == (0.0, "no number found in the answer")
    with pytest.raises(ConfigurationError):
        await NumericScorer().score(SweepTask(id="w", prompt="p", expected="four"), "4", ctx())


async def test_regex_uses_its_pattern_or_the_expected_answer():
    assert (await RegexScorer(pattern=r"\b4\b").score(TASK, "it is 4", ctx())).passed
    assert (await RegexScorer().score(SweepTask(id="r", prompt="p", expected="north"), "North wins", ctx())).passed
    assert not (await RegexScorer(ignore_case=False).score(SweepTask(id="r", prompt="p", expected="north"), "North", ctx())).passed
    with pytest.raises(ConfigurationError):
        await RegexScorer(pattern="(").score(TASK, "x", ctx())


def half(task: SweepTask, answer: str | None) -> float:
    return 0.5


async def async_bool(task: SweepTask, answer: str | None) -> bool:
    return answer == task.expected


async def test_callables_may_return_a_bool_a_float_a_score_or_await_one():
    assert (await CallableScorer(half).score(TASK, "x", ctx())).value == 0.5
    assert (await CallableScorer(async_bool).score(TASK, "4", ctx())).passed
    custom = CallableScorer(lambda task, answer: Score(value=1.0, passed=True, explanation="mine"), label="mine")
    assert (await custom.score(TASK, "x", ctx())).explanation == "mine" and custom.name == "mine"
    assert CallableScorer(half).name.endswith("test_scorers.half")
    with pytest.raises(ConfigurationError, match="return a bool"):
        await CallableScorer(lambda task, answer: "yes").score(TASK, "x", ctx())


async def test_the_model_graded_scorer_runs_a_grading_trace_and_reads_its_verdict():
    store = InMemoryTraceStore()
    lookup = next(t for t in TASKS if t.type == "lookup")
    grid = Sweep(name="graded", tasks=[lookup], models=["fallible:0", "fallible:1"], scorer=ModelGradedScorer(),
                 workspace=str(REPO))
    frame = (await run_sweep(grid, store)).frame()
    assert list(frame["passed"]) == [True, False] and list(frame["scorer"]) == ["model(demo)"] * 2
    graders = [t for t in await store.list_traces(limit=None) if t.agent_type == "grader"]
    assert len(graders) == 2 and all(t.status == "completed" and t.context["graded_trace_id"] in set(frame["trace_id"]) for t in graders)
    cell_records = [t.sweep_cell for t in await store.list_traces(limit=None) if t.sweep_cell]
    assert {r.grader_trace_id for r in cell_records} == {t.trace_id for t in graders}
    assert all(t.sweep_cell is None for t in graders)


async def test_a_changed_scorer_rescores_finished_cells_without_running_them_again():
    store = InMemoryTraceStore()
    task = next(t for t in TASKS if t.type == "arithmetic")
    first = await run_sweep(Sweep(name="s", tasks=[task], models=["fallible"], workspace=str(REPO)), store)
    assert first.frame().iloc[0]["passed"]
    strict = Sweep(name="s", tasks=[task], models=["fallible"], workspace=str(REPO), scorer=ExactScorer())
    again = await run_sweep(strict, store)
    row = again.frame().iloc[0]
    assert again.progress.skipped == 1 and again.progress.done == 0
    assert (row["scorer"], row["passed"], row["trace_id"]) == ("exact", False, first.frame().iloc[0]["trace_id"])
