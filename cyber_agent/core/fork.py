"""Fork a stored tree with one change, or replay it exactly; only requests that differ call a model.

`fork(store, trace_id, at=..., change=...)` runs the tree's root task again as a new root in the
same store. Every model call goes through a `cyber_agent/llm/cassette.py:CassetteLLM` over the
exchanges the original tree recorded with its traces (`RunConfig.record_exchanges`): a request
equal to a recorded one at the same tree position is answered from the recording, so the part of
the tree before the change is rebuilt at no cost; the first request that differs, and everything
whose requests differ because of it, goes to the live model. The change is applied where it
happens:

- `Brief(...)` at a child: the parent's recorded `agent` call is rewritten to send the new brief
  (the child's requests then differ and its subtree runs live; the parent's turns that read the
  new report run live too).
- `ModelChange(model=...)` at a node: that node's calls go to the given model.
- `MessageChange(content=...)` at `(trace, sequence)`: an assistant message's text is what the
  model is said to have answered at that point; the root's task message is the new task.
- `ToolResult(content=...)` at `(trace, sequence)` of a tool message: that call returns it.

Tools of replayed turns that have side effects (`ToolSpec.side_effects`) are not run again: the
recorded result is returned (`rerun_side_effects=True` runs them). `replay(store, trace_id)` is a
fork without a change and without a live model: it makes zero model calls, or raises at the
first request that the recording does not hold.

The fork's root records its origin in `context["forked_from"]` (`ForkOrigin`): the trace it was
forked from, the point and the change; the fork records its own exchanges, so a fork of a fork
works like any fork. `cyber_agent/core/fork_diff.py:fork_diff` compares a fork with its origin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner, default_registry
from cyber_agent.core.trace_setup import _anchor_message
from cyber_agent.errors import ConfigurationError, MessageNotFoundError, TraceNotFoundError
from cyber_agent.llm.call_site import normalise_ids, tree_position
from cyber_agent.llm.cassette import CassetteLLM, RecordedExchange, expand_records
from cyber_agent.llm.types import LLMCall, LLMResponse
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry, ToolResult
from cyber_agent.trace.exchange_log import ExchangeLog
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocols import TraceStore

__all__ = ["At", "Brief", "Change", "ForkOrigin", "ForkResult", "MessageChange", "ModelChange", "ToolResultChange",
           "fork", "fork_origin", "recorded_exchanges", "replay"]

FORKED_FROM = "forked_from"
"""The key of a fork root's `context` that holds its `ForkOrigin`."""


@dataclass(frozen=True)
class At:
    """A point of a tree: a trace and (for a message change) one of its message sequences."""

    trace_id: str
    sequence: int | None = None


class _Change(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Brief(_Change):
    """A child's brief, changed: recursive `task_brief` fields to replace, or a legacy `task` text."""

    kind: Literal["brief"] = "brief"
    fields: dict[str, Any] = Field(default_factory=dict)
    """TaskBrief fields to set (objective, completion_criteria, constraints, ...)."""
    task: str | None = None
    """A legacy child's new task text."""


class ModelChange(_Change):
    """The model of one node: a spec (`demo`, `openai:NAME`, ...) its calls go to."""

    kind: Literal["model"] = "model"
    model: str


class MessageChange(_Change):
    """The text of one message: an assistant reply, or the root's task."""

    kind: Literal["message"] = "message"
    content: str


class ToolResultChange(_Change):
    """What one tool call returns."""

    kind: Literal["tool_result"] = "tool_result"
    content: str


Change = Brief | ModelChange | MessageChange | ToolResultChange
"""One change a fork applies."""


class ForkOrigin(BaseModel):
    """What a fork was forked from: stored in the fork root's `context["forked_from"]`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trace_id: str
    """The root the fork was made from (itself maybe a fork)."""
    at_trace_id: str | None = None
    at_sequence: int | None = None
    change: dict[str, Any] | None = None
    """The change as JSON (`kind` and its fields); None for an exact replay."""
    root_of_lineage: str
    """The first tree of the chain (a fork of a fork names the original)."""
    generation: int = 1
    """1 for a fork of an original tree, 2 for a fork of a fork, ..."""


@dataclass(frozen=True)
class ForkResult:
    """A finished fork: its root, answer, and how its model calls were answered."""

    trace: Trace
    answer: str | None
    origin: ForkOrigin
    replayed: int
    """Model calls answered from the recording."""
    live: int
    """Model calls sent to a live model."""
    live_by_site: dict[str, int]
    replayed_by_site: dict[str, int]


def fork_origin(trace: Trace) -> ForkOrigin | None:
    """The origin of a fork root (None for a tree that is no fork)."""
    data = trace.context.get(FORKED_FROM)
    return ForkOrigin.model_validate(data) if isinstance(data, dict) else None


async def recorded_exchanges(store: TraceStore, root_id: str) -> list[RecordedExchange]:
    """Every exchange the tree of `root_id` recorded, trace by trace (parents first)."""
    if not isinstance(store, ExchangeLog):
        raise ConfigurationError("store", f"{type(store).__name__} keeps no model exchanges; fork from a trace store")
    out: list[RecordedExchange] = []
    for record in await store.read_records([root_id], messages=False, events=False):
        trace_id = record.trace["trace_id"]
        out += expand_records(trace_id, await store.get_exchanges(trace_id))
    return out


class _ForkTools(ToolRegistry):
    """The registry of a fork: changed tool results, and recorded results for side-effect tools of replayed turns."""

    def __init__(self, base: ToolRegistry, cassette: CassetteLLM, results: Mapping[tuple[str, str], str], rerun: bool) -> None:
        super().__init__(base._tools.values())
        self._cassette = cassette
        self._changed = dict(results)
        self._rerun = rerun

    async def execute(self, name: str, arguments: Mapping[str, Any] | None, *, allowed: frozenset[str] | set[str],
                      context: ToolContext) -> ToolResult:
        """Return a changed or recorded result where the fork calls for one; otherwise run the tool."""
        changed = self._changed.get((tree_position(context.trace_id), str(normalise_ids(context.tool_call_id))))
        if changed is not None and name in allowed:
            return ToolResult(content=changed)
        spec = self.get(name)
        if spec is not None and spec.side_effects and not self._rerun and name in allowed:
            recorded = self._cassette.recorded_result(context.trace_id, context.tool_call_id)
            if recorded is not None:
                return ToolResult(content=recorded)
        return await super().execute(name, arguments, allowed=allowed, context=context)


async def _message_at(store: TraceStore, at: At) -> Message:
    if at.sequence is None:
        raise ConfigurationError("at", f"this change needs a message: pass at=At({at.trace_id!r}, sequence=N)")
    message = await store.get_message(f"{at.trace_id}-{at.sequence:04d}")
    if message is None:
        raise MessageNotFoundError(f"{at.trace_id}-{at.sequence:04d}")
    return message


def _same_reply(message: Message, response: LLMResponse) -> bool:
    calls = [(c.id, c.name, c.arguments) for c in message.tool_calls]
    return (message.text or "") == (response.content or "") and calls == [(c.id, c.name, c.arguments) for c in response.tool_calls]


def _producing(exchanges: Sequence[RecordedExchange], message: Message, earlier: Sequence[Message]) -> RecordedExchange:
    """The exchange whose answer became `message` (the n-th equal answer for the n-th equal message)."""
    nth = sum(1 for m in earlier if m.role == "assistant" and m.sequence < message.sequence and m.content == message.content)
    found = [e for e in exchanges if e.trace_id == message.trace_id and _same_reply(message, e.response)]
    if len(found) <= nth:
        raise ConfigurationError("at", f"{message.message_id} has no recorded exchange; was the tree run with "
                                       "record_exchanges=True?")
    return found[nth]


def _rewrite_brief(call_args: dict[str, Any], child: Trace, change: Brief) -> dict[str, Any] | None:
    """The `agent` call arguments with the child's brief changed (None when this call did not create it)."""
    brief = child.protocol.brief if child.protocol is not None else None
    if brief is not None and "task_brief" in call_args:
        briefs = call_args["task_brief"]
        items = briefs if isinstance(briefs, list) else [briefs]
        for i, item in enumerate(items):
            if isinstance(item, dict) and item.get("objective") == brief.objective:
                new = [*items[:i], {**item, **change.fields}, *items[i + 1:]]
                return {**call_args, "task_brief": new if isinstance(briefs, list) else new[0]}
        return None
    task = call_args.get("task")
    if change.task is None or task is None:
        return None
    tasks = task if isinstance(task, list) else [task]
    if child.task not in tasks:
        return None
    index = tasks.index(child.task)
    new_tasks = [*tasks[:index], change.task, *tasks[index + 1:]]
    return {**call_args, "task": new_tasks if isinstance(task, list) else new_tasks[0]}


async def _brief_override(store: TraceStore, exchanges: Sequence[RecordedExchange], child_id: str,
                          change: Brief) -> tuple[tuple[str, int], LLMResponse]:
    child = await store.get_trace(child_id)
    if child is None or child.parent_trace_id is None:
        raise ConfigurationError("at", f"{child_id!r} is no child trace; a brief change is made at a child")
    parent_id = child.parent_trace_id
    if (child.protocol is None or child.protocol.brief is None) and change.task is None:
        raise ConfigurationError("change", f"{child_id!r} is a legacy child (no TaskBrief): give Brief(task='...')")
    for exchange in exchanges:
        if exchange.trace_id != parent_id:
            continue
        calls = list(exchange.response.tool_calls)
        for i, call in enumerate(calls):
            if call.name != "agent":
                continue
            new_args = _rewrite_brief(call.arguments, child, change)
            if new_args is not None:
                calls[i] = call.model_copy(update={"arguments": new_args, "raw_arguments": None})
                return exchange.ref, exchange.response.model_copy(update={"tool_calls": calls})
    raise ConfigurationError("at", f"no recorded agent call of {parent_id!r} created {child_id!r}")


async def _root_inputs(store: TraceStore, root: Trace) -> tuple[list[dict[str, Any]], RunConfig]:
    """The root's task messages and the config it ran under, to run it again."""
    if root.run_config is None:
        raise ConfigurationError("trace_id", f"{root.trace_id!r} has no run-config snapshot; it cannot be forked")
    anchor = root.root_setup.anchor if root.root_setup is not None else None
    skip = _anchor_message(anchor) if anchor is not None else None
    task: list[dict[str, Any]] = []
    for message in await store.get_main_path_messages(root.trace_id):
        if message.role == "assistant":
            break
        if message.role == "user" and message.text != skip:
            task.append({"role": "user", "content": message.text})
    config = RunConfig(**root.run_config.config, agent_mode=root.lineage.mode,
                       root_task_anchor=anchor.model_dump(mode="json") if anchor is not None else None)
    return task, config


def _at(at: At | str | tuple[str, int] | None) -> At | None:
    if at is None or isinstance(at, At):
        return at
    if isinstance(at, str):
        return At(at)
    return At(at[0], at[1])


async def fork(
    store: TraceStore,
    trace_id: str,
    *,
    at: At | str | tuple[str, int] | None = None,
    change: Change | None = None,
    llm: LLMCall | None = None,
    model: str | None = None,
    rerun_side_effects: bool = False,
    tool_registry: ToolRegistry | None = None,
    exact: bool = False,
) -> ForkResult:
    """Run the tree of root `trace_id` again with one change; recorded requests are answered from the recording.

    `at` is a trace id (a child's creation, a node) or `(trace_id, sequence)` (a message); `llm`
    and `model` give the live model (default: the original's spec, resolved). `exact=True`
    allows no live call at all.
    """
    root = await store.get_trace(trace_id)
    if root is None:
        raise TraceNotFoundError(trace_id)
    if root.parent_trace_id is not None:
        raise ConfigurationError("trace_id", f"{trace_id!r} is a child; fork its root {root.root_id!r} at it instead")
    point = _at(at)
    if (change is None) != (point is None):
        raise ConfigurationError("at", "give both at= and change=, or neither (an exact replay)")
    exchanges = await recorded_exchanges(store, trace_id)
    if not exchanges:
        raise ConfigurationError("trace_id", f"the tree of {trace_id!r} recorded no model exchanges (it ran with "
                                             "record_exchanges=False, or before recording existed): nothing to replay")
    task, config = await _root_inputs(store, root)
    overrides: dict[tuple[str, int], LLMResponse] = {}
    results: dict[tuple[str, str], str] = {}
    models: dict[str, str] = {}
    site_live: dict[str, LLMCall] = {}
    if change is not None and point is not None:
        if isinstance(change, Brief):
            ref, response = await _brief_override(store, exchanges, point.trace_id, change)
            overrides[ref] = response
        elif isinstance(change, ModelChange):
            from cyber_agent.llm.resolve import resolve_llm

            resolved = resolve_llm(change.model, settings=config.provider)
            models[tree_position(point.trace_id)] = resolved.model
            site_live[tree_position(point.trace_id)] = resolved.llm_call
        else:
            message = await _message_at(store, point)
            if isinstance(change, ToolResultChange) or message.role == "tool":
                if message.role != "tool" or message.tool_call_id is None:
                    raise ConfigurationError("at", f"{message.message_id} is a {message.role} message, not a tool result")
                results[(tree_position(message.trace_id), str(normalise_ids(message.tool_call_id)))] = change.content
            elif message.role == "assistant":
                produced = _producing(exchanges, message, await store.get_trace_messages(message.trace_id))
                overrides[produced.ref] = produced.response.model_copy(update={"content": change.content})
            elif message.role == "user" and message.trace_id == trace_id and any(
                    t["content"] == message.text for t in task):
                task = [{"role": "user", "content": change.content if t["content"] == message.text else t["content"]}
                        for t in task]
            else:
                raise ConfigurationError("at", f"{message.message_id} ({message.role}): a message change applies to an "
                                               "assistant reply, a tool result or the root's task")
    live: LLMCall | None = None
    live_model = model
    if not exact:
        live = llm
        if live is None:
            from cyber_agent.llm.resolve import resolve_llm

            try:
                resolved = resolve_llm(model or config.model, settings=config.provider)
            except ConfigurationError as exc:  # only a call that goes live needs the model
                live = _Unresolved(model or config.model, exc)
            else:
                live, live_model = resolved.llm_call, resolved.model
    cassette = CassetteLLM(exchanges, live, live_model=live_model, overrides=overrides, models=models,
                           site_live=site_live, source=f"the recording of {trace_id}")
    origin = _origin(root, point, change)
    base = tool_registry if tool_registry is not None else default_registry()
    runner = AgentRunner(trace_store=store, llm_call=cassette,
                         tool_registry=_ForkTools(base, cassette, results, rerun_side_effects))
    provider = _provider_of(config)
    if provider is not None:  # an `auto` dialect picks what it picked for the original's provider, not "injected"
        runner._providers[id(cassette)] = provider
    config = config.model_copy(update={"context": {**root.context, FORKED_FROM: origin.model_dump(mode="json")}})
    result = await runner.run_result(task, config)
    log = cassette.log
    return ForkResult(trace=result.trace, answer=result.answer, origin=origin, replayed=sum(log.replayed.values()),
                      live=sum(log.live.values()), live_by_site=dict(log.live), replayed_by_site=dict(log.replayed))


def _provider_of(config: RunConfig) -> str | None:
    """The provider the original's model spec resolves to (None when it does not: an injected model)."""
    from cyber_agent.llm.resolve import resolve_llm

    try:
        return resolve_llm(config.model, settings=config.provider).provider
    except ConfigurationError:
        return None


class _Unresolved:
    """The live model of a fork whose spec does not resolve (an injected model's name): fails the first live call."""

    def __init__(self, spec: str, error: ConfigurationError) -> None:
        self.spec, self.error = spec, error

    async def __call__(self, messages: list[dict[str, Any]], model: str, tools: list[dict[str, Any]] | None = None,
                       temperature: float | None = None, *, on_delta: Any = None) -> LLMResponse:
        """Raise: the request differs from the recording and no live model can answer it."""
        raise ConfigurationError("model", f"a request differs from the recording and the original model {self.spec!r} "
                                          f"cannot be resolved ({self.error}); pass llm= or model= to fork")


def _origin(root: Trace, point: At | None, change: Change | None) -> ForkOrigin:
    parent = fork_origin(root)
    return ForkOrigin(
        trace_id=root.trace_id, at_trace_id=point.trace_id if point else None, at_sequence=point.sequence if point else None,
        change=change.model_dump(mode="json") if change is not None else None,
        root_of_lineage=parent.root_of_lineage if parent else root.trace_id,
        generation=parent.generation + 1 if parent else 1,
    )


async def replay(store: TraceStore, trace_id: str, *, tool_registry: ToolRegistry | None = None) -> ForkResult:
    """Rebuild the tree of root `trace_id` from its recording alone: zero model calls, or a divergence error."""
    return await fork(store, trace_id, exact=True, tool_registry=tool_registry)
