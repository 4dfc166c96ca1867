"""The `agent()` tool: start sub-agents as their own traces (SPEC T11, A4, A12).

Legacy: `task` as a string delegates one sub-agent (`delegate`); a list explores the options
in parallel (`explore`) and merges their answers. Sub-agents get T2 sub-trace ids, are linked
by `parent_trace_id` / `parent_goal_id`, and cannot start sub-agents themselves (depth 1).
Recursive: `task_brief` (an object or a list) creates governed children; see
`cyber_agent/core/delegation.py:run_recursive_agents`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cyber_agent.core.task_protocol import TaskBrief
from cyber_agent.errors import ToolError
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.trace_id import new_sub_trace_id

__all__ = ["agent", "register_agent_tool"]

_MAX_LEGACY_DEPTH = 1


async def agent(
    ctx: ToolContext,
    task: str | list[str] | None = None,
    task_brief: TaskBrief | list[TaskBrief] | None = None,
    continue_from: str | None = None,
) -> str:
    """Start sub-agents: a task string delegates it to one sub-agent; a list explores each option in parallel.

    Args:
        task: Legacy mode: one task for a single sub-agent, or a list of tasks explored in parallel.
        task_brief: Recursive mode: a TaskBrief (objective, reason, completion_criteria, expected_outputs, constraints, context_refs) or a list of them.
        continue_from: Recursive mode: trace id of one of your children to revise with the (same-task) brief.
    """
    policy = ctx.extra.get("policy")
    if policy is not None and policy.is_recursive:
        if task is not None:
            raise ToolError("recursive mode delegates with task_brief={objective, completion_criteria, ...}, not task")
        if task_brief is None:
            raise ToolError("recursive mode needs task_brief: an object with objective and completion_criteria, or a list")
        from cyber_agent.core.delegation import run_recursive_agents

        briefs = [task_brief] if isinstance(task_brief, TaskBrief) else list(task_brief)
        if not briefs:
            raise ToolError("task_brief list is empty; pass at least one brief")
        mode = "delegate" if isinstance(task_brief, TaskBrief) else "explore"
        return await run_recursive_agents(ctx, [b.model_dump() for b in briefs], mode=mode, continue_from=continue_from)
    if task_brief is not None or continue_from is not None:
        raise ToolError("legacy mode delegates with task (a string or a list of strings); task_brief and continue_from are recursive-only")
    if task is None:
        raise ToolError("agent(task=...) needs a task string or a list of task strings")
    tasks = [task] if isinstance(task, str) else list(task)
    tasks = [t.strip() for t in tasks]
    if not tasks or any(not t for t in tasks):
        raise ToolError("agent(task=...) needs a non-empty task string or a non-empty list of non-empty task strings")
    mode = "delegate" if isinstance(task, str) else "explore"
    return await _run_agents(ctx, tasks, mode)


async def _run_agents(ctx: ToolContext, tasks: list[str], mode: str) -> str:
    """Create and run one sub-trace per task, in parallel; return the merged summary."""
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.trace_setup import ChildSetup

    depth = int(ctx.extra.get("agent_depth", 0))
    if depth + 1 > _MAX_LEGACY_DEPTH:
        raise ToolError(f"sub-agents cannot start sub-agents in legacy mode (this agent is at depth {depth}); do the work yourself")
    runner, parent_config, store = ctx.runner, ctx.run_config, ctx.store
    parent = await store.get_trace(ctx.trace_id)
    if parent is None:
        raise ToolError(f"trace {ctx.trace_id!r} not found")
    first_seq = parent.lineage.child_count + 1
    await store.update_trace(ctx.trace_id, lineage=parent.lineage.model_copy(update={"child_count": first_seq - 1 + len(tasks)}))
    child_ids = [new_sub_trace_id(ctx.trace_id, mode, first_seq + i) for i in range(len(tasks))]
    child_tools = sorted(ctx.allowed_tools - {"agent"})
    if ctx.goal_id is not None:
        tree = await store.get_goal_tree(ctx.trace_id)
        goal = tree.find(ctx.goal_id) if tree else None
        if goal is not None:
            await store.update_goal(ctx.trace_id, goal.id, type="agent_call", sub_trace_ids=[*goal.sub_trace_ids, *child_ids])

    async def run_child(child_id: str, child_task: str) -> dict[str, Any]:
        await store.append_event(ctx.trace_id, "sub_trace_started", {
            "trace_id": child_id, "parent_goal_id": ctx.goal_id, "agent_type": mode, "task": child_task,
        })
        config = RunConfig(
            model=parent_config.model, temperature=parent_config.temperature,
            max_iterations=parent_config.max_iterations, tools=child_tools, agent_type=mode,
            parent_trace_id=ctx.trace_id, parent_goal_id=ctx.goal_id, new_trace_id=child_id,
            workspace=str(ctx.workspace),
        )
        setup = ChildSetup(tool_snapshot=frozenset(child_tools), created_by_tool="agent")
        result = await runner.run_result([{"role": "user", "content": child_task}], config, child=setup)
        trace = result.trace
        summary = result.answer if result.answer is not None else f"({trace.status}: {trace.error_message or 'no answer'})"
        await store.append_event(ctx.trace_id, "sub_trace_completed", {
            "trace_id": child_id, "status": trace.status, "summary": summary,
            "stats": {"total_messages": trace.total_messages, "total_tokens": trace.total_tokens, "total_cost": trace.total_cost},
        })
        return {"trace_id": child_id, "task": child_task, "status": trace.status, "summary": summary}

    async with asyncio.TaskGroup() as group:
        jobs = [group.create_task(run_child(cid, t)) for cid, t in zip(child_ids, tasks)]
    outcomes = [job.result() for job in jobs]
    if mode == "delegate":
        o = outcomes[0]
        return f"Sub-agent {o['trace_id']} [{o['status']}]: {o['summary']}"
    lines = [f"Explored {len(outcomes)} tasks in parallel:"]
    for i, o in enumerate(outcomes, start=1):
        lines.append(f"{i}. {o['task']} -> [{o['status']}] {o['summary']} (trace {o['trace_id']})")
    return "\n".join(lines)


def register_agent_tool(registry: ToolRegistry) -> ToolRegistry:
    """Add `agent` to a registry and return it."""
    registry.register(agent, name="agent")
    return registry
