"""Payload summarizer (H5): oversized results are summarized, the breaker trips after 3, truncation is last."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cyber_agent.core.summarizer import SUMMARIZER_SYSTEM_PROMPT, PayloadSummarizer
from cyber_agent.llm import FunctionModel, ScriptedModel, Usage

BUDGET = 16 * 1024
FIVE_MB = ("row 1234 | 😀 status=ok id=abc-99 | " * 140_000)[: 5 * 1024 * 1024]


def size(text: str) -> int:
    return len(text.encode("utf-8"))


def summarizer(model, *, threshold=20_000, max_input=1_000_000, budget=BUDGET) -> PayloadSummarizer:
    return PayloadSummarizer(model, "summarizer-model", threshold_bytes=threshold, max_input_bytes=max_input,
                             budget_bytes=budget)


async def test_small_results_pass_through_without_a_model_call():
    model = ScriptedModel([])
    outcome = await summarizer(model).maybe_summarize("read_file", "short")
    assert (outcome.path, outcome.text, outcome.truncated, outcome.llm_called) == ("passthrough", "short", False, False)
    assert model.requests == []


async def test_results_between_budget_and_threshold_are_truncated_not_summarized():
    model = ScriptedModel([])
    outcome = await summarizer(model, threshold=100_000).maybe_summarize("read_file", "x" * 50_000)
    assert outcome.path == "truncated" and outcome.final_bytes <= BUDGET and model.requests == []
    assert "bytes truncated by tool_result_budget" in outcome.text


async def test_oversized_result_is_summarized_under_the_extraction_contract():
    usage = Usage(prompt_tokens=12_000, completion_tokens=300)
    model = ScriptedModel([ScriptedModel.text("- 3 rows; ids abc-1, abc-2; error E42 at row 2", usage=usage, cost=0.01)])
    raw = "row abc-1 ok\n" * 3000
    outcome = await summarizer(model).maybe_summarize("fetch", raw, hint="find failing rows")
    assert outcome.path == "summarized" and not outcome.truncated and outcome.llm_called
    assert outcome.text.endswith("- 3 rows; ids abc-1, abc-2; error E42 at row 2")
    assert outcome.text.startswith(f"[summary of {size(raw)} bytes of 'fetch' output by the payload summarizer")
    assert (outcome.usage, outcome.cost, outcome.original_bytes) == (usage, 0.01, size(raw))
    [request] = model.requests
    assert request.model == "summarizer-model" and request.tools is None and request.temperature == 0.2
    assert request.messages[0] == {"role": "system", "content": SUMMARIZER_SYSTEM_PROMPT}
    user = request.messages[1]["content"]
    assert user.startswith("Tool name: fetch\n\nParent task hint: find failing rows\n\nRaw tool output")
    assert f"--- BEGIN ---\n{raw}\n--- END ---" in user
    assert outcome.metadata()["path"] == "summarized"


@pytest.mark.parametrize(("reply", "error"), [
    (RuntimeError("provider down"), "summarizer call failed: RuntimeError: provider down"),
    ("   ", "empty summary"),
    ("y" * 30_000, "not smaller"),
])
async def test_failed_summaries_fall_back_to_truncation(reply, error):
    model = ScriptedModel([reply])
    payload = summarizer(model)
    outcome = await payload.maybe_summarize("fetch", "x" * 25_000)
    assert outcome.path == "truncated" and outcome.final_bytes <= BUDGET and error in (outcome.error or "")
    assert outcome.llm_called and payload.consecutive_failures == 1


async def test_three_consecutive_failures_disable_the_summarizer_for_the_run():
    model = ScriptedModel([RuntimeError("a"), "", "ok summary", RuntimeError("b"), "", RuntimeError("c")])
    payload = summarizer(model)
    paths = [(await payload.maybe_summarize("t", "x" * 25_000)).path for _ in range(6)]
    assert paths == ["truncated", "truncated", "summarized", "truncated", "truncated", "truncated"]
    assert payload.disabled and len(model.requests) == 6
    outcome = await payload.maybe_summarize("t", "x" * 25_000)
    assert outcome.path == "truncated" and not outcome.llm_called and "disabled after 3" in outcome.reason
    assert len(model.requests) == 6  # no further call once tripped
    model.assert_all_used()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), max_size=12))
def test_breaker_matches_its_rule_for_any_sequence_of_outcomes(successes):
    """The model disables itself after exactly 3 failures in a row; a success resets the count."""
    outcomes = iter(successes)

    def reply(messages, tools):
        return "short summary" if next(outcomes) else ""

    model = FunctionModel(reply)
    payload = summarizer(model)
    expected_calls = streak = 0
    for ok in successes:
        if streak >= 3:
            break
        expected_calls += 1
        streak = 0 if ok else streak + 1
    for _ in successes:
        asyncio.run(payload.maybe_summarize("t", "x" * 25_000))
    assert len(model.requests) == expected_calls and payload.disabled == (streak >= 3)


async def test_error_results_and_payloads_over_max_input_never_reach_the_model():
    model = ScriptedModel([])
    payload = summarizer(model, max_input=100_000)
    error = await payload.maybe_summarize("shell", "Traceback ...\n" * 5000, is_error=True)
    big = await payload.maybe_summarize("shell", "x" * 200_000)
    assert model.requests == [] and error.path == big.path == "truncated"
    assert "over max_input_bytes" in big.reason and "never summarized" in error.reason


def summary_of(length: int):
    def reply(messages, tools):
        return "summary: " + "s" * length
    return reply


def failing(messages, tools):
    raise RuntimeError("boom")


@pytest.mark.parametrize(("max_input", "reply"), [
    (1_000_000, None),                 # over max_input_bytes: truncated, no call
    (8_000_000, summary_of(200)),      # summarized
    (8_000_000, summary_of(1_000_000)),  # summarized, but the summary itself is over budget
    (8_000_000, failing),              # the call fails: truncated
])
async def test_a_five_megabyte_result_never_reaches_the_model_whole(max_input, reply):
    model = FunctionModel(reply or failing)
    outcome = await summarizer(model, max_input=max_input).maybe_summarize("fetch", FIVE_MB)
    assert outcome.original_bytes == size(FIVE_MB) > 5_000_000
    assert outcome.final_bytes == size(outcome.text) <= BUDGET
    assert outcome.path in ("summarized", "truncated") and outcome.text != FIVE_MB
    assert len(model.requests) == (0 if reply is None else 1)


def test_configuration_is_checked():
    with pytest.raises(ValueError):
        PayloadSummarizer(ScriptedModel([]), "m", threshold_bytes=1, max_input_bytes=2, max_consecutive_failures=0)
    with pytest.raises(ValueError):
        PayloadSummarizer(ScriptedModel([]), "m", threshold_bytes=1, max_input_bytes=2, budget_bytes=10)


@pytest.mark.parametrize(("threshold", "budget", "text", "passes"), [
    (0, 0, "x" * 10_000, True),                # nothing configured
    (100, 0, "x" * 100, True),                 # at the threshold
    (100, 0, "x" * 101, False),                # over it: the summarizer decides
    (100, 0, "é" * 50, True),                  # 100 UTF-8 bytes
    (100, 0, "é" * 51, False),                 # 102 bytes in 51 characters
    (0, 1000, "x" * 1001, False),              # over the byte budget: truncated
    (2000, 1000, "x" * 1500, False),           # under the threshold, over the budget
])
def test_passes_through_agrees_with_maybe_summarize(threshold, budget, text, passes):
    """The runner's fast path skips maybe_summarize only when it would have passed the text through."""
    summarizer = PayloadSummarizer(ScriptedModel(["short"]), "m", threshold_bytes=threshold, max_input_bytes=10**6,
                                   budget_bytes=budget)
    assert summarizer.passes_through(text) is passes
    if passes:
        outcome = asyncio.run(summarizer.maybe_summarize("t", text))
        assert outcome.path == "passthrough" and outcome.text == text
