"""RecordingLLM and ReplayLLM: round trip, divergence naming the exchange, over-call, damaged files."""

from __future__ import annotations

import json

import pytest

from cyber_agent.errors import ConfigurationError, CorruptRecordError, ReplayDivergenceError
from cyber_agent.llm import RecordingLLM, ReplayLLM, ScriptedModel, Usage, load_exchanges

SYSTEM = {"role": "system", "content": "be terse"}
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


async def conversation(llm, model: str = "gpt-4o") -> list[str]:
    """A two-step agent loop: ask, get a tool call, answer it, get the final text."""
    messages = [SYSTEM, {"role": "user", "content": "2+3?"}]
    first = await llm(messages, model, TOOLS, 0.0)
    messages.append({"role": "assistant", "content": first.content,
                     "tool_calls": [c.to_openai() for c in first.tool_calls]})
    messages.append({"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "5"})
    second = await llm(messages, model, TOOLS, 0.0)
    return [first.tool_calls[0].name, second.content]


async def record(path) -> RecordingLLM:
    inner = ScriptedModel([ScriptedModel.tool_call("add", {"a": 2, "b": 3}), "5"],
                          usage=Usage(prompt_tokens=10, completion_tokens=2), cost=0.001)
    recorder = RecordingLLM(inner, path)
    assert await conversation(recorder) == ["add", "5"]
    return recorder


async def test_round_trip_replays_the_same_answers_offline(tmp_path):
    path = tmp_path / "run.jsonl"
    recorder = await record(path)
    assert recorder.recorded == 2
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["request"]["temperature"] == 0.0

    replay = ReplayLLM(path)
    assert replay.model == "gpt-4o"
    assert await conversation(replay) == ["add", "5"]
    replay.assert_all_used()

    half = ReplayLLM(path)
    deltas: list[str] = []
    first = await half([SYSTEM, {"role": "user", "content": "2+3?"}], "gpt-4o", TOOLS, 0.0, on_delta=deltas.append)
    assert first.tool_calls[0].arguments == {"a": 2, "b": 3} and first.cost == 0.001 and not first.cost_estimated
    assert deltas == []  # the recorded first answer has no text to stream
    with pytest.raises(AssertionError, match=r"never replayed: indexes \[1\]"):
        half.assert_all_used()


async def test_divergence_names_the_exchange_message_and_field(tmp_path):
    path = tmp_path / "run.jsonl"
    await record(path)
    replay = ReplayLLM(path)
    messages = [SYSTEM, {"role": "user", "content": "2+3?"}]
    await replay(messages, "gpt-4o", TOOLS)
    changed = messages + [{"role": "assistant", "content": "", "tool_calls": []},
                          {"role": "tool", "tool_call_id": "call_0_0", "content": "6"}]
    with pytest.raises(ReplayDivergenceError) as info:
        await replay(changed, "gpt-4o", TOOLS)
    text = str(info.value)
    assert "exchange 1" in text and "message 2 field 'tool_calls'" in text


async def test_divergence_on_model_tools_and_message_count(tmp_path):
    path = tmp_path / "run.jsonl"
    await record(path)
    messages = [SYSTEM, {"role": "user", "content": "2+3?"}]
    with pytest.raises(ReplayDivergenceError, match="exchange 0 .*model: recorded 'gpt-4o', got 'gpt-4.1'"):
        await ReplayLLM(path)(messages, "gpt-4.1", TOOLS)
    with pytest.raises(ReplayDivergenceError, match=r"tools: recorded \['add'\], got \[\]"):
        await ReplayLLM(path)(messages, "gpt-4o")
    with pytest.raises(ReplayDivergenceError, match="recorded 2 messages, got 1"):
        await ReplayLLM(path)(messages[:1], "gpt-4o", TOOLS)


async def test_over_call_raises(tmp_path):
    path = tmp_path / "run.jsonl"
    await record(path)
    replay = ReplayLLM(path)
    await conversation(replay)
    with pytest.raises(ReplayDivergenceError, match="call 2 asks for exchange 2 but .* holds only 2"):
        await replay([SYSTEM], "gpt-4o", TOOLS)


async def test_unordered_replay_matches_identical_requests(tmp_path):
    path = tmp_path / "run.jsonl"
    inner = ScriptedModel(["for a", "for b"])
    recorder = RecordingLLM(inner, path)
    await recorder([{"role": "user", "content": "a"}], "m")
    await recorder([{"role": "user", "content": "b"}], "m")
    replay = ReplayLLM(path, strict_order=False)
    assert (await replay([{"role": "user", "content": "b"}], "m")).content == "for b"
    assert (await replay([{"role": "user", "content": "a"}], "m")).content == "for a"
    with pytest.raises(ReplayDivergenceError):
        await ReplayLLM(path)([{"role": "user", "content": "b"}], "m")


async def test_failed_calls_are_not_recorded(tmp_path):
    path = tmp_path / "run.jsonl"
    recorder = RecordingLLM(ScriptedModel([RuntimeError("boom"), "ok"]), path)
    with pytest.raises(RuntimeError):
        await recorder([{"role": "user", "content": "x"}], "m")
    await recorder([{"role": "user", "content": "x"}], "m")
    assert [e.response.content for e in load_exchanges(path)] == ["ok"]


async def test_a_truncated_last_line_is_ignored_but_a_corrupt_middle_line_is_not(tmp_path):
    path = tmp_path / "run.jsonl"
    await record(path)
    good = path.read_text()
    path.write_text(good + '{"version": 1, "request": {"mess')
    assert len(load_exchanges(path)) == 2
    path.write_text("not json\n" + good)
    with pytest.raises(CorruptRecordError, match="line 1"):
        ReplayLLM(path)


def test_missing_recording_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigurationError, match="does not exist"):
        ReplayLLM(tmp_path / "nope.jsonl")
