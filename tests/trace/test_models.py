"""Trace and Message records (SPEC T1): creation as in the seed's examples, descriptions, rendering."""

from __future__ import annotations

import uuid

import pytest

from cyber_agent.errors import InvalidIdError
from cyber_agent.llm.types import ToolCall
from cyber_agent.trace import (
    InMemoryTraceStore,
    Message,
    MessageContent,
    Trace,
    TraceEvent,
)
from cyber_agent.trace.events import encode_event, message_added_payload
from cyber_agent.trace.goal_models import GoalTree

ROOT = "2f8d3a1c-4b6e-4f9a-8c2d-1e5b7a9f3c4d"


def test_trace_create_makes_a_running_root_with_a_uuid():
    trace = Trace.create(mode="agent", task="探索代码库")
    assert uuid.UUID(trace.trace_id).version == 4
    assert (trace.mode, trace.task, trace.status, trace.is_root) == ("agent", "探索代码库", "running", True)
    assert (trace.total_messages, trace.total_tokens, trace.total_cost, trace.head_sequence) == (0, 0, 0.0, 0)
    assert trace.context == {} and trace.created_at.tzinfo is not None


def test_trace_create_accepts_a_chosen_id_and_refuses_an_unsafe_one():
    assert Trace.create(trace_id=ROOT, task="x").trace_id == ROOT
    with pytest.raises(InvalidIdError):
        Trace.create(trace_id="../escape", task="x")


async def test_sub_trace_as_in_the_seed_is_stored_like_any_trace():
    sub = Trace(
        trace_id=f"{ROOT}@explore-20260204220012-001", mode="agent", task="探索 JWT 认证方案",
        parent_trace_id=ROOT, parent_goal_id="3", agent_type="explore", status="running",
    )
    assert not sub.is_root
    store = InMemoryTraceStore()
    await store.create_trace(sub)
    assert (await store.list_traces(parent_trace_id=ROOT))[0].agent_type == "explore"


def test_trace_round_trips_through_json():
    trace = Trace.create(task="x", context={"agent_mode": "recursive", "budget": {"max": 1.5}})
    assert Trace.model_validate_json(trace.model_dump_json()) == trace


def test_assistant_message_from_the_seed_example():
    message = Message.create(
        trace_id=ROOT, role="assistant", goal_id="3", parent_sequence=5,
        content={"text": "let me look", "tool_calls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "a"}}]},
    )
    assert isinstance(message.content, MessageContent)
    assert (message.text, message.goal_id, message.parent_sequence) == ("let me look", "3", 5)
    assert [c.name for c in message.tool_calls] == ["read_file"]
    assert message.description == "let me look"
    assert (message.sequence, message.message_id) == (0, "")  # the store assigns both


def test_tool_message_from_the_seed_example():
    message = Message.create(trace_id=ROOT, role="tool", goal_id="5", tool_call_id="call_abc123",
                             tool_name="read_file", content="工具执行结果", parent_sequence=6)
    assert (message.text, message.tool_call_id, message.description) == ("工具执行结果", "call_abc123", "read_file")


@pytest.mark.parametrize(("role", "content", "fields", "description"), [
    ("assistant", {"text": "  the   answer\n"}, {}, "the answer"),
    ("assistant", {"tool_calls": [{"id": "1", "name": "read"}, {"id": "2", "name": "grep"}]}, {}, "tool call: read, grep"),
    ("assistant", {"text": "", "tool_calls": [{"id": "1", "name": "bash"}]}, {}, "tool call: bash"),
    ("assistant", None, {}, ""),
    ("tool", "long output", {"tool_name": "bash"}, "bash"),
    ("user", "hello", {}, "hello"),
    ("system", "be brief", {}, "be brief"),
    ("user", "explicit wins", {"description": "mine"}, "mine"),
])
def test_description_generation(role, content, fields, description):
    assert Message.create(trace_id=ROOT, role=role, content=content, **fields).description == description


def test_long_descriptions_are_clipped():
    description = Message.create(trace_id=ROOT, role="user", content="word " * 100).description
    assert len(description) == 200 and description.endswith("…")


def test_rendering_for_the_next_model_call():
    call = ToolCall(id="call_1", name="add", arguments={"a": 1})
    assistant = Message.create(trace_id=ROOT, role="assistant", content={"tool_calls": [call]})
    assert assistant.to_llm_message() == {"role": "assistant", "content": None, "tool_calls": [call.to_openai()]}
    tool = Message.create(trace_id=ROOT, role="tool", tool_call_id="call_1", tool_name="add", content="2")
    assert tool.to_llm_message() == {"role": "tool", "tool_call_id": "call_1", "content": "2"}
    assert Message.create(trace_id=ROOT, role="user", content="hi").to_llm_message() == {"role": "user", "content": "hi"}


def test_message_totals_and_assignment():
    message = Message.create(trace_id=ROOT, role="assistant", content={"text": "x"}, prompt_tokens=10, completion_tokens=5)
    message.assign(12)
    assert (message.sequence, message.message_id, message.total_tokens) == (12, f"{ROOT}-0012", 15)
    assert Message.model_validate_json(message.model_dump_json()) == message


def test_encoded_events_parse_as_trace_events():
    message = Message.create(trace_id=ROOT, role="user", content='quote " and \\ and 中文')
    message.assign(1)
    tree = GoalTree()
    goal = tree.add("g")
    tree.record_message(goal.id, 7, 0.1)
    line = encode_event(3, ROOT, "message_added", message_added_payload(message.model_dump_json(), [goal], recovered=True))
    event = TraceEvent.model_validate_json(line)
    assert (event.event_id, event.trace_id, event.type) == (3, ROOT, "message_added")
    assert Message.model_validate(event.payload["message"]) == message
    assert event.payload["affected_goals"] == [{"goal_id": "1", "self_stats": {"message_count": 1, "total_tokens": 7, "total_cost": 0.1},
                                                 "cumulative_stats": {"message_count": 1, "total_tokens": 7, "total_cost": 0.1}}]
    assert event.payload["recovered"] is True and event.created_at.tzinfo is not None
