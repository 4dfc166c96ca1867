"""Result byte budget and history compaction (H4): budgets hold, kept messages stay byte-identical."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cyber_agent.errors import LLMError
from cyber_agent.llm import ScriptedModel, ToolCall, Usage
from cyber_agent.trace.compaction import (
    CLEARED_PLACEHOLDER,
    HISTORY_SUMMARY_PREFIX,
    MIN_TOOL_RESULT_BUDGET_BYTES,
    ContextGuard,
    HistorySummarizer,
    estimate_tokens,
    micro_compact,
    pairing_problems,
    summary_compact,
    truncate_result,
)

MARKER = re.compile(r"\n\n\[… (\d+) bytes truncated( from the middle)? by tool_result_budget — you have not seen them; "
                    r"re-run with a narrower query to see the rest …\](\n\n)?")
UNICODE = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=("Cs",)), max_size=3000)
WIDE = st.lists(st.sampled_from(["a", "é", "€", "😀", "𝄞", "\n", "中"]), max_size=3000).map("".join)


def size(text: str) -> int:
    return len(text.encode("utf-8"))


# ---- truncate_result --------------------------------------------------------------------


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(UNICODE | WIDE, st.integers(MIN_TOOL_RESULT_BUDGET_BYTES, 2000), st.sampled_from([0, 0, 64, 500]))
def test_truncation_respects_the_budget_and_never_splits_a_code_point(text, budget, tail):
    out, truncated = truncate_result(text, budget, tail_bytes=tail)
    assert size(out) <= budget
    if size(text) <= budget:
        assert (out, truncated) == (text, False)
        return
    assert truncated
    match = MARKER.search(out)
    assert match is not None
    head, rest = out[: match.start()], out[match.end():]
    # Whole characters only: the kept parts are a prefix and a suffix of the original string.
    assert text.startswith(head) and text.endswith(rest) and head
    assert (rest != "") == (tail > 0)  # the tail is kept only when asked for
    assert int(match.group(1)) == size(text) - size(head) - size(rest)  # the marker states what was dropped
    assert (match.group(2) is not None) == (tail > 0)


def test_truncation_examples_and_limits():
    assert truncate_result("x" * 100, 0) == ("x" * 100, False)  # 0 disables the budget
    out, cut = truncate_result("😀" * 10_000, 1024)
    assert cut and size(out) <= 1024 and out.startswith("😀" * 200)
    match = MARKER.search(out)
    assert match and int(match.group(1)) == 40_000 - size(out[: match.start()])
    with pytest.raises(ValueError, match="at least 256"):
        truncate_result("x" * 1000, 100)
    lone = "\ud800" * 400  # lone surrogates (surrogateescape'd output) must not crash the budget
    assert truncate_result(lone, 300)[1]


# ---- conversations ---------------------------------------------------------------------


@st.composite
def conversations(draw):
    """A valid history: system, 1–2 user messages, then turns of assistant + results (+ feedback)."""
    history = [{"role": "system", "content": "SYSTEM PROMPT"}]
    history += [{"role": "user", "content": f"task {i}"} for i in range(draw(st.integers(1, 2)))]
    for turn in range(draw(st.integers(0, 9))):
        calls = [ToolCall(id=f"c{turn}_{i}", name=draw(st.sampled_from(["read", "shell"])),
                          arguments={"n": i}) for i in range(draw(st.integers(0, 3)))]
        message = {"role": "assistant", "content": draw(st.sampled_from([None, "thinking", "x" * 50]))}
        if calls:
            message["tool_calls"] = [c.to_openai() for c in calls]
        history.append(message)
        for call in calls:
            history.append({"role": "tool", "tool_call_id": call.id,
                            "content": draw(st.sampled_from(["ok", "y" * 300, "z" * 5000, "ü" * 2000]))})
        if draw(st.integers(0, 4)) == 0:
            history.append({"role": "user", "content": "feedback"})
    return history


def recent_start(history: list[dict], keep: int) -> int:
    starts = [i for i, m in enumerate(history) if m["role"] == "assistant"]
    return starts[-keep] if len(starts) > keep else (starts[0] if starts else len(history))


def assert_kept(before: list[dict], after: list[dict], keep: int) -> None:
    start = recent_start(before, keep)
    tail = len(before) - start
    assert after[0] is before[0]
    if tail:
        assert all(a is b for a, b in zip(after[-tail:], before[start:]))  # the very same objects
        assert json.dumps(after[-tail:]) == json.dumps(before[start:])
    assert pairing_problems(after) == []


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.integers(1, 4), st.sampled_from([0, 100, 1000]))
def test_micro_compact_keeps_system_and_recent_turns_and_pairing(history, keep, min_chars):
    assert pairing_problems(history) == []
    result = micro_compact(history, keep_recent_turns=keep, min_chars=min_chars)
    assert_kept(history, result.messages, keep)
    assert len(result.messages) == len(history)
    for index in result.replaced_indices:
        old, new = history[index], result.messages[index]
        assert old["role"] == "tool" and len(old["content"]) > min_chars and index < recent_start(history, keep)
        assert new["content"].startswith(CLEARED_PLACEHOLDER) and f"call_id={old['tool_call_id']}" in new["content"]
        assert new["tool_call_id"] == old["tool_call_id"] and len(new["content"]) < len(old["content"])
    untouched = set(range(len(history))) - set(result.replaced_indices)
    assert all(result.messages[i] is history[i] for i in untouched)
    assert result.tokens_after <= result.tokens_before
    again = micro_compact(result.messages, keep_recent_turns=keep, min_chars=min_chars)
    assert not again.changed  # idempotent


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.integers(1, 4))
async def test_summary_compact_keeps_head_and_recent_turns_and_cuts_at_turn_boundaries(history, keep):
    seen: list[list[dict]] = []

    async def summarize(middle: list[dict]) -> str:
        seen.append(middle)
        return "the summary"

    result = await summary_compact(history, summarize=summarize, keep_recent_turns=keep)
    assert_kept(history, result.messages, keep)
    head = next((i for i, m in enumerate(history) if i and m["role"] != "user"), len(history))  # system + task
    assert all(a is b for a, b in zip(result.messages[:head], history[:head]))
    if not seen:
        assert not result.changed and result.messages == history
        return
    [middle] = seen
    assert middle[0]["role"] == "assistant" and middle == history[head: recent_start(history, keep)]
    note = result.messages[head]
    assert note["role"] == "user" and note["content"].startswith(f"{HISTORY_SUMMARY_PREFIX} Summary of {len(middle)} earlier")
    assert len(result.messages) == len(history) - len(middle) + 1
    assert result.replaced_indices == tuple(range(head, head + len(middle)))
    # A second compaction folds the first summary into the new one instead of stacking summaries.
    again = await summary_compact(result.messages + history[head:], summarize=summarize, keep_recent_turns=keep)
    assert sum(1 for m in again.messages if str(m.get("content")).startswith(HISTORY_SUMMARY_PREFIX)) == 1


def long_history(turns: int = 8, result_chars: int = 4000) -> list[dict]:
    history = [{"role": "system", "content": "S"}, {"role": "user", "content": "task"}]
    for i in range(turns):
        call = ToolCall(id=f"c{i}", name="read", arguments={"i": i})
        history.append({"role": "assistant", "content": None, "tool_calls": [call.to_openai()]})
        history.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i} " + "r" * result_chars})
    history.append({"role": "assistant", "content": "working"})
    return history


async def test_summary_failures_leave_history_untouched():
    async def empty(_middle):
        return "  "

    with pytest.raises(LLMError, match="empty summary"):
        await summary_compact(long_history(), summarize=empty, keep_recent_turns=2)
    with pytest.raises(ValueError, match="keep at least the current turn"):
        micro_compact(long_history(), keep_recent_turns=0, min_chars=0)


def test_estimate_tokens_is_chars_over_four_plus_overhead():
    assert estimate_tokens([]) == 0
    assert estimate_tokens([{"role": "user", "content": "abcdefgh"}]) == 4 + 2
    call = ToolCall(id="c", name="read", arguments={"p": 1})
    assert estimate_tokens([{"role": "assistant", "content": None, "tool_calls": [call.to_openai()]}]) == 4 + 3


def test_pairing_problems_names_what_a_provider_rejects():
    call = ToolCall(id="c1", name="x", arguments={}).to_openai()
    assert pairing_problems([{"role": "tool", "tool_call_id": "c9", "content": ""}])
    assert pairing_problems([{"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "user", "content": "x"}])
    assert pairing_problems([{"role": "assistant", "content": None, "tool_calls": [call]}])


# ---- the guard ----------------------------------------------------------------------------


class CountingSummarizer:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = 0

    async def __call__(self, middle):
        self.calls += 1
        answer = self.answers.pop(0) if self.answers else "summary"
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_guard_does_nothing_below_the_micro_threshold_or_without_a_window():
    history = long_history()
    tokens = estimate_tokens(history)
    assert await ContextGuard(tokens * 2).guard(history, CountingSummarizer()) is None
    assert await ContextGuard(0).guard(history, CountingSummarizer()) is None


async def test_guard_micro_compacts_first_and_summarizes_only_when_still_too_full():
    history = long_history()
    tokens = estimate_tokens(history)
    summarize = CountingSummarizer()
    micro = await ContextGuard(int(tokens / 0.75), keep_recent_turns=2).guard(history, summarize)
    assert micro is not None and micro.kind == "micro" and summarize.calls == 0
    assert micro.replaced_call_ids == tuple(f"c{i}" for i in range(7))  # 9 turns, the last 2 kept
    # Even after clearing, results are too big for a tiny window: summarize the middle.
    guard = ContextGuard(tokens // 10, keep_recent_turns=2)
    summary = await guard.guard(history, summarize)
    assert summary is not None and summary.kind == "summary" and summarize.calls == 1
    assert summary.tokens_before == tokens and summary.tokens_after < tokens
    assert_kept(history, summary.messages, 2)
    json.dumps(summary.event_payload())


async def test_three_consecutive_summary_failures_disable_summarizing_and_a_success_rearms():
    history = long_history()
    guard = ContextGuard(estimate_tokens(history) // 10, keep_recent_turns=2)
    summarize = CountingSummarizer(RuntimeError("down"), "", "ok", RuntimeError("a"), RuntimeError("b"), RuntimeError("c"))
    kinds = [(await guard.guard(history, summarize)).kind for _ in range(3)]
    assert kinds == ["micro", "micro", "summary"] and guard.failures == 0  # the success reset the count
    for _ in range(3):
        assert (await guard.guard(history, summarize)).kind == "micro"
    assert guard.summary_disabled and "RuntimeError: c" in guard.last_error
    calls = summarize.calls
    result = await guard.guard(history, summarize)
    assert result is not None and result.kind == "micro" and summarize.calls == calls  # no more attempts


def test_guard_rejects_inconsistent_thresholds():
    with pytest.raises(ValueError):
        ContextGuard(1000, micro_threshold=0.9, summary_threshold=0.8)


async def test_history_summarizer_calls_the_model_with_the_transcript_and_reports_usage():
    usage = Usage(prompt_tokens=900, completion_tokens=40)
    model = ScriptedModel([ScriptedModel.text("- read 6 files; results r...", usage=usage, cost=0.002)])
    summarizer = HistorySummarizer(model, "cheap-model")
    history = long_history()
    result = await summary_compact(history, summarize=summarizer, keep_recent_turns=2)
    [request] = model.requests
    assert request.model == "cheap-model" and request.temperature == 0.2 and request.tools is None
    body = request.messages[1]["content"]
    assert body.startswith("--- BEGIN HISTORY ---\n[0] assistant tool_call: read(") and body.endswith("--- END HISTORY ---")
    assert "[1] tool_result(c0): result 0" in body and "more chars]" in body  # long results are clipped
    assert result.usage == usage and result.cost == summarizer.last_cost == 0.002
    with ScriptedModel([""]) as empty:
        with pytest.raises(LLMError):
            await HistorySummarizer(empty, "m")(history[2:4])
