"""Prepare a run: create a new trace or load an existing one (continue / rewind).

This is the only place the runner reads a trace's history from the store; after it, the loop
only appends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cyber_agent.core.config import RunConfig
from cyber_agent.core.prompt import build_system_prompt
from cyber_agent.errors import ConfigurationError, RunError, TraceNotFoundError
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import Message, Trace

if TYPE_CHECKING:
    from cyber_agent.core.runner import AgentRunner

__all__ = ["PreparedRun", "prepare_run"]


@dataclass(kw_only=True)
class PreparedRun:
    """Mutable state of one run, owned by the runner loop."""

    trace: Trace
    history: list[dict[str, Any]]
    head: int
    goal_id: str | None
    root_goal_id: str | None
    allowed: frozenset[str]
    depth: int
    mode: str
    propagate_stop: bool
    new_messages: list[Message] = field(default_factory=list)


def _task_text(messages: list[dict[str, Any]]) -> str | None:
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return None


async def prepare_run(runner: AgentRunner, messages: list[dict[str, Any]], config: RunConfig) -> PreparedRun:
    """Return the state a run starts from, persisting whatever a new run must record first."""
    for index, message in enumerate(messages):
        if message.get("role") not in ("system", "user", "assistant", "tool"):
            raise ConfigurationError(f"messages[{index}].role", f"must be system/user/assistant/tool, got {message.get('role')!r}")
    if config.trace_id is not None:
        return await _prepare_existing(runner, messages, config)
    return await _prepare_new(runner, messages, config)


async def _prepare_new(runner: AgentRunner, messages: list[dict[str, Any]], config: RunConfig) -> PreparedRun:
    store = runner.trace_store
    task = _task_text(messages)
    if task is None:
        raise ConfigurationError("messages", "a new run needs at least one user message with the task")
    depth = 0
    root_id: str | None = None
    if config.parent_trace_id is not None:
        parent = await store.get_trace(config.parent_trace_id)
        if parent is None:
            raise TraceNotFoundError(config.parent_trace_id)
        depth = int(parent.context.get("agent_depth", 0)) + 1
        root_id = parent.context.get("root_trace_id", parent.trace_id)
    context = dict(config.context)
    trace = Trace.create(
        trace_id=config.new_trace_id, mode="agent", task=task, parent_trace_id=config.parent_trace_id,
        parent_goal_id=config.parent_goal_id, agent_type=config.agent_type, name=config.name, uid=config.uid,
        project_name=config.project_name, model=config.model, context=context,
    )
    # Runner-owned keys are written last so a custom context cannot override them.
    trace.context.update({
        "agent_mode": "legacy",
        "agent_mode_revision": 2,
        "agent_depth": depth,
        "root_trace_id": root_id or trace.trace_id,
        "run_config_snapshot": config.behaviour_snapshot(),
    })
    allowed = runner._get_runtime_tool_names(config, trace)
    await store.create_trace(trace)
    tree = GoalTree(mission=task)
    root_goal = tree.add(task.strip().splitlines()[0][:200] or "task")
    await store.add_goal(trace.trace_id, root_goal)
    await store.update_goal(trace.trace_id, root_goal.id, status="in_progress")
    trace = await store.update_trace(trace.trace_id, current_goal_id=root_goal.id)

    custom = config.system_prompt
    if custom is None and messages and messages[0].get("role") == "system":
        custom = str(messages[0].get("content") or "")
    schemas = runner.tool_registry.schemas(sorted(allowed)) if allowed else []
    system = build_system_prompt(agent_type=config.agent_type, tool_schemas=schemas, custom=custom)
    prepared = PreparedRun(
        trace=trace, history=[], head=0, goal_id=root_goal.id, root_goal_id=root_goal.id, allowed=allowed,
        depth=depth, mode="legacy", propagate_stop=False,
    )
    await _append(runner, prepared, Message.create(trace_id=trace.trace_id, role="system", content=system))
    for message in messages:
        if message.get("role") != "system":
            await _append(runner, prepared, _from_llm(trace.trace_id, message, prepared))
    return prepared


async def _prepare_existing(runner: AgentRunner, messages: list[dict[str, Any]], config: RunConfig) -> PreparedRun:
    store = runner.trace_store
    trace = await store.get_trace(config.trace_id)  # type: ignore[arg-type]
    if trace is None:
        raise TraceNotFoundError(config.trace_id or "")
    if trace.status == "running" and trace.trace_id in runner.stops:
        raise RunError(f"trace {trace.trace_id!r} is already running in this process; stop it first")
    if "agent_mode" not in trace.context:
        # A historic trace without the field continues as legacy and gets it written (A2).
        trace = await store.update_trace(trace.trace_id, context={**trace.context, "agent_mode": "legacy"})
    head = trace.head_sequence
    if config.after_sequence is not None:
        path = await store.get_main_path_messages(trace.trace_id, head)
        if config.after_sequence not in {m.sequence for m in path}:
            raise ConfigurationError(
                "after_sequence", f"{config.after_sequence} is not on the main path of {trace.trace_id!r} (head {head})"
            )
        head = config.after_sequence
        tree = await store.get_goal_tree(trace.trace_id)
        await store.update_trace(trace.trace_id, head_sequence=head)
        await store.append_event(trace.trace_id, "rewind", {
            "after_sequence": head, "head_sequence": head,
            "goal_tree_snapshot": tree.model_dump(mode="json") if tree else None,
        })
    path = await store.get_main_path_messages(trace.trace_id, head)
    trace = await store.update_trace(trace.trace_id, status="running", error_message=None)
    tree = await store.get_goal_tree(trace.trace_id)
    root_goal = tree.children(None)[0].id if tree and tree.goals else None
    prepared = PreparedRun(
        trace=trace, history=[m.to_llm_message() for m in path], head=head, goal_id=trace.current_goal_id,
        root_goal_id=root_goal, allowed=runner._get_runtime_tool_names(config, trace),
        depth=int(trace.context.get("agent_depth", 0)), mode=str(trace.context.get("agent_mode", "legacy")),
        propagate_stop=False,
    )
    # A turn cut by a stop left tool calls without results; providers reject that history.
    if path and path[-1].role == "assistant" and path[-1].tool_calls:
        for call in path[-1].tool_calls:
            await _append(runner, prepared, Message.create(
                trace_id=trace.trace_id, role="tool", tool_call_id=call.id, tool_name=call.name,
                goal_id=prepared.goal_id, content="not executed: the run stopped before this call ran",
                metadata={"is_error": True, "not_executed": True},
            ))
    for message in messages:
        if message.get("role") != "system":
            await _append(runner, prepared, _from_llm(trace.trace_id, message, prepared))
    return prepared


def _from_llm(trace_id: str, message: dict[str, Any], prepared: PreparedRun) -> Message:
    content = message.get("content")
    if message.get("role") == "assistant":
        content = {"text": content, "tool_calls": []}
    return Message.create(
        trace_id=trace_id, role=message["role"], content=content, goal_id=prepared.goal_id,
        tool_call_id=message.get("tool_call_id"),
    )


async def _append(runner: AgentRunner, prepared: PreparedRun, message: Message) -> None:
    message.parent_sequence = prepared.head or None
    await runner._persist(prepared, message)
    prepared.new_messages.append(message)
