"""to_frames: stable columns and dtypes, both read paths agree, protocol records, TraceFrames display."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cyber_agent.notebook import SCHEMAS, TraceFrames, to_frames
from cyber_agent.notebook.frames import frames_from_records
from cyber_agent.trace import FileSystemTraceStore

from nb_helpers import CHILD, ROOT, VALIDATOR, assert_frames_equal


class ProtocolOnly:
    """A TraceStore that is not a FileSystemTraceStore, so frames are read through the protocol."""

    def __init__(self, inner: FileSystemTraceStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


def check_schema(frames: TraceFrames) -> None:
    for name, schema in SCHEMAS.items():
        frame = getattr(frames, name)
        assert {c: str(t) for c, t in frame.dtypes.items()} == schema, name


def test_every_frame_has_its_schema_even_when_empty(demo_store, demo_root):
    check_schema(to_frames(demo_store, demo_root))
    empty = frames_from_records([])
    check_schema(empty)
    assert all(count == 0 for count in empty.counts().values())


def test_the_file_fast_path_and_the_protocol_path_agree(demo_store, demo_root):
    assert_frames_equal(to_frames(demo_store), to_frames(ProtocolOnly(demo_store)))


def test_a_trace_written_right_now_is_counted_past_its_checkpoint(tmp_path):
    import asyncio

    from cyber_agent.trace import Goal, Message, Trace

    writer = FileSystemTraceStore(tmp_path, checkpoint_every=1000, checkpoint_interval=1000.0)

    async def write() -> str:
        trace = Trace.create(task="live")
        await writer.create_trace(trace)
        await writer.add_goal(trace.trace_id, Goal(id="1", description="work"))
        for _ in range(5):
            await writer.add_message(Message.create(trace_id=trace.trace_id, role="assistant", goal_id="1",
                                                    content={"text": "step"}, prompt_tokens=7, completion_tokens=3))
        return trace.trace_id

    trace_id = asyncio.run(write())
    reader = FileSystemTraceStore(tmp_path)
    frames = to_frames(reader, trace_id)
    row = frames.traces.iloc[0]
    assert (row["total_messages"], row["total_tokens"], row["head_sequence"]) == (5, 50, 5)
    assert frames.goals.iloc[0]["self_messages"] == 5
    again = to_frames(ProtocolOnly(reader), trace_id)
    # The store's reader stamps updated_at when it counts messages past the checkpoint; the rest is equal
    # (but `provenance`, which names the store each side was read from).
    volatile = ["updated_at", "duration_seconds", "provenance"]
    pd.testing.assert_frame_equal(frames.traces.drop(columns=volatile), again.traces.drop(columns=volatile))
    pd.testing.assert_frame_equal(frames.messages, again.messages)
    pd.testing.assert_frame_equal(frames.goals, again.goals)


def test_messages_tool_calls_and_goals_of_the_demo(demo_store, demo_root):
    frames = to_frames(demo_store, demo_root)
    traces = frames.traces.set_index("trace_id")
    per_trace = frames.messages.groupby("trace_id").size()
    assert all(per_trace[t] == traces.loc[t, "total_messages"] for t in traces.index)
    assert frames.messages["on_main_path"].all()  # no rewinds in the demo
    assert frames.messages["created_at"].dt.tz is not None
    calls = frames.tool_calls
    assert len(calls) == frames.messages["n_tool_calls"].sum()
    assert calls["result_sequence"].notna().all() and (calls["result_sequence"] > calls["sequence"]).all()
    agent = calls[calls["tool_name"] == "agent"].iloc[0]
    assert len(agent["arguments"]["task"]) == 4
    goals = frames.goals[frames.goals["trace_id"] == demo_root]
    assert list(goals["goal_id"]) == ["1", "2", "3", "4"] and list(goals["depth"]) == [0, 1, 1, 1]
    assert goals.set_index("goal_id").loc["3", "n_sub_traces"] == 4
    assert frames.usage["llm_calls"].sum() == (frames.messages["message_role"] == "assistant").sum()
    assert frames.roots == [demo_root]
    assert set(frames.events["type"]) >= {"message_added", "goal_added", "sub_trace_started", "trace_completed"}


def test_rewound_branches_are_not_on_the_main_path(recursive_store):
    store, _ = recursive_store
    import asyncio

    from cyber_agent.trace import Message

    async def branch() -> None:
        await store.update_trace(ROOT, head_sequence=1)
        await store.add_message(Message.create(trace_id=ROOT, role="user", content="again", parent_sequence=1))

    asyncio.run(branch())
    messages = to_frames(store, ROOT).messages
    root = messages[messages["trace_id"] == ROOT].set_index("sequence")
    assert list(root["on_main_path"]) == [True, False, True]


def test_reports_and_validations_come_from_the_task_protocol(recursive_store):
    store, root = recursive_store
    frames = to_frames(store, root)
    report = frames.reports.set_index("trace_id").loc[CHILD]
    assert report["objective"] == "Sum region East" and report["outcome"] == "completed"
    assert report["outputs"] == ["152.00"] and report["review_decision"] == "revise"
    checks = frames.validations
    assert list(checks["criterion_verdict"]) == ["pass", "fail"]
    assert set(checks["trace_id"]) == {CHILD} and set(checks["validator_trace_id"]) == {VALIDATOR}
    roles = frames.traces.set_index("trace_id")["role"]
    assert roles[VALIDATOR] == "validator" and frames.traces.set_index("trace_id").loc[VALIDATOR, "is_validator"]
    assert json.loads(json.dumps(frames.traces.iloc[0]["resource_usage"]))["llm_calls"] == 19


def test_tree_selects_a_subtree(recursive_store):
    store, _ = recursive_store
    frames = to_frames(store)
    sub = frames.tree(CHILD)
    assert list(sub.traces["trace_id"]) == [CHILD, VALIDATOR]
    assert set(sub.messages["trace_id"]) == {CHILD, VALIDATOR}
    with pytest.raises(LookupError):
        frames.tree("no-such-trace")


def test_unknown_roots_are_reported(demo_store):
    from cyber_agent.errors import TraceNotFoundError

    with pytest.raises(TraceNotFoundError):
        to_frames(demo_store, "00000000-0000-4000-8000-000000000000")
