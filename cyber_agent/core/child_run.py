"""One path for every child run (SPEC T11, A4, A5, H7): legacy sub-agents, recursive children,
`continue_from` revisions and validators.

    parent run ──spawn_limits──▶ ids ──child_config──▶ RunConfig ──run_child──▶ RunResult
                 (depth, tiers)         (inherits the parent's       (sub_trace_started …
                                         effective harness config)    sub_trace_completed)

- **Config.** A child inherits every behaviour setting of its parent's effective config —
  model, temperature, iterations, workspace, tool dialect, context window, tool-result budget,
  summarizing — unless its role overrides it (a validator's model and iteration cap, an
  archetype's prompt, tools and iterations). It never inherits the parent's `context`, system
  prompt or root-only settings (A9). The run-config snapshot of the child records the result.
- **Specs.** The protocol describes a child as `cyber_agent/protocol/ports.py:ChildSpec`;
  `spec_run` turns it into a `ChildRun` (its `RunConfig` by `child_config`).
- **Depth.** One source: `cyber_agent/protocol/mode.py:AgentPolicy.max_depth` for the mode,
  and, in a tree whose root is an archetype, the archetype spawn depth on top
  (`cyber_agent/core/archetypes.py:SpawnGuard`). A spawn to an archetype id must be in the
  parent's `can_spawn` (`cyber_agent/core/archetypes.py:ArchetypeRegistry.check_spawn`).
- **Events.** Every agent child's `sub_trace_started` has its `sub_trace_completed` on the
  parent's stream, revisions included (`revision: true`). Validators are not agent children:
  they emit neither (their results are on the validated trace's protocol state).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cyber_agent.core.archetypes import ArchetypeRegistry, SpawnGuard, SpawnRefusedError
from cyber_agent.core.config import RunConfig
from cyber_agent.core.stop import ancestry, persisted_stop_reason
from cyber_agent.errors import ConfigurationError, ToolError, ToolRefusedError
from cyber_agent.protocol.mode import AgentPolicy
from cyber_agent.protocol.ports import ChildSetup, ChildSpec, Completion, child_summary
from cyber_agent.trace.models import Trace

if TYPE_CHECKING:
    from cyber_agent.core.runner_api import RunnerHandle, RunResult
    from cyber_agent.trace.protocols import TraceStore

__all__ = [
    "CHILD_DELIVERED", "CHILD_WAITING", "INHERITED_SETTINGS", "ChildNotCreatedError", "ChildRun", "child_config", "child_summary",
    "note_waiting_child", "run_child", "spawn_limits", "spec_run", "waiting_children",
]

INHERITED_SETTINGS = (
    "model", "temperature", "max_iterations", "workspace", "tool_dialect", "context_window",
    "tool_result_max_bytes", "summarize_tool_results", "provider", "shell_tools",
)
"""RunConfig fields a child takes from its parent's effective config unless its role overrides them."""


def child_config(
    parent: RunConfig, *, agent_type: str, parent_trace_id: str, parent_goal_id: str | None = None,
    new_trace_id: str | None = None, trace_id: str | None = None, role_fields: frozenset[str] = frozenset(),
    **overrides: Any,
) -> RunConfig:
    """The RunConfig of a child of a run on `parent`: inherited settings, the child's ids, role overrides.

    `role_fields` are left to the child's role (e.g. an archetype's own `max_iterations`);
    `overrides` are set explicitly.
    """
    inherited = {name: getattr(parent, name) for name in INHERITED_SETTINGS if name not in role_fields}
    fields: dict[str, Any] = {**inherited, "agent_type": agent_type, "parent_trace_id": parent_trace_id,
                              "parent_goal_id": parent_goal_id, **overrides}
    if new_trace_id is not None:
        fields["new_trace_id"] = new_trace_id
    if trace_id is not None:
        fields["trace_id"] = trace_id
    return RunConfig(**fields)


async def spawn_limits(
    runner: RunnerHandle, parent: Trace, *, policy: AgentPolicy, archetypes: ArchetypeRegistry,
    child_agent_type: str | None = None,
) -> int:
    """Check that `parent` may start children (of archetype `child_agent_type`); return the child depth.

    Raises ToolError naming the limit: the mode's depth, the archetype spawn depth of an
    archetype tree, or the parent's `can_spawn` list.
    """
    fence = runner.interrupt_reason(parent.trace_id)
    if fence is not None:
        raise ChildNotCreatedError(_fence_refusal(parent.trace_id, fence))
    stopped = await persisted_stop_reason(runner.trace_store, await ancestry(runner.trace_store, parent))
    if stopped is not None:  # a stop persisted by any process: no child of a stopped subtree starts
        raise ChildNotCreatedError(f"not started: {stopped}")
    depth = parent.lineage.depth + 1
    if depth > policy.max_depth:
        if policy.is_recursive:
            raise ToolRefusedError(
                "depth",
                f"depth limit: this agent is at depth {parent.lineage.depth} and recursive trees allow children "
                f"down to depth {policy.max_depth}; do the work yourself and report"
            )
        raise ToolRefusedError("depth", f"sub-agents cannot start sub-agents in legacy mode (this agent is at depth "
                        f"{parent.lineage.depth}); do the work yourself")
    root_type = parent.agent_type if parent.is_root else await _root_agent_type(runner, parent)
    if root_type is not None and root_type in archetypes:
        try:
            SpawnGuard().check(depth)
        except SpawnRefusedError as exc:
            raise ToolRefusedError("depth", f"{exc}; this {root_type!r} tree may not grow deeper — do the work yourself") from None
    if child_agent_type is not None:
        try:
            archetypes.check_spawn(parent.agent_type or "", child_agent_type)
        except SpawnRefusedError as exc:
            raise ToolError(str(exc)) from None
    return depth


class ChildNotCreatedError(ToolError):
    """A child was refused before anything of it was created (an interrupt fence, a limit)."""


def _fence_refusal(trace_id: str, fence: str) -> str:
    return (f"interrupt: {fence} — the tree of {trace_id} is interrupted, so no sub-agent was created "
            "(AgentRunner.clear_interrupt lifts the fence)")


async def _root_agent_type(runner: RunnerHandle, trace: Trace) -> str | None:
    root = await runner.trace_store.get_trace(trace.root_id)
    return root.agent_type if root is not None else None


@dataclass(frozen=True, kw_only=True)
class ChildRun:
    """One child run to start (or a revision of one to continue) under a parent."""

    parent_trace_id: str
    """The parent whose event stream gets the started/completed pair."""
    messages: Sequence[Mapping[str, Any]]
    """What the child is given: its task (new child) or the parent's note (revision)."""
    config: RunConfig
    """Built by `child_config` from the parent's effective config."""
    setup: ChildSetup | None = None
    """Runner-owned state of a new child; None when continuing an existing one."""
    task: str = ""
    """Short task text for the `sub_trace_started` event."""
    revision: bool = False
    """True when an existing child continues (no new id, no new quota)."""
    events: bool = True
    """False for validators: they are not agent children of the trace they judge."""
    extra_started: dict[str, Any] = field(default_factory=dict)
    """Extra fields of the started event."""


def spec_run(spec: ChildSpec) -> ChildRun:
    """The ChildRun of a protocol's ChildSpec: a new child's config inherits `spec.inherit`; a revision's is bare."""
    if spec.revision:
        # The existing trace's persisted snapshot governs its behaviour (T7): only ids and role here.
        config = RunConfig(trace_id=spec.trace_id, parent_trace_id=spec.parent_trace_id, agent_type=spec.agent_type,
                           parent_goal_id=spec.parent_goal_id)
    else:
        overrides = dict(spec.overrides)
        if spec.tools is not None:
            overrides["tools"] = list(spec.tools)
        if spec.workspace is not None:
            overrides["workspace"] = spec.workspace
        config = child_config(_inherited(spec.inherit), agent_type=spec.agent_type, parent_trace_id=spec.parent_trace_id,
                              parent_goal_id=spec.parent_goal_id, new_trace_id=spec.trace_id, role_fields=spec.role_fields,
                              **overrides)
    return ChildRun(parent_trace_id=spec.parent_trace_id, messages=spec.messages, config=config, setup=spec.setup,
                    task=spec.task, revision=spec.revision, events=spec.events)


def _inherited(source: object) -> RunConfig:
    """The config a new child inherits: the caller's RunConfig, a persisted snapshot (a dict), or defaults."""
    if source is None:
        return RunConfig()
    if isinstance(source, RunConfig):
        return source
    if isinstance(source, Mapping):
        return RunConfig.model_validate(dict(source)) if source else RunConfig()
    raise ConfigurationError("ChildSpec.inherit", f"must be a RunConfig, a run-config snapshot dict or None, got {type(source).__name__}")


async def run_child(
    runner: RunnerHandle, child: ChildRun, *, complete: Completion | None = None,
    on_started: Callable[[], None] | None = None,
) -> RunResult:
    """Run one child through the runner, with its started/completed events in a pair.

    `on_started` is called once the started event is persisted, right before the child is
    created: a child whose start could not be recorded is never created.
    """
    child_id = child.config.trace_id or child.config.new_trace_id
    fence = runner.interrupt_reason(child.parent_trace_id)
    if fence is not None:  # the fence holds before a spawn: nothing of the child is created
        raise ChildNotCreatedError(_fence_refusal(child.parent_trace_id, fence))
    registered = False
    if child.events and child_id is not None and child_id not in runner.stops:
        # Registered under its parent before it runs: a stop of any ancestor reaches it (both modes).
        runner.register_recursive_child(child_id, child.parent_trace_id)
        registered = True
    try:
        return await _run_registered(runner, child, child_id, complete=complete, on_started=on_started)
    finally:
        if registered and child_id is not None:
            runner.stops.unregister(child_id)


async def _run_registered(
    runner: RunnerHandle, child: ChildRun, child_id: str | None, *, complete: Completion | None,
    on_started: Callable[[], None] | None,
) -> RunResult:
    store = runner.trace_store
    if child.events:
        started: dict[str, Any] = {"trace_id": child_id, "parent_goal_id": child.config.parent_goal_id,
                                   "agent_type": child.config.agent_type, "task": child.task, **child.extra_started}
        if child.revision:
            started["revision"] = True
        await store.append_event(child.parent_trace_id, "sub_trace_started", started)
    if on_started is not None:
        on_started()
    try:
        result = await runner.run_result([dict(m) for m in child.messages], child.config, child=child.setup)
    except Exception as exc:  # noqa: BLE001 - one child's crash is that child's failure, never its batch's
        # CancelledError is not an Exception: a stop still propagates. The runner has already
        # ended the child `failed` (core/turn.py:end_run); its stored trace is the result.
        # Validators (no events) keep raising: core/validation.py turns a crash into `unknown`.
        if not child.events:
            raise
        failed = await _failed_result(runner, child_id, exc)
        if failed is None:  # it raised before its trace existed: close the pair, report it to the batch
            error = f"sub-agent {child_id} could not start: {type(exc).__name__}: {exc}"
            if child.events:  # always true here (validators re-raised above); kept for the pair's sake
                await store.append_event(child.parent_trace_id, "sub_trace_completed", {
                    "trace_id": child_id, "status": "failed", "summary": f"(failed: {error})",
                    **({"revision": True} if child.revision else {})})
            raise ChildNotCreatedError(error) from exc
        result = failed
    if child.events:
        trace = result.trace
        judging_error: Exception | None = None
        try:
            extra = await complete(result) if complete is not None else {}
        except Exception as exc:  # noqa: BLE001 - the pair still closes; the batch reports the failure
            judging_error, extra = exc, {"summary": f"(failed while judging: {type(exc).__name__}: {exc})"}
        summary = extra.pop("summary", None)
        if summary is None:
            summary = child_summary(result)
        completed: dict[str, Any] = {
            "trace_id": trace.trace_id, "status": trace.status, "summary": summary,
            "stats": {"total_messages": trace.total_messages, "total_tokens": trace.total_tokens,
                      "total_cost": trace.total_cost},
            **extra,
        }
        if child.revision:
            completed["revision"] = True
        await store.append_event(child.parent_trace_id, "sub_trace_completed", completed)
        if judging_error is not None:
            raise judging_error
    return result


async def _failed_result(runner: RunnerHandle, child_id: str | None, exc: Exception) -> RunResult | None:
    """The result of a child whose run raised: its stored trace, ended `failed`; None when it has no trace."""
    from cyber_agent.core.runner_api import RunResult

    error = f"{type(exc).__name__}: {exc}"
    trace = await runner.trace_store.get_trace(child_id) if child_id is not None else None
    if trace is None:
        return None
    if trace.status not in ("failed", "stopped"):
        trace = await runner.trace_store.update_trace(trace.trace_id, status="failed", error_message=error)
    return RunResult(trace=trace, answer=None, messages=[])


CHILD_WAITING = "child_waiting_approval"
"""`stage` of the parent's `progress` event when a sub-agent ended waiting for a tool approval."""
CHILD_DELIVERED = "child_result_delivered"
"""`stage` of the parent's `progress` event when that sub-agent's later result reached the parent."""


async def note_waiting_child(runner: RunnerHandle, parent_trace_id: str, child: Trace) -> str | None:
    """A sub-agent ended `waiting_confirmation`: make it visible on the parent's stream and hold the parent.

    The parent's event stream gets a `progress` event `{stage: "child_waiting_approval",
    child_trace_id, batch_id}`; the parent ends its run `waiting_confirmation` once the current
    turn's tool calls are done (`AgentRunner.hold_for_child`). Return the child's pending batch id.
    """
    from cyber_agent.core.approvals import current_batch

    batch = await current_batch(runner.trace_store, child.trace_id)
    batch_id = batch.batch_id if batch is not None and batch.status == "pending" else None
    await runner.trace_store.append_event(parent_trace_id, "progress", {
        "stage": CHILD_WAITING, "child_trace_id": child.trace_id, "batch_id": batch_id,
    })
    runner.hold_for_child(parent_trace_id, child.trace_id)
    return batch_id


async def waiting_children(store: TraceStore, trace_id: str) -> list[str]:
    """Sub-agents of `trace_id` that ended waiting for an approval and whose result has not reached it."""
    waiting: dict[str, None] = {}
    for event in await store.get_events(trace_id):
        if event.type != "progress":
            continue
        stage, child_id = event.payload.get("stage"), event.payload.get("child_trace_id")
        if stage == CHILD_WAITING and isinstance(child_id, str):
            waiting[child_id] = None
        elif stage == CHILD_DELIVERED and isinstance(child_id, str):
            waiting.pop(child_id, None)
    return list(waiting)
