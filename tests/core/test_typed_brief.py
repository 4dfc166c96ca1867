"""A brief travels typed from the `agent` call to the child: rendered to text once, never parsed back.

The child's task message is the only rendering; its stored brief, its root goal and its tool
rights come from the typed `TaskBrief`. The tests swap the renderer for one whose text holds no
recoverable objective: everything typed still comes out right, so nothing reads the text back.
"""

from __future__ import annotations

from typing import Any

from recursive_helpers import (
    ROOT,
    TASK,
    TreeModel,
    brief,
    clean_agent_env,  # noqa: F401  (autouse fixture)
    delegate,
    make_runner,
    recursive_config,
)

from cyber_agent.protocol import delegation
from cyber_agent.trace.protocol_records import TaskBrief


def _scrambling_renderer(calls: list[TaskBrief]) -> Any:
    def render(*, brief: TaskBrief, anchor: Any, lineage: dict[str, Any], refs: dict[str, Any]) -> str:
        calls.append(brief)
        return f"opaque task {len(calls)}: {brief.objective[::-1]}"
    return render


async def test_the_child_gets_its_brief_typed_and_its_text_rendered_once(monkeypatch):
    rendered: list[TaskBrief] = []
    monkeypatch.setattr(delegation, "build_child_task_message", _scrambling_renderer(rendered))
    model = TreeModel({ROOT: [delegate(brief("Sum East", "East is summed", constraints=["cite rows"]))]})
    runner, store = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed"
    children = [t for t in await store.list_traces(limit=None) if t.parent_trace_id == result.trace.trace_id
                and not t.is_validator]
    assert len(children) == 1 and len(rendered) == 1  # one child, one rendering
    child = children[0]
    stored = child.protocol.brief
    assert isinstance(stored, TaskBrief) and stored == rendered[0]
    assert stored.objective == "Sum East" and stored.completion_criteria == ["East is summed"]
    assert stored.constraints == ["cite rows"]
    # The child's task is the rendered text; its root goal comes from the typed brief, not from that text.
    assert child.task == "opaque task 1: tsaE muS"
    tree = await store.get_goal_tree(child.trace_id)
    assert tree is not None and tree.goals[0].description == "Sum East"
    messages = await store.get_trace_messages(child.trace_id)
    assert [m.text for m in messages if m.role == "user"][0] == "opaque task 1: tsaE muS"
