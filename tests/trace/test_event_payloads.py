"""Event payload models: every type has one, stores check payloads on write, readers stay lenient."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from store_helpers import user

from cyber_agent.errors import InvalidUpdateError
from cyber_agent.trace import EVENT_TYPES, FileSystemTraceStore, Goal, GoalTree, Trace, TraceEvent
from cyber_agent.trace.approval_records import ApprovalBatch, PendingCall
from cyber_agent.trace.event_payloads import (
    PAYLOAD_MODELS,
    EventPayload,
    GoalAddedPayload,
    ProgressPayload,
    SubTraceCompletedPayload,
)
from cyber_agent.trace.events import EventType
from cyber_agent.trace.store_base import BaseTraceStore

OPEN_TYPES = {"sub_trace_started", "sub_trace_completed", "progress"}


def _message() -> dict[str, Any]:
    message = user("t", "hello")
    message.assign(1)
    return message.model_dump(mode="json")


def _goal() -> dict[str, Any]:
    return Goal(id="1", description="do it").model_dump(mode="json")


def _batch(status: str) -> dict[str, Any]:
    call = PendingCall(call_id="c1", name="bash", arguments={"cmd": "ls"}, requires_confirmation=True)
    return ApprovalBatch(batch_id="b1", trace_id="t", assistant_message_id="t-0001", calls=[call],
                         status=status).model_dump(mode="json")  # type: ignore[arg-type]


STATS = {"message_count": 1, "total_tokens": 3, "total_cost": 0.5}

# One payload per type, shaped as its emitter sends it.
VALID: dict[str, dict[str, Any]] = {
    "goal_added": {"goal": _goal()},
    "goal_updated": {"goal_id": "1", "patch": {"status": "completed"}, "affected_goals": [_goal()]},
    "message_added": {"message": _message(), "affected_goals": [
        {"goal_id": "1", "self_stats": STATS, "cumulative_stats": STATS}]},
    "trace_status_changed": {"trace_id": "t", "status": "completed", "previous": "running"},
    "sub_trace_started": {"trace_id": "c", "parent_goal_id": "1", "agent_type": "delegate", "task": "sum"},
    "sub_trace_completed": {"trace_id": "c", "status": "completed", "summary": "42", "revision": True,
                            "stats": {"total_messages": 3, "total_tokens": 10, "total_cost": 0.0},
                            "outcome": "completed", "verdict": "pass"},
    "rewind": {"after_sequence": 2, "head_sequence": 2, "goal_tree_snapshot": GoalTree(mission="m").model_dump(mode="json")},
    "trace_completed": {"trace_id": "t", "total_messages": 4},
    "compaction": {"kind": "micro", "tokens_before": 900, "tokens_after": 300, "replaced_indices": [2],
                   "replaced_call_ids": ["c1"], "kept_recent": 4, "summary_chars": 0, "summary_cost": 0.0},
    "progress": {"stage": "reflection_extracted", "reflection_id": "r1", "extraction_ids": []},
    "tool_approval_requested": {"batch": _batch("pending")},
    "tool_approval_decided": {"batch": _batch("decided")},
    "llm_retry": {"attempt": 1, "status": 429, "error": "HTTP 429", "wait_s": 2.0, "retry_after": True, "model": "m"},
    "usage_invalid": {"reason": "reported prompt_tokens=-5; booked the estimate instead", "prompt_tokens": 3,
                      "completion_tokens": 1, "model": "m"},
}

# A malformed payload per type and the field its error must name.
MALFORMED: dict[str, tuple[dict[str, Any], str]] = {
    "goal_added": ({"goal": {"description": "no id"}}, "goal.id"),
    "goal_updated": ({**VALID["goal_updated"], "goal": "1"}, "goal"),
    "message_added": ({"message": _message()}, "affected_goals"),
    "trace_status_changed": ({**VALID["trace_status_changed"], "status": "finished"}, "status"),
    "sub_trace_started": ({**VALID["sub_trace_started"], "revision": "maybe"}, "revision"),
    "sub_trace_completed": ({**VALID["sub_trace_completed"], "stats": {"total_messages": 3}}, "stats.total_tokens"),
    "rewind": ({"after_sequence": 0}, "head_sequence"),
    "trace_completed": ({"trace_id": "t", "total_messages": 4, "total": 4}, "total"),
    "compaction": ({**VALID["compaction"], "kind": "huge"}, "kind"),
    "progress": ({"stage": ["not", "a", "name"]}, "stage"),
    "tool_approval_requested": ({"batch": {"batch_id": "b1"}}, "batch.trace_id"),
    "tool_approval_decided": ({"batches": [VALID["tool_approval_decided"]["batch"]]}, "batches"),
    "llm_retry": ({**VALID["llm_retry"], "wait_s": "soon"}, "wait_s"),
    "usage_invalid": ({**VALID["usage_invalid"], "prompt_tokens": "many"}, "prompt_tokens"),
}


def test_every_event_type_has_a_documented_payload_model():
    assert set(PAYLOAD_MODELS) == EVENT_TYPES == set(VALID) == set(MALFORMED)
    for event_type, model in PAYLOAD_MODELS.items():
        assert issubclass(model, EventPayload) and event_type in (model.__doc__ or ""), model
        assert (model.model_config.get("extra") == "allow") == (event_type in OPEN_TYPES), event_type
        assert all(field.description for field in model.model_fields.values()), model


@pytest.mark.parametrize("event_type", sorted(EVENT_TYPES))
async def test_a_valid_payload_persists_as_given_and_reads_back_as_its_model(store, open_store, trace_id, event_type):
    before = len(await store.get_events(trace_id))
    event_id = await store.append_event(trace_id, event_type, VALID[event_type])
    assert event_id == before + 1
    event = (await open_store().get_events(trace_id, since_event_id=before))[0]
    assert event.payload == VALID[event_type]  # the dict as given, not the model's dump
    typed = event.typed_payload()
    assert type(typed) is PAYLOAD_MODELS[event_type]


async def test_the_persisted_line_embeds_the_payload_byte_for_byte(tmp_path: Path):
    store = FileSystemTraceStore(tmp_path)
    trace = Trace.create(task="bytes")
    await store.create_trace(trace)
    # Keys out of the model's order, a default left out, an extra progress field: all kept as given.
    payload = {"trace_id": "c", "summary": "s", "status": "failed", "extra": {"b": 1, "a": [1.5]},
               "stats": {"total_cost": 0.25, "total_tokens": 1, "total_messages": 2}}
    await store.append_event(trace.trace_id, "sub_trace_completed", payload)
    line = (tmp_path / trace.trace_id / "events.jsonl").read_text().splitlines()[-1]
    assert f'"payload":{json.dumps(payload, separators=(",", ":"))},' in line
    typed = (await store.get_events(trace.trace_id))[-1].typed_payload()
    assert isinstance(typed, SubTraceCompletedPayload) and typed.revision is False and typed.outcome is None
    assert typed.model_extra == {"extra": {"b": 1, "a": [1.5]}}


@pytest.mark.parametrize("event_type", sorted(EVENT_TYPES))
async def test_a_malformed_payload_is_refused_naming_type_and_field_and_leaves_no_gap(store, open_store, trace_id,
                                                                                       event_type):
    before = await store.get_events(trace_id)
    payload, field = MALFORMED[event_type]
    with pytest.raises(InvalidUpdateError) as caught:
        await store.append_event(trace_id, event_type, payload)
    message = str(caught.value)
    assert message.startswith(f"{event_type} payload") and f"{field}:" in message, message
    assert PAYLOAD_MODELS[event_type].__name__ in message
    reopened = open_store()
    assert await reopened.get_events(trace_id) == before
    assert await reopened.append_event(trace_id, "trace_completed", VALID["trace_completed"]) == len(before) + 1


async def test_open_payloads_keep_the_fields_callers_add():
    typed = ProgressPayload.model_validate({"post_turn_hook": "notes", "error": "ValueError: boom"})
    assert typed.stage is None and typed.error == "ValueError: boom" and typed.model_extra == {"post_turn_hook": "notes"}


async def test_reading_never_validates_so_old_streams_load(tmp_path: Path):
    store = FileSystemTraceStore(tmp_path)
    trace = Trace.create(task="old")
    await store.create_trace(trace)
    # A line an older version wrote: a rewind without its head and snapshot.
    old = TraceEvent(event_id=1, trace_id=trace.trace_id, type="rewind", payload={"after_sequence": 0})
    with (tmp_path / trace.trace_id / "events.jsonl").open("a") as events:
        events.write(old.model_dump_json() + "\n")
    reopened = FileSystemTraceStore(tmp_path)
    [event] = await reopened.get_events(trace.trace_id)
    assert event.payload == {"after_sequence": 0}
    with pytest.raises(ValidationError, match="head_sequence"):
        event.typed_payload()
    assert await reopened.append_event(trace.trace_id, "progress", {"stage": "after an old line"}) == 2


# ---- what real runs persist -----------------------------------------------------------------------------
def _demo(directory: Path, mode: str) -> list[TraceEvent]:
    from cyber_agent.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["--store", str(directory), "demo", "--mode", mode]) == 0
    store = FileSystemTraceStore(directory)

    async def events() -> list[TraceEvent]:
        return [e for t in await store.list_traces(limit=None) for e in await store.get_events(t.trace_id)]

    return asyncio.run(events())


@pytest.mark.parametrize("mode", ["recursive", "legacy"])
def test_every_payload_a_demo_run_persists_fits_its_model(tmp_path: Path, mode: str):
    events = _demo(tmp_path, mode)
    seen: set[EventType] = set()
    for event in events:
        typed = event.typed_payload()
        assert type(typed) is PAYLOAD_MODELS[event.type]
        assert not typed.model_extra, (event.type, typed.model_extra)  # no field the models do not name
        seen.add(event.type)
    assert {"goal_added", "goal_updated", "message_added", "trace_status_changed", "trace_completed",
            "sub_trace_started", "sub_trace_completed"} <= seen
    if mode == "recursive":
        completed = [e.typed_payload() for e in events if e.type == "sub_trace_completed"]
        assert all(isinstance(c, SubTraceCompletedPayload) and c.verdict is not None for c in completed)
        assert any(isinstance(c, SubTraceCompletedPayload) and c.revision for c in completed)
    roots = [e.typed_payload() for e in events if e.type == "goal_added"]
    assert all(isinstance(g, GoalAddedPayload) for g in roots)


async def test_store_emitted_payloads_fit_their_models(store: BaseTraceStore, trace_id: str):
    await store.add_message(user(trace_id, goal="3"))
    await store.update_goal(trace_id, "3", status="completed", summary="done")
    await store.update_trace(trace_id, status="completed")
    for event in await store.get_events(trace_id):
        assert type(event.typed_payload()) is PAYLOAD_MODELS[event.type]


def test_a_recovered_message_added_payload_fits_its_model():
    from cyber_agent.trace.event_payloads import MessageAddedPayload
    from cyber_agent.trace.events import message_added_payload

    goal = Goal(id="1", description="d")
    text = message_added_payload(json.dumps(_message()), [goal], recovered=True)
    typed = MessageAddedPayload.model_validate_json(text)
    assert typed.recovered is True and typed.affected_goals[0].goal_id == "1"
