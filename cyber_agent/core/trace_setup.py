"""Prepare a run: create a new trace or load an existing one (continue / rewind).

This is the only place the runner reads a trace's history from the store; after it, the loop
only appends.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from cyber_agent.protocol.mode import AgentPolicy, policy_from_environment, validate_recursive_child_execution
from cyber_agent.core.config import RunConfig, config_hash
from cyber_agent.core.open_calls import filler_result, has_open_calls, history_of, open_tail_calls, started_calls
from cyber_agent.core.prompt import build_system_prompt
from cyber_agent.core.resource_budget import ResourceBudget
from cyber_agent.core.run_state import RunServices, RunState
from cyber_agent.trace.protocol_records import RootTaskAnchor
from cyber_agent.protocol.ports import ChildSetup
from cyber_agent.protocol.tool_rights import runtime_tool_names
from cyber_agent.errors import ConfigurationError, RunError, TraceNotFoundError
from cyber_agent.trace.approval_records import ApprovalBatch
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.state import (
    RUNNER_OWNED_CONTEXT,
    ChildExecution,
    ProtocolState,
    RootSetup,
    ValidatorModels,
    ValidatorSearch,
)

__all__ = ["ANCHOR_FORMAT", "RUNNER_OWNED_CONTEXT", "ChildSetup", "effective_config", "parse_root_task_anchor", "prepare_run"]

ANCHOR_FORMAT = (
    "{'objective': 'what the whole tree must achieve', 'completion_criteria': ['a checkable statement', ...], "
    "'constraints': ['a hard rule', ...]} (completion_criteria needs at least one item; constraints may be empty; "
    "example: cyber_agent.cli.DEMO_ANCHOR)"
)
"""The root task anchor a recursive run needs, as error messages show it."""


def parse_root_task_anchor(value: object) -> RootTaskAnchor:
    """Validate a recursive root's anchor; raise ConfigurationError naming what is wrong and the format."""
    if value is None:
        raise ConfigurationError("root_task_anchor", f"recursive mode needs one: pass root_task_anchor={ANCHOR_FORMAT}")
    if not isinstance(value, dict):
        raise ConfigurationError("root_task_anchor", f"must be a dict, got {type(value).__name__} {value!r:.80}; "
                                                     f"write it as {ANCHOR_FORMAT}")
    try:
        return RootTaskAnchor.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'anchor'}: {e['msg']}" for e in exc.errors())
        raise ConfigurationError("root_task_anchor", f"{problems}; write it as {ANCHOR_FORMAT}") from None

async def effective_config(store: TraceStore, config: RunConfig) -> RunConfig:
    """For an existing trace, behaviour comes only from its persisted run-config snapshot (T7)."""
    if config.trace_id is None:
        return config
    trace = await store.get_trace(config.trace_id)
    if trace is None:
        raise TraceNotFoundError(config.trace_id)
    snapshot = trace.run_config
    if snapshot is None:
        if trace.lineage.mode == "recursive":
            raise RunError(f"recursive trace {trace.trace_id!r} has no run-config snapshot; start a new task")
        # A historic legacy trace: infer safe defaults once and mark them.
        inferred = RunConfig(model=trace.model or "demo", agent_type=trace.agent_type or "main", name=trace.name,
                             uid=trace.uid, project_name=trace.project_name).behaviour_snapshot()
        snapshot = inferred.model_copy(update={"legacy_inferred": True})
        await store.update_trace(trace.trace_id, run_config=snapshot)
    if config_hash(snapshot.config) != snapshot.hash:
        raise RunError(f"run-config snapshot of {trace.trace_id!r} does not match its hash; it was altered")
    return config.restored(snapshot)


def _task_text(messages: list[dict[str, Any]]) -> str | None:
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            return content
    return None


async def prepare_run(
    services: RunServices, messages: list[dict[str, Any]], config: RunConfig, child: ChildSetup | None = None
) -> RunState:
    """Return the state a run starts from, persisting whatever a new run must record first.

    Four cases: a new root (`_new_root`), a new child or validator (`_new_child`), both created by
    `_create`; an existing trace continued (`_open_existing`, `_resume`) or rewound first
    (`_rewind`).
    """
    if isinstance(messages, str) or not isinstance(messages, list):
        raise ConfigurationError("messages", f"must be a list of {{'role': ..., 'content': ...}} dicts, got "
                                 f"{type(messages).__name__}; for one task pass [{{'role': 'user', 'content': task}}]")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ConfigurationError(f"messages[{index}]", f"must be a dict with 'role' and 'content', got {type(message).__name__}")
        if message.get("role") not in ("system", "user", "assistant", "tool"):
            raise ConfigurationError(f"messages[{index}].role", f"must be system/user/assistant/tool, got {message.get('role')!r}")
    if config.trace_id is not None:
        trace, batch = await _open_existing(services, config.trace_id)
        head = trace.head_sequence
        if config.after_sequence is not None:
            head = await _rewind(services.store, trace, config.after_sequence)
        return await _resume(services, messages, config, trace, batch, head)
    start = _new_root(messages, config) if config.parent_trace_id is None else (
        await _new_child(services.store, messages, config, child))
    return await _create(services, config, child, start)


def _root_setup(config: RunConfig) -> tuple[AgentPolicy, RootSetup | None]:
    """Read the mode (and for recursive the anchor, budget and validator models) of a new root."""
    policy = policy_from_environment(override=config.agent_mode)
    if not policy.is_recursive:
        return policy, None
    validate_recursive_child_execution(config.child_execution_mode, config.max_parallel_children)
    anchor = parse_root_task_anchor(config.root_task_anchor)
    budget = ResourceBudget.from_environment()
    validator = os.environ.get("AGENT_VALIDATOR_MODEL") or config.model
    root_validator = os.environ.get("AGENT_ROOT_VALIDATOR_MODEL") or validator
    return policy, RootSetup(
        anchor=anchor, anchor_hash=anchor.content_hash(), resource_budget=budget,
        validator_models=ValidatorModels(criteria=validator, root=root_validator),
        validator_search=_search_setting(),
        child_execution=ChildExecution(mode=config.child_execution_mode, max_parallel_children=config.max_parallel_children),
    )


def _search_setting() -> ValidatorSearch:
    """Freeze the validators' web-search setting (A11): disabled unless serper and its key are set."""
    provider = os.environ.get("AGENT_VALIDATOR_SEARCH_PROVIDER", "").strip().lower() or None
    if provider not in (None, "serper"):
        raise ConfigurationError("AGENT_VALIDATOR_SEARCH_PROVIDER", f"must be 'serper' or unset, got {provider!r}")
    enabled = provider == "serper" and bool(os.environ.get("SERPER_API_KEY"))
    return ValidatorSearch(provider=provider if enabled else None, enabled=enabled)


def _anchor_message(anchor: RootTaskAnchor) -> str:
    lines = ["# Root task", f"Objective: {anchor.objective}", "Completion criteria:"]
    lines += [f"{i}. {c}" for i, c in enumerate(anchor.completion_criteria, start=1)]
    if anchor.constraints:
        lines += ["Hard constraints:"] + [f"- {c}" for c in anchor.constraints]
    lines.append("Your final answer is checked by an independent root validator against these criteria.")
    return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class _NewTrace:
    """What the two new cases (root, child) settle before the trace is created."""

    messages: list[dict[str, Any]]
    """The run's messages (a recursive root's anchor message appended)."""
    policy: AgentPolicy
    depth: int
    root_id: str | None = None
    """The tree's root (None: the new trace is the root)."""
    root_setup: RootSetup | None = None
    title: str | None = None
    """The root goal's title from a typed record (a brief, an anchor), else taken from the task text."""


def _new_root(messages: list[dict[str, Any]], config: RunConfig) -> _NewTrace:
    """A new root: its mode from the environment (A1), a recursive root's anchor, budget and validators (A3)."""
    policy, root_setup = _root_setup(config)
    title = None
    if root_setup is not None and root_setup.anchor is not None:
        if _task_text(messages) is None:
            title = root_setup.anchor.objective
        messages = [*messages, {"role": "user", "content": _anchor_message(root_setup.anchor)}]
    return _NewTrace(messages=messages, policy=policy, depth=0, root_setup=root_setup, title=title)


async def _new_child(
    store: TraceStore, messages: list[dict[str, Any]], config: RunConfig, child: ChildSetup | None,
) -> _NewTrace:
    """A new child or validator: the persisted root's policy (A2), one level deeper (a validator: level with its target)."""
    assert config.parent_trace_id is not None
    known = child.parent if child is not None else None
    parent = known if known is not None and known.trace_id == config.parent_trace_id else (
        await store.get_trace(config.parent_trace_id))
    if parent is None:
        raise TraceNotFoundError(config.parent_trace_id)
    root_id = parent.root_id
    given_root = child.root if child is not None else None
    root: Trace | None
    if root_id == parent.trace_id:
        root = parent
    elif given_root is not None and given_root.trace_id == root_id:
        root = given_root
    else:
        root = await store.get_trace(root_id)
    # Children inherit the persisted root policy, never the current environment (A2).
    policy = AgentPolicy.of(root or parent)
    depth = parent.lineage.depth + (0 if child is not None and child.is_validator else 1)
    # The root goal's title comes from the typed brief, never from parsing its rendered text.
    brief = child.protocol.brief if child is not None else None
    return _NewTrace(messages=messages, policy=policy, depth=depth, root_id=root_id,
                     title=brief.objective if brief is not None else None)


async def _create(services: RunServices, config: RunConfig, child: ChildSetup | None, start: _NewTrace) -> RunState:
    """Create the new trace (root goal in focus, the system prompt, the given messages) and its run state."""
    store = services.store
    messages, policy = start.messages, start.policy
    task = _task_text(messages)
    if task is None:
        raise ConfigurationError("messages", "a new run needs at least one user message with the task")
    # Runner state never comes from a caller's context (A6, A9): it lives in typed fields the
    # caller cannot reach; old-style runner keys in a custom context are dropped.
    context = {k: v for k, v in config.context.items() if k not in RUNNER_OWNED_CONTEXT}
    trace = Trace.create(
        trace_id=config.new_trace_id, mode="agent", task=task, parent_trace_id=config.parent_trace_id,
        parent_goal_id=config.parent_goal_id, agent_type=config.agent_type, name=config.name, uid=config.uid,
        project_name=config.project_name, model=config.model, context=context,
        root_setup=start.root_setup, run_config=config.behaviour_snapshot(),
        protocol=child.protocol if child is not None else ProtocolState(),
    )
    trace.lineage = policy.lineage(
        root_trace_id=start.root_id or trace.trace_id, depth=start.depth,
        created_by_tool=child.created_by_tool if child is not None else None,
        tool_snapshot=sorted(child.tool_snapshot) if child is not None else None,
    )
    allowed = runtime_tool_names(services.registry.names(), config.tools, trace)
    # The root goal exists, in progress and in focus, from the first write on (fewer store calls per run).
    tree = GoalTree(mission=task, cascade_completion=policy.cascade_completion)
    root_goal = tree.add((start.title or _goal_title(task))[:200])
    root_goal.status = "in_progress"
    tree.current_id = root_goal.id
    trace.current_goal_id = root_goal.id
    await store.create_trace(trace, goal_tree=tree)  # the trace and its tree in one write
    # A store that can writes the event with the system message (SQLite: in its transaction).
    emit = getattr(store, "defer_event", None) or store.append_event
    await emit(trace.trace_id, "goal_added", {"goal": root_goal.model_dump(mode="json")})
    if policy.is_recursive and config.parent_trace_id is None:
        await (await services.budget_for(trace)).initialize()

    custom = config.system_prompt
    if custom is None and messages and messages[0].get("role") == "system":
        custom = str(messages[0].get("content") or "")
    schemas = services.registry.schemas(sorted(allowed)) if allowed else []
    system = build_system_prompt(agent_type=config.agent_type, tool_schemas=schemas, custom=custom)
    prepared = RunState(
        trace=trace, history=[], head=0, goal_id=root_goal.id, root_goal_id=root_goal.id, allowed=allowed,
        depth=start.depth, policy=policy,
    )
    if policy.is_recursive:
        prepared.budget = await services.budget_for(trace)
    first = [Message.create(trace_id=trace.trace_id, role="system", content=system)]
    first += [_from_llm(trace.trace_id, message, prepared) for message in messages if message.get("role") != "system"]
    await _append_first(services, prepared, first)
    return prepared


async def _open_existing(services: RunServices, trace_id: str) -> tuple[Trace, ApprovalBatch | None]:
    """Load a trace to continue; refuse one running here, one awaiting an approval, or a root that lost its anchor."""
    store = services.store
    trace = await store.get_trace(trace_id)
    if trace is None:
        raise TraceNotFoundError(trace_id)
    if trace.status == "running" and trace.trace_id in services.stops:
        raise RunError(f"trace {trace.trace_id!r} is already running in this process; stop it first")
    # Continuing a trace is the user's answer to its stop: its own persisted stop is withdrawn
    # (a stop of an ancestor's subtree still holds, and halts the continued run at once).
    if await store.get_stop_requests([trace.trace_id]):
        await store.clear_stop(trace.trace_id)
    from cyber_agent.core.approvals import current_batch

    batch = await current_batch(store, trace.trace_id)
    if batch is not None and batch.status == "pending":
        from cyber_agent.errors import ConflictError

        raise ConflictError(f"trace {trace.trace_id!r} is waiting for tool approval (batch {batch.batch_id}); decide it first")
    if batch is not None and batch.status in ("executing", "execution_unknown"):
        raise RunError(f"trace {trace.trace_id!r}: approval batch {batch.batch_id} is {batch.status}; its side effects "
                       "are unknown, so the trace fails closed and is not retried automatically")
    # A historic trace without a mode reads as legacy (Lineage's default) and is written with it
    # on its next update (A2).
    if AgentPolicy.of(trace).is_recursive and trace.parent_trace_id is None:
        _check_root_anchor(trace)
    return trace, batch


def _check_root_anchor(trace: Trace) -> None:
    """A recursive root continues only with its anchor, the anchor's hash and its budget (A3)."""
    setup = trace.root_setup
    present = {"root_task_anchor": setup and setup.anchor, "root_task_anchor_hash": setup and setup.anchor_hash,
               "resource_budget": setup and setup.resource_budget}
    missing = [name for name, value in present.items() if not value]
    if setup is None or setup.anchor is None or missing:
        raise RunError(
            f"recursive root {trace.trace_id!r} lacks {', '.join(missing)} (created before revision 2); "
            "it cannot continue — start a new task with a root_task_anchor"
        )
    if setup.anchor.content_hash() != setup.anchor_hash:
        raise RunError(f"root task anchor of {trace.trace_id!r} does not match its hash; start a new task")


async def _rewind(store: TraceStore, trace: Trace, after_sequence: int) -> int:
    """Move the head back to `after_sequence` (on the main path); nothing is deleted (T3). Return the new head."""
    path = await store.get_main_path_messages(trace.trace_id, trace.head_sequence)
    if after_sequence not in {m.sequence for m in path}:
        raise ConfigurationError(
            "after_sequence", f"{after_sequence} is not on the main path of {trace.trace_id!r} (head {trace.head_sequence})"
        )
    tree = await store.get_goal_tree(trace.trace_id)
    await store.update_trace(trace.trace_id, head_sequence=after_sequence)
    await store.append_event(trace.trace_id, "rewind", {
        "after_sequence": after_sequence, "head_sequence": after_sequence,
        "goal_tree_snapshot": tree.model_dump(mode="json") if tree else None,
    })
    return after_sequence


async def _resume(
    services: RunServices, messages: list[dict[str, Any]], config: RunConfig, trace: Trace,
    batch: ApprovalBatch | None, head: int,
) -> RunState:
    """The run state of an existing trace from `head`: history read once, open calls closed, new messages appended."""
    store = services.store
    policy = AgentPolicy.of(trace)
    path = await store.get_main_path_messages(trace.trace_id, head)
    if config.side_branch is None:
        trace = await store.update_trace(trace.trace_id, status="running", error_message=None)
    tree = await store.get_goal_tree(trace.trace_id)
    root_goal = tree.children(None)[0].id if tree and tree.goals else None
    prepared = RunState(
        trace=trace, history=[], head=head, goal_id=trace.current_goal_id,
        root_goal_id=root_goal, allowed=runtime_tool_names(services.registry.names(), config.tools, trace),
        depth=trace.lineage.depth, policy=policy,
    )
    prepared.branch = config.side_branch
    if policy.is_recursive:
        prepared.budget = await services.budget_for(trace)
    last = path[-1] if path else None
    # A stop, an interrupt, a crash or a rewind can leave calls without results; providers reject
    # that history. The events are read only then, to tell a started call from one never run.
    started = started_calls(await store.get_events(trace.trace_id)) if has_open_calls(path) else set()
    if batch is not None and batch.status == "decided" and last is not None and last.message_id == batch.assistant_message_id:
        prepared.resume_batch = batch  # executed by the loop before the next model call
        # Its results come from executing it; gaps further back are closed in memory.
        prepared.history = [*history_of(path[:-1], started), last.to_llm_message()]
    else:
        assistant, open_calls = open_tail_calls(path, started)
        if assistant is not None:
            for item in open_calls:
                filler = filler_result(assistant, item, goal_id=prepared.goal_id)
                await _append(services, prepared, filler)
                path.append(filler)
        # Gaps further back (a trace written before this rule) are closed in memory, in call order.
        prepared.history = history_of(path, started)
    for message in messages:
        if message.get("role") != "system":
            await _append(services, prepared, _from_llm(trace.trace_id, message, prepared))
    return prepared


def _goal_title(task: str) -> str:
    """The root goal of a plain-text task: its first non-empty line (a leading markdown `#` dropped)."""
    for line in task.strip().splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line
    return "task"


def _from_llm(trace_id: str, message: dict[str, Any], prepared: RunState) -> Message:
    content = message.get("content")
    if message.get("role") == "assistant":
        content = {"text": content, "tool_calls": []}
    return Message.create(
        trace_id=trace_id, role=message["role"], content=content, goal_id=prepared.goal_id,
        tool_call_id=message.get("tool_call_id"), branch=prepared.branch,
    )


async def _append_first(services: RunServices, prepared: RunState, messages: list[Message]) -> None:
    """A new trace's first messages, each after the one before, in one write where the store has `add_messages`
    (SQLite, PostgreSQL: one transaction instead of one per message)."""
    add_all = getattr(services.store, "add_messages", None)
    if add_all is None or prepared.head != 0 or len(messages) < 2:
        for message in messages:
            await _append(services, prepared, message)
        return
    for sequence, message in enumerate(messages):  # the trace is new: its messages are 1, 2, ... in this order
        message.parent_sequence = sequence or None
        message.branch = prepared.branch
    await add_all(messages)
    for message in messages:
        prepared.record(message)
        prepared.new_messages.append(message)


async def _append(services: RunServices, prepared: RunState, message: Message) -> None:
    message.parent_sequence = prepared.head or None
    message.branch = prepared.branch
    await services.persist(prepared, message)
    prepared.new_messages.append(message)
