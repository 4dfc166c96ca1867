"""Typed runner state on the trace (`trace/state.py`): old records load, user context stays the user's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cyber_agent.errors import InvalidUpdateError
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore, Trace
from cyber_agent.trace.state import RUNNER_OWNED_CONTEXT

# A recursive demo exported before the state was typed, kept here: data/exports/ holds samples that
# data/make_exports.py rewrites in the current format.
EXPORT = Path(__file__).resolve().parent / "data" / "recursive_demo_untyped.jsonl"


def _old_records() -> list[dict]:
    """Trace records of a recursive demo exported before the state was typed (all in `context`)."""
    lines = [json.loads(line) for line in EXPORT.read_text(encoding="utf-8").splitlines()[1:]]
    return [line["trace"] for line in lines if line.get("kind") == "trace"]


def test_the_committed_export_is_in_the_old_format():
    records = _old_records()
    assert len(records) == 16 and all(not RUNNER_OWNED_CONTEXT.isdisjoint(r["context"]) for r in records)


def test_an_old_record_loads_with_every_runner_key_in_its_typed_field():
    records = {r["trace_id"]: r for r in _old_records()}
    for trace_id, raw in records.items():
        old = raw["context"]
        trace = Trace.model_validate(raw)
        assert trace.context == {k: v for k, v in old.items() if k not in RUNNER_OWNED_CONTEXT}
        assert trace.lineage.mode == old["agent_mode"] and trace.lineage.depth == old["agent_depth"]
        assert trace.lineage.root_trace_id == old["root_trace_id"]
        assert trace.lineage.created_by_tool == old.get("created_by_tool")
        assert trace.lineage.child_count == old.get("child_count", 0)
        assert trace.run_config is not None and trace.run_config.model_dump() == {**old["run_config_snapshot"], "legacy_inferred": False}
        protocol = old.get("task_protocol") or {}
        assert [v.model_dump(mode="json") for v in trace.protocol.validations] == protocol.get("validations", [])
        assert trace.protocol.pending_reviews == protocol.get("pending_reviews", [])
        if "report" in protocol:
            assert trace.protocol.report is not None
            assert trace.protocol.report.model_dump(mode="json") == protocol["report"]
        if old.get("validation_scope"):
            assert trace.protocol.validator is not None and trace.protocol.validator.scope == old["validation_scope"]
            assert trace.protocol.validator.target_trace_id == old["validation_target"]
        if "root_task_anchor" in old:
            setup = trace.root_setup
            assert setup is not None and setup.anchor is not None
            assert setup.anchor.model_dump() == old["root_task_anchor"]
            assert setup.anchor.content_hash() == setup.anchor_hash == old["root_task_anchor_hash"]
            assert setup.resource_budget is not None and setup.resource_budget.model_dump() == old["resource_budget"]
        else:
            assert trace.root_setup is None


def test_a_migrated_record_round_trips_and_is_written_in_the_typed_shape():
    raw = _old_records()[0]
    trace = Trace.model_validate(raw)
    again = Trace.model_validate_json(trace.model_dump_json())
    assert again == trace
    assert RUNNER_OWNED_CONTEXT.isdisjoint(json.loads(trace.model_dump_json())["context"])


async def test_an_old_record_on_disk_loads_and_is_rewritten_typed_on_its_next_update(tmp_path):
    counted = ("total_messages", "total_prompt_tokens", "total_completion_tokens", "total_tokens", "head_sequence")
    raw = {**_old_records()[0], **{k: 0 for k in counted}, "current_goal_id": None}
    store = FileSystemTraceStore(tmp_path)
    await store.create_trace(Trace.model_validate(raw))
    # Put the old JSON back on disk, as a store of the previous version left it.
    meta = next(tmp_path.rglob("meta.json"))
    meta.write_text(json.dumps(raw), encoding="utf-8")
    fresh = FileSystemTraceStore(tmp_path)
    loaded = await fresh.get_trace(raw["trace_id"])
    assert loaded is not None and loaded.lineage.mode == "recursive" and loaded.root_setup is not None
    await fresh.update_trace(raw["trace_id"], name="renamed")
    written = json.loads(meta.read_text(encoding="utf-8"))
    assert written["lineage"]["mode"] == "recursive" and RUNNER_OWNED_CONTEXT.isdisjoint(written["context"])


@pytest.mark.parametrize("key", sorted(RUNNER_OWNED_CONTEXT))
async def test_an_update_cannot_smuggle_a_runner_key_into_context(key):
    store = InMemoryTraceStore()
    trace = Trace.create(task="t", context={"team": "ops"})
    await store.create_trace(trace)
    with pytest.raises(InvalidUpdateError, match=rf"\['{key}'\] are runner-owned.*trace/state.py"):
        await store.update_trace(trace.trace_id, context={"team": "ops", key: 1})
    assert (await store.get_trace(trace.trace_id)).context == {"team": "ops"}


def test_user_keys_stay_in_context_and_the_seed_create_call_still_works():
    trace = Trace.create(mode="agent", task="t", context={"team": "ops", "nested": {"a": 1}})
    assert trace.context == {"team": "ops", "nested": {"a": 1}}
    assert trace.lineage.mode == "legacy" and trace.root_id == trace.trace_id and not trace.is_validator
