"""Live progress: read from the store's events, never more than one refresh behind, the tool each agent runs now,
views that never break a run, a re-displayable widget, and the demo model's simulated latency."""

from __future__ import annotations

import asyncio
import threading
import time

from cyber_agent.core.runner import default_registry
from cyber_agent.llm.fakes import FunctionModel
from cyber_agent.llm.types import LLMResponse, ToolCall, Usage
from cyber_agent.notebook import ProgressSnapshot, launch, run_sync, to_frames
from cyber_agent.notebook.progress import ProgressTracker
from cyber_agent.notebook.progress_view import ViewGroup
from cyber_agent.trace import InMemoryTraceStore, Message

from nb_helpers import CHILD, REPO, ROOT, add_trace

ROOT_TASK = "Delegate the holding."
CHILD_TASK = "Hold the line until told."


def _reply(calls: list[tuple[str, dict]], text: str = "") -> LLMResponse:
    return LLMResponse(content=text, tool_calls=[ToolCall(id=f"t{i}-{name}", name=name, arguments=args)
                                                for i, (name, args) in enumerate(calls)],
                       usage=Usage(prompt_tokens=7, completion_tokens=3))


def _holding_run(released: threading.Event):
    """A legacy root that starts one sub-agent; the sub-agent runs `hold` until `released` is set."""
    registry = default_registry()

    async def hold() -> str:
        """Wait until the test says so."""
        while not released.is_set():
            await asyncio.sleep(0.01)
        return "held"

    registry.register(hold)

    def model(messages, tools):
        task = next(m["content"] for m in messages if m["role"] == "user")
        answered = any(m["role"] == "tool" for m in messages)
        if CHILD_TASK in task:
            return _reply([], "held it") if answered else _reply([("hold", {})])
        return _reply([], "delegated") if answered else _reply([("agent", {"task": CHILD_TASK})])

    return FunctionModel(model, cost=0.0), registry


def _wait_for(predicate, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_progress_shows_each_agents_current_tool_and_catches_up_within_one_refresh():
    released = threading.Event()
    model, registry = _holding_run(released)
    handle = run_sync(launch(ROOT_TASK, llm_call=model, tool_registry=registry, workspace=REPO, progress=False,
                             poll_interval=0.05))
    try:
        _wait_for(lambda: any(a.tool == "hold" for a in handle.snapshot.active))
        time.sleep(0.2)  # both agents are blocked now: a few refreshes, nothing new in the store
        snapshot = handle.snapshot
        tools = {a.label: a.tool for a in snapshot.active}
        assert tools == {"main": "agent", "delegate 1": "hold"}
        assert snapshot.agents == 2 and snapshot.running == 2 and snapshot.depth == 1
        frames = to_frames(handle.store, handle.trace_id)
        assert snapshot.llm_calls == int((frames.messages["message_role"] == "assistant").sum()) == 2
        assert snapshot.tokens == int(frames.messages["total_tokens"].sum())
        assert "delegate 1: hold" in snapshot.current and "delegate 1: hold" in snapshot.to_text()
        html = snapshot.to_html()
        assert "running now (2)" in html and "<td style=\"text-align:left;padding:2px 10px\">hold</td>" in html
    finally:
        released.set()
    result = handle.wait(timeout=30)
    assert result.answer == "delegated"
    final = handle.snapshot
    assert final.active == () and final.current == () and final.llm_calls == 4 and final.status == "completed"


def test_a_refresh_reads_children_announced_in_it():
    store = InMemoryTraceStore()

    async def build() -> ProgressTracker:
        await add_trace(store, ROOT, status="running", messages=2)
        await store.append_event(ROOT, "sub_trace_started", {"trace_id": CHILD, "parent_goal_id": "1",
                                                              "agent_type": "delegate", "task": "a part"})
        await add_trace(store, CHILD, parent=ROOT, agent_type="delegate", status="running", messages=4)
        tracker = ProgressTracker()
        tracker.observe_trace(await store.get_trace(ROOT))
        await tracker.poll(store)
        return tracker

    snapshot = asyncio.run(build()).snapshot()
    assert snapshot.agents == 2 and snapshot.llm_calls == 3 and snapshot.tokens == 45
    assert [a.label for a in snapshot.active] == ["main", "delegate 1"]


def test_a_message_counts_once_whichever_source_brings_it_first():
    store = InMemoryTraceStore()

    async def run() -> ProgressSnapshot:
        await add_trace(store, ROOT, status="running", messages=2)
        tracker = ProgressTracker()
        tracker.observe_trace(await store.get_trace(ROOT))
        for message in await store.get_trace_messages(ROOT):  # the runner yields them...
            tracker.observe_message(message)
        await tracker.poll(store)  # ...and the events carry them again
        tracker.observe_message(Message.create(trace_id=ROOT, role="assistant", prompt_tokens=1, sequence=1))
        return tracker.snapshot()

    snapshot = asyncio.run(run())
    assert snapshot.llm_calls == 1 and snapshot.tokens == 15


def test_a_view_that_raises_is_dropped_and_reported():
    class Broken:
        def update(self, snapshot):
            raise RuntimeError("no screen")

        def close(self, snapshot):
            raise AssertionError("dropped views are not closed")

    seen = []

    class Recorder:
        def update(self, snapshot):
            seen.append(snapshot.status)

        def close(self, snapshot):
            seen.append("closed")

    group = ViewGroup(Broken(), Recorder())
    snapshot = ProgressTracker().snapshot()
    group.update(snapshot)
    group.close(snapshot)
    assert seen == ["starting", "closed"]
    assert group.errors == ["progress view: RuntimeError: no screen"]


def test_progress_outside_a_kernel_is_the_latest_snapshot(tmp_path):
    handle = run_sync(launch("What is 2 + 3?", model="demo", workspace=REPO, progress=False))
    handle.wait(timeout=60)
    assert handle.progress() is handle.snapshot
    assert handle.snapshot.status == "completed"


def test_a_tool_whose_result_came_first_is_not_shown_as_running():
    # The runner yields the root's tool results before the poll reads its `tool_call_started` events.
    store = InMemoryTraceStore()

    async def run() -> tuple[ProgressSnapshot, ProgressSnapshot]:
        await add_trace(store, ROOT, status="running")
        tracker = ProgressTracker()
        tracker.observe_trace(await store.get_trace(ROOT))
        root = tracker.agents[ROOT]
        tracker.observe_message(Message.create(trace_id=ROOT, role="tool", tool_call_id="c1", content="rows",
                                               sequence=5))
        for call, tool in (("c1", "read_file"), ("c2", "goal")):
            tracker.observe_event(root, "progress", {"stage": "tool_call_started", "tool_call_id": call, "tool": tool})
        both = tracker.snapshot()
        tracker.observe_message(Message.create(trace_id=ROOT, role="tool", tool_call_id="c2", content="ok", sequence=6))
        return both, tracker.snapshot()

    one_left, none_left = asyncio.run(run())
    assert one_left.current == ("main: goal",) and one_left.active[0].tool == "goal"
    assert none_left.current == () and none_left.active[0].tool is None
