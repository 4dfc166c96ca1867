"""Every store entry point refuses ids that could escape the store's directory (InvalidIdError)."""

from __future__ import annotations

import pytest

from cyber_agent.errors import InvalidIdError
from cyber_agent.trace import Goal, GoalTree, Message, Trace

BAD_TRACE_IDS = [
    "..", "../escape", "a/b", "a\\b", "a\x00b", "/etc/passwd", "C:\\Windows", "", ".hidden", "x" * 300,
    "ok..dots", None, 123, ["list"], b"bytes",
]
BAD_MESSAGE_IDS = [
    "..", "../x-0001", "a/b-0001", "x/../../y-0001", "a\x00-0001", "/abs-0001", "", "-0001",
    "no-digits-", "trace-", "trace-12a", "trace-١٢", None, 7, ("t", 1),
]

TRACE_ENTRY_POINTS = {
    "create_trace": lambda s, bad: s.create_trace(Trace.model_construct(trace_id=bad, task="x")),
    "get_trace": lambda s, bad: s.get_trace(bad),
    "update_trace": lambda s, bad: s.update_trace(bad, status="failed"),
    "end_trace": lambda s, bad: s.end_trace(bad, {"status": "completed"}),
    "defer_event": lambda s, bad: s.defer_event(bad, "progress", {}),
    "get_resource_usage": lambda s, bad: s.get_resource_usage(bad),
    "replace_resource_usage": lambda s, bad: s.replace_resource_usage(bad, {"llm_calls": 1}),
    "get_tool_approvals": lambda s, bad: s.get_tool_approvals(bad),
    "replace_tool_approvals": lambda s, bad: s.replace_tool_approvals(bad, {}),
    "get_goal_tree": lambda s, bad: s.get_goal_tree(bad),
    "update_goal_tree": lambda s, bad: s.update_goal_tree(bad, GoalTree()),
    "add_goal": lambda s, bad: s.add_goal(bad, Goal(id="1", description="g")),
    "update_goal": lambda s, bad: s.update_goal(bad, "1", status="completed"),
    "add_message": lambda s, bad: s.add_message(Message.model_construct(trace_id=bad, role="user", content="x")),
    "get_trace_messages": lambda s, bad: s.get_trace_messages(bad),
    "get_main_path_messages": lambda s, bad: s.get_main_path_messages(bad, 1),
    "get_messages_by_goal": lambda s, bad: s.get_messages_by_goal(bad, "1"),
    "append_event": lambda s, bad: s.append_event(bad, "progress", {}),
    "get_events": lambda s, bad: s.get_events(bad),
}
MESSAGE_ENTRY_POINTS = {
    "get_message": lambda s, bad: s.get_message(bad),
    "update_message": lambda s, bad: s.update_message(bad, description="x"),
}


def _entries(directory):
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*"))


@pytest.mark.parametrize("entry", sorted(TRACE_ENTRY_POINTS))
async def test_trace_entry_points_refuse_unsafe_trace_ids(store, tmp_path, entry):
    await store.create_trace(Trace.create(task="a real trace, so the store is not empty"))
    before = _entries(tmp_path)
    for bad in BAD_TRACE_IDS:
        with pytest.raises(InvalidIdError):
            await TRACE_ENTRY_POINTS[entry](store, bad)
    assert _entries(tmp_path) == before, "a refused call must not touch the disk"


@pytest.mark.parametrize("entry", sorted(MESSAGE_ENTRY_POINTS))
async def test_message_entry_points_refuse_malformed_message_ids(store, entry):
    for bad in BAD_MESSAGE_IDS:
        with pytest.raises(InvalidIdError):
            await MESSAGE_ENTRY_POINTS[entry](store, bad)


async def test_a_symlink_planted_under_the_base_path_is_refused(tmp_path):
    from cyber_agent.trace import FileSystemTraceStore

    outside = tmp_path / "outside"
    outside.mkdir()
    store = FileSystemTraceStore(tmp_path / "traces")
    (tmp_path / "traces" / "planted").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InvalidIdError):
        await store.create_trace(Trace.create(trace_id="planted", task="x"))
    assert list(outside.iterdir()) == []
