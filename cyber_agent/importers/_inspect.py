"""Inspect AI logs (`.eval`, `.json`) as trace trees, read through `inspect_ai.log.read_eval_log`.

One root trace per sample × epoch: its messages are the sample's `messages`, each assistant
message carrying the usage of the `model` event that produced it (matched by message id).
A sub-agent run as a tool (`as_tool`, `handoff`: a span of type `agent`) becomes a child trace,
rebuilt from the model events inside that span (the last call's input plus its output, then the
tool results after it); the parent's tool event names the agent span it started
(`agent_span_id`), which links the call to the child. Scores become `ValidationResult`s
(`C`/`I`, True/False, 1/0 → pass/fail; other values unknown, the value kept in the summary).
Needs the `inspect` extra (`pip install 'cyber-agent[inspect]'`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cyber_agent.errors import ImportFormatError
from cyber_agent.importers._plan import ChildLink, TracePlan, import_trace_id
from cyber_agent.llm.types import ToolCall
from cyber_agent.trace.models import Message, MessageContent, Trace, TraceStatus
from cyber_agent.trace.protocol_records import CriterionVerdict, ValidationResult, Verdict
from cyber_agent.trace.provenance import Missing, Provenance
from cyber_agent.trace.state import Lineage, ProtocolState

__all__ = ["read_inspect", "score_verdict"]

_SOURCE = "Inspect AI log"


def _inspect_log(path: Path) -> Any:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise ImportError("importing Inspect AI logs needs inspect_ai: pip install 'cyber-agent[inspect]'") from None
    try:
        return read_eval_log(str(path), resolve_attachments=True)
    except Exception as exc:  # noqa: BLE001 - inspect raises zip, JSON and pydantic errors alike
        errors_of = getattr(exc, "errors", None)
        errors = errors_of() if callable(errors_of) else None
        if errors:
            where = ".".join(str(part) for part in errors[0].get("loc", ())) or "(top level)"
            first = f"{where}: {errors[0].get('msg')}"
        else:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ImportFormatError(path, _SOURCE, f"{type(exc).__name__}: {first}") from None


def score_verdict(value: Any) -> Verdict:
    """pass for `C`, True, 1; fail for `I`, `N`, False, 0; unknown otherwise (partial, other numbers, dicts)."""
    if value in ("C", True) or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 1):
        return "pass"
    if value in ("I", "N", False) or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0):
        return "fail"
    return "unknown"


@dataclass(kw_only=True)
class _Scope:
    """The events of one agent (the sample's root, or an `agent` span) outside deeper agent spans."""

    span_id: str | None
    name: str | None = None
    events: list[Any] = field(default_factory=list)
    started_by: Any = None
    """The parent's tool event that started it (`agent_span_id` names this span)."""
    parent: str | None = None


def _scopes(events: list[Any]) -> tuple[dict[str | None, _Scope], list[str]]:
    """Group a sample's events by their nearest enclosing agent span (None: the sample itself)."""
    spans: dict[str, Any] = {e.id: e for e in events if e.event == "span_begin"}

    def nearest_agent(span_id: str | None) -> str | None:
        seen: set[str] = set()
        while span_id is not None and span_id in spans and span_id not in seen:
            seen.add(span_id)
            if spans[span_id].type == "agent":
                return span_id
            span_id = spans[span_id].parent_id
        return None

    scopes: dict[str | None, _Scope] = {None: _Scope(span_id=None)}
    order: list[str] = []
    for event in events:
        if event.event == "span_begin" and event.type == "agent":
            scopes[event.id] = _Scope(span_id=event.id, name=event.name, parent=nearest_agent(event.parent_id))
            order.append(event.id)
            continue
        owner = nearest_agent(getattr(event, "span_id", None))
        scopes.setdefault(owner, _Scope(span_id=owner)).events.append(event)
    for scope in list(scopes.values()):
        for event in scope.events:
            agent_span = getattr(event, "agent_span_id", None) if event.event == "tool" else None
            if agent_span in scopes:
                scopes[agent_span].started_by = event
    return scopes, order


def _usage_fields(usage: Any) -> dict[str, Any]:
    if usage is None:
        return {}
    fields: dict[str, Any] = {"prompt_tokens": int(usage.input_tokens or 0),
                              "completion_tokens": int(usage.output_tokens or 0),
                              "cached_tokens": int(usage.input_tokens_cache_read or 0)}
    if usage.total_cost is not None:
        fields["cost"] = float(usage.total_cost)
    return fields


def _convert(message: Any, usage: dict[str, Any], when: datetime) -> Message:
    metadata: dict[str, Any] = {"source_ids": {"message_id": message.id}} if message.id else {}
    text = message.text
    if message.role == "assistant":
        calls = [ToolCall(id=c.id, name=c.function, arguments=c.arguments if isinstance(c.arguments, dict) else {},
                          parse_error=c.parse_error) for c in message.tool_calls or ()]
        if getattr(message, "model", None):
            metadata["model"] = message.model
        result = Message.create(trace_id="-", role="assistant", content=MessageContent(text=text or None, tool_calls=calls),
                                metadata=metadata, **usage)
    elif message.role == "tool":
        if message.error is not None:
            metadata["is_error"] = True
            text = text or message.error.message
        result = Message.create(trace_id="-", role="tool", content=text, tool_call_id=message.tool_call_id,
                                tool_name=message.function, metadata=metadata)
    else:
        result = Message.create(trace_id="-", role=message.role, content=text, metadata=metadata)
    result.created_at = when
    return result


def _messages(chat: list[Any], scope: _Scope, start: datetime) -> tuple[list[Message], int]:
    """The messages with their usage and times; also how many model calls matched none of them."""
    models = {e.output.message.id: e for e in scope.events if e.event == "model" and e.output and e.output.choices}
    tools = {e.id: e for e in scope.events if e.event == "tool"}
    out: list[Message] = []
    when = start
    used: set[str] = set()
    for message in chat:
        model_event = models.get(message.id) if message.role == "assistant" else None
        tool_event = tools.get(message.tool_call_id) if message.role == "tool" else None
        usage: dict[str, Any] = {}
        if model_event is not None:
            used.add(message.id)
            usage = _usage_fields(model_event.output.usage)
            when = model_event.completed or model_event.timestamp
            if model_event.working_time is not None:
                usage["duration_ms"] = model_event.working_time * 1000
        elif tool_event is not None:
            when = tool_event.completed or tool_event.timestamp
        converted = _convert(message, usage, when)
        if tool_event is not None and tool_event.working_time is not None:
            converted.duration_ms = tool_event.working_time * 1000
        out.append(converted)
    return out, len(set(models) - used)


def _child_chat(scope: _Scope) -> list[Any]:
    """The conversation of an agent span: its last model call's input and output, then later tool results."""
    calls = [i for i, e in enumerate(scope.events) if e.event == "model" and e.output and e.output.choices]
    if not calls:
        return []
    last = scope.events[calls[-1]]
    chat = list(last.input) + [last.output.message]
    known = {m.id for m in chat if m.id}
    for event in scope.events[calls[-1] + 1:]:
        if event.event == "tool" and event.message_id not in known:
            from inspect_ai.model import ChatMessageTool

            chat.append(ChatMessageTool(id=event.message_id, content=str(event.result or ""), tool_call_id=event.id,
                                        function=event.function, error=event.error))
    return chat


def _verdicts(sample: Any, trace_id: str) -> ProtocolState:
    validations = []
    for name, score in (sample.scores or {}).items():
        verdict = score_verdict(score.value)
        evidence = score.explanation or (f"answer: {score.answer}" if score.answer else "")
        validations.append(ValidationResult(
            scope="root", target_trace_id=trace_id, verdict=verdict,
            criteria=[CriterionVerdict(criterion=f"{name} (target: {sample.target})"[:1000], verdict=verdict,
                                       evidence=evidence)],
            summary=f"{name}: {score.value!r}"))
    return ProtocolState(validations=validations)


def read_inspect(path: Path) -> list[TracePlan]:
    """Read an Inspect log into one tree per sample × epoch."""
    log = _inspect_log(path)
    if log.samples is None:
        raise ImportFormatError(path, _SOURCE, "holds no samples (a header-only or still-running log)")
    plans = []
    for sample in log.samples:
        plans.append(_sample_plan(log, sample, path))
    return plans


def _sample_plan(log: Any, sample: Any, path: Path) -> TracePlan:
    key = f"{log.eval.eval_id}/{sample.id}/{sample.epoch}"
    root_id = import_trace_id("inspect", key)
    scopes, order = _scopes(list(sample.events or ()))
    start = sample.started_at or log.stats.started_at
    start = datetime.fromisoformat(start) if isinstance(start, str) else start
    end = sample.completed_at or log.stats.completed_at
    end = datetime.fromisoformat(end) if isinstance(end, str) else end
    messages, unmatched = _messages(list(sample.messages), scopes[None], start)
    notes = [f"{unmatched} model call(s) of the sample produced no message of its final conversation; "
             "their usage is not counted"] if unmatched else []
    usage_known = any(e.event == "model" for scope in scopes.values() for e in scope.events)
    missing: list[Missing] = [] if usage_known else ["usage"]
    if not any(m.cost for m in messages):
        missing.append("cost")
    status: TraceStatus = "completed"
    error = None
    if sample.error is not None:
        status, error = "failed", sample.error.message
    elif sample.limit is not None:
        status, error = "stopped", f"{sample.limit.type} limit reached ({sample.limit.limit})"
    ids = {"eval_id": log.eval.eval_id, "run_id": log.eval.run_id, "task": log.eval.task,
           "task_id": log.eval.task_id, "sample_id": str(sample.id), "epoch": str(sample.epoch)}
    if sample.uuid:
        ids["sample_uuid"] = sample.uuid
    task = sample.input if isinstance(sample.input, str) else next(
        (m.text for m in reversed(sample.input) if m.role == "user"), None)
    trace = Trace(
        trace_id=root_id, task=task, agent_type="main", name=f"{log.eval.task} #{sample.id}/{sample.epoch}",
        model=log.eval.model, status=status, error_message=error,
        result_summary=sample.output.completion if sample.output and sample.output.completion else None,
        created_at=start, updated_at=end or start, completed_at=end if status != "running" else None,
        lineage=Lineage(depth=0, root_trace_id=root_id), protocol=_verdicts(sample, root_id),
        provenance=Provenance(source="inspect", path=str(path.resolve()), ids=ids, missing=missing, notes=notes),
    )
    root = TracePlan(trace=trace, messages=messages)
    plans: dict[str | None, TracePlan] = {None: root}
    for span_id in order:
        scope = scopes[span_id]
        parent = plans[scope.parent]
        plans[span_id] = child = _child_plan(scope, parent, key, log, path, ids, start)
        parent.children.append(child)
        call = scope.started_by
        if call is not None:
            for index, message in enumerate(parent.messages):
                if message.role == "assistant" and call.id in {c.id for c in message.tool_calls}:
                    parent.links.append(ChildLink(message_index=index, call_id=call.id, tool=call.function, child=child))
                    break
    return root


def _child_plan(scope: _Scope, parent: TracePlan, key: str, log: Any, path: Path, root_ids: dict[str, str],
                start: datetime) -> TracePlan:
    span_id = scope.span_id or ""
    trace_id = import_trace_id("inspect", f"{key}/{span_id}")
    first = next((e.timestamp for e in scope.events), start)
    messages, unmatched = _messages(_child_chat(scope), scope, first)
    call = scope.started_by
    failed = call is not None and call.error is not None
    last = max((m.created_at for m in messages), default=first)
    missing: list[Missing] = [] if any(e.event == "model" for e in scope.events) else ["usage"]
    if not any(m.cost for m in messages):
        missing.append("cost")
    notes = ["messages rebuilt from the span's last model call (its input and output) and the tool results after it"]
    if unmatched:
        notes.append(f"{unmatched} earlier model call(s) produced no message of that conversation; usage not counted")
    model = next((e.model for e in scope.events if e.event == "model"), None)
    task = next((m.text for m in messages if m.role == "user"), None)
    trace = Trace(
        trace_id=trace_id, task=task, parent_trace_id=parent.trace.trace_id, agent_type="delegate", name=scope.name,
        model=model, status="failed" if failed else "completed",
        error_message=call.error.message if failed else None,
        result_summary=next((m.text for m in reversed(messages) if m.role == "assistant" and m.text), None),
        created_at=first, updated_at=last, completed_at=last,
        lineage=Lineage(depth=parent.trace.lineage.depth + 1, root_trace_id=parent.trace.lineage.root_trace_id,
                        created_by_tool="agent"),
        provenance=Provenance(source="inspect", path=str(path.resolve()),
                              ids={**{k: root_ids[k] for k in ("eval_id", "sample_id", "epoch")}, "span_id": span_id},
                              missing=missing, notes=notes, started_by_call=call.id if call is not None else None),
    )
    return TracePlan(trace=trace, messages=messages)
