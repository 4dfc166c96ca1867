"""The `agent()` tool: start sub-agents as their own traces (SPEC T11, A4, A12).

Legacy: `task` as a string delegates one sub-agent (`delegate`); a list explores the options
in parallel (`explore`) and merges their answers. Sub-agents get T2 sub-trace ids, are linked
by `parent_trace_id` / `parent_goal_id`, and cannot start sub-agents themselves (depth 1).
`messages` seeds each sub-agent with a conversation instead of a task string. Every child is
run by the runner through `cyber_agent/protocol/ports.py:ProtocolRunner.run_child` (config
inheritance, spawn limits, events in pairs: `cyber_agent/core/child_run.py`).
Recursive: `task_brief` (an object or a list) creates governed children; see
`cyber_agent/protocol/delegation.py:run_recursive_agents`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cyber_agent.errors import ToolError
from cyber_agent.protocol.delegation import run_recursive_agents
from cyber_agent.protocol.ports import ChildSetup, ChildSpec, child_summary, protocol_runner
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.protocol_records import TaskBrief
from cyber_agent.trace.trace_id import new_sub_trace_id

__all__ = ["agent", "register_agent_tool"]

SeedMessage = dict[str, str]
"""One message of a sub-agent's seed conversation: {"role": "user" | "assistant", "content": "..."}."""


async def agent(
    ctx: ToolContext,
    task: str | list[str] | None = None,
    task_brief: TaskBrief | list[TaskBrief] | None = None,
    continue_from: str | None = None,
    messages: list[SeedMessage] | list[list[SeedMessage]] | None = None,
    agent_type: str | None = None,
) -> str:
    """Start sub-agents: a task string delegates it to one sub-agent; a list explores each option in parallel.

    Args:
        task: Legacy mode: one task for a single sub-agent, or a list of tasks explored in parallel.
        task_brief: Recursive mode: a TaskBrief (objective, reason, completion_criteria, expected_outputs, constraints, context_refs) or a list of them.
        continue_from: Recursive mode: trace id of one of your children to revise with the (same-task) brief.
        messages: Legacy mode, instead of task: one seed conversation (a list of user/assistant messages) for one sub-agent, or a list of them explored in parallel.
        agent_type: Optional archetype id of the sub-agent(s); it must be one your own archetype may spawn.
    """
    if ctx.agent_mode == "recursive":
        if task is not None or messages is not None:
            raise ToolError("recursive mode delegates with task_brief={objective, completion_criteria, ...}, not task or messages")
        if task_brief is None:
            raise ToolError("recursive mode needs task_brief: an object with objective and completion_criteria, or a list")
        briefs = [task_brief] if isinstance(task_brief, TaskBrief) else list(task_brief)
        if not briefs:
            raise ToolError("task_brief list is empty; pass at least one brief")
        mode = "delegate" if isinstance(task_brief, TaskBrief) else "explore"
        return await run_recursive_agents(ctx, briefs, mode=mode, continue_from=continue_from, agent_type=agent_type)
    if task_brief is not None or continue_from is not None:
        raise ToolError("legacy mode delegates with task (a string or a list of strings); task_brief and continue_from are recursive-only")
    seeds, mode = _seeds(task, messages)
    return await _run_agents(ctx, seeds, mode, agent_type)


def _seeds(task: str | list[str] | None, messages: list[Any] | None) -> tuple[list[list[SeedMessage]], str]:
    """The seed conversations of a legacy call and its mode (delegate for one, explore for a list)."""
    if task is not None and messages is not None:
        raise ToolError("agent() takes task or messages, not both")
    if messages is not None:
        if not messages:
            raise ToolError("agent(messages=...) needs a non-empty conversation or a non-empty list of them")
        nested = all(isinstance(m, list) for m in messages)
        if not nested and not all(isinstance(m, dict) for m in messages):
            raise ToolError("agent(messages=...) takes one conversation (a list of messages) or a list of conversations, not a mix")
        conversations = [list(m) for m in messages] if nested else [list(messages)]
        for index, conversation in enumerate(conversations):
            _check_seed(conversation, index)
        return conversations, "explore" if nested else "delegate"
    if task is None:
        raise ToolError("agent(task=...) needs a task string or a list of task strings (or messages=...)")
    tasks = [task] if isinstance(task, str) else list(task)
    tasks = [t.strip() for t in tasks]
    if not tasks or any(not t for t in tasks):
        raise ToolError("agent(task=...) needs a non-empty task string or a non-empty list of non-empty task strings")
    return [[{"role": "user", "content": t}] for t in tasks], "delegate" if isinstance(task, str) else "explore"


def _check_seed(conversation: list[Any], index: int) -> None:
    if not conversation:
        raise ToolError(f"messages[{index}] is empty; a seed conversation needs at least one user message")
    for position, message in enumerate(conversation):
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if role not in ("user", "assistant") or not isinstance(content, str) or not content.strip():
            raise ToolError(f"messages[{index}][{position}] must be {{'role': 'user' | 'assistant', 'content': "
                            f"non-empty text}}, got {message!r}")
    if not any(m["role"] == "user" for m in conversation):
        raise ToolError(f"messages[{index}] has no user message; the first user message is the sub-agent's task")


async def _run_agents(ctx: ToolContext, seeds: list[list[SeedMessage]], mode: str, agent_type: str | None) -> str:
    """Create and run one sub-trace per seed conversation, in parallel; return the merged summary."""
    runner, store = protocol_runner(ctx), ctx.store
    parent = await store.get_trace(ctx.trace_id)
    if parent is None:
        raise ToolError(f"trace {ctx.trace_id!r} not found")
    await runner.check_spawn(parent, workspace=ctx.run_config.workspace if ctx.run_config else None, agent_type=agent_type)
    first_seq = parent.lineage.child_count + 1
    await store.update_trace(ctx.trace_id, lineage=parent.lineage.model_copy(update={"child_count": first_seq - 1 + len(seeds)}))
    child_ids = [new_sub_trace_id(ctx.trace_id, mode, first_seq + i) for i in range(len(seeds))]
    child_tools = sorted(ctx.allowed_tools - {"agent"})
    if ctx.goal_id is not None:
        tree = await store.get_goal_tree(ctx.trace_id)
        goal = tree.find(ctx.goal_id) if tree else None
        if goal is not None:
            await store.update_goal(ctx.trace_id, goal.id, type="agent_call", sub_trace_ids=[*goal.sub_trace_ids, *child_ids])

    async def one(child_id: str, seed: list[SeedMessage]) -> dict[str, Any]:
        task_text = next(m["content"] for m in seed if m["role"] == "user")
        try:
            return await run_one(child_id, seed, task_text)
        except Exception as exc:  # noqa: BLE001 - one sub-agent's failure is its own line; the batch goes on
            error = str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
            trace = await store.get_trace(child_id)
            return {"trace_id": child_id, "task": task_text, "status": trace.status if trace else "not created",
                    "summary": f"(failed: {error})"}

    async def run_one(child_id: str, seed: list[SeedMessage], task_text: str) -> dict[str, Any]:
        setup = ChildSetup(tool_snapshot=frozenset(child_tools), created_by_tool="agent", parent=parent)
        result = await runner.run_child(ChildSpec(
            parent_trace_id=ctx.trace_id, trace_id=child_id, agent_type=agent_type or mode, messages=seed,
            inherit=ctx.run_config, parent_goal_id=ctx.goal_id, setup=setup, tools=child_tools,
            workspace=str(ctx.workspace), role_fields=frozenset({"max_iterations"}) if agent_type else frozenset(),
            task=task_text,
        ))
        trace = result.trace
        summary = child_summary(result)
        if trace.status == "waiting_confirmation":
            # The parent waits too (issue 14): its result would otherwise never reach this agent.
            batch_id = await runner.note_waiting_child(ctx.trace_id, trace)
            summary = (f"(waiting_confirmation: sub-agent {child_id} waits for a tool approval of batch {batch_id}; "
                       "this agent waits with it and gets the sub-agent's result when it is continued after the "
                       "decision)")
        return {"trace_id": child_id, "task": task_text, "status": trace.status, "summary": summary}

    async with asyncio.TaskGroup() as group:
        jobs = [group.create_task(one(cid, seed)) for cid, seed in zip(child_ids, seeds)]
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
