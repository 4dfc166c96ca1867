"""Write `TracePlan`s into any store through the TraceStore API (create, add messages, events, update).

Nothing here knows a store's layout: `create_trace`, `add_message`, `append_event` and
`update_trace` are the protocol's own writes (`cyber_agent/trace/protocols.py:TraceStore`), so
the file, SQLite, PostgreSQL and memory stores all receive an import the same way. A parent's
call that started a child is written as the runner writes it: a `progress` event
(`tool_call_started`) naming the call, then `sub_trace_started` naming the child, right after
the assistant message holding the call.
"""

from __future__ import annotations

from collections import defaultdict

from cyber_agent.importers._plan import ChildLink, TracePlan
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.state import ProtocolState

__all__ = ["write_plan"]

_TASK_CHARS = 200


async def write_plan(store: TraceStore, plan: TracePlan) -> tuple[int, int]:
    """Write the plan's trace, its messages and links, then its children; return (traces, messages) written."""
    final = plan.trace
    trace_id = final.trace_id
    start = final.model_copy(update={"status": "running", "result_summary": None, "error_message": None,
                                     "completed_at": None, "protocol": ProtocolState()})
    await store.create_trace(start)
    links: dict[int, list[ChildLink]] = defaultdict(list)
    for link in plan.links:
        links[link.message_index].append(link)
    previous: int | None = None
    for index, message in enumerate(plan.messages):
        message.trace_id = trace_id
        message.parent_sequence = previous
        await store.add_message(message)
        previous = message.sequence
        for link in links.get(index, ()):
            child = link.child.trace
            await store.append_event(trace_id, "progress", {
                "stage": "tool_call_started", "assistant_id": message.message_id, "tool_call_id": link.call_id,
                "tool": link.tool})
            await store.append_event(trace_id, "sub_trace_started", {
                "trace_id": child.trace_id, "parent_goal_id": None, "agent_type": child.agent_type,
                "task": (child.task or "")[:_TASK_CHARS]})
    updates: dict[str, object] = {
        "status": final.status, "result_summary": final.result_summary, "error_message": final.error_message,
        "updated_at": final.updated_at, "completed_at": final.completed_at,
    }
    if final.protocol != ProtocolState():
        updates["protocol"] = final.protocol
    await store.update_trace(trace_id, **updates)
    traces, messages = 1, len(plan.messages)
    for child_plan in plan.children:
        more_traces, more_messages = await write_plan(store, child_plan)
        traces += more_traces
        messages += more_messages
    return traces, messages
