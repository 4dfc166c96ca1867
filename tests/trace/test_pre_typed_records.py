"""Records written before `Message.metadata` was typed load unchanged, read typed, and continue.

The fixtures under tests/trace/data/pre_typed/ were written by the code of main before the change
(tests/trace/data/make_pre_typed_stores.py says how): a file store and a SQLite database holding
every metadata key the library wrote then. PostgreSQL gets the same records through its bulk
import (a database cannot be committed; the import writes each record's JSON as given). The
committed exports (data/exports/, tests/trace/data/) are checked message by message.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import STORE_FACTORIES

from cyber_agent.trace import FileSystemTraceStore, Message
from cyber_agent.trace.message_metadata import MessageMetadata
from cyber_agent.trace.sqlite_store import SQLiteTraceStore
from cyber_agent.trace.store_base import BaseTraceStore

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
FIXTURE = DATA / "pre_typed"
TRACE_ID = "0b7c1d2e-3f40-4a51-9b62-7c83d94e05f6"
EXPORTS = [*sorted((ROOT / "data" / "exports").glob("*.jsonl")), *sorted(DATA.glob("*.jsonl"))]


def _raw_messages() -> dict[int, dict]:
    """The messages as the old code wrote them (the file store's JSON files)."""
    folder = FIXTURE / "file" / TRACE_ID / "messages"
    return {int(p.stem.rsplit("-", 1)[1]): json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")}


async def _open(kind: str, tmp_path: Path) -> BaseTraceStore:
    if kind == "file":
        shutil.copytree(FIXTURE / "file", tmp_path / "file")
        return FileSystemTraceStore(tmp_path / "file")
    if kind == "sqlite":
        shutil.copy(FIXTURE / "runs.db", tmp_path / "runs.db")
        return SQLiteTraceStore(tmp_path / "runs.db")
    old = FileSystemTraceStore(FIXTURE / "file")  # read only: nothing is written to the fixture
    store = STORE_FACTORIES["postgres"](tmp_path / "pg")()
    await store.import_records(await old.read_records())
    return store


KINDS = ["file", "sqlite", *(["postgres"] if "postgres" in STORE_FACTORIES else [])]


def test_the_fixture_is_in_the_old_shape():
    raw = _raw_messages()
    assert len(raw) == 12
    assert raw[6]["metadata"] == {"is_error": True, "refused": "depth", "duration_ms": 0.1}
    assert raw[7]["metadata"]["payload"]["error"] is None  # the shape an old reader reads


@pytest.mark.parametrize("kind", KINDS)
async def test_an_old_store_reads_typed_and_unchanged(kind: str, tmp_path: Path):
    store = await _open(kind, tmp_path)
    messages = {m.sequence: m for m in await store.get_trace_messages(TRACE_ID)}
    for sequence, raw in _raw_messages().items():
        assert json.loads(messages[sequence].model_dump_json())["metadata"] == raw["metadata"], sequence
    meta = {sequence: m.metadata for sequence, m in messages.items()}
    assert meta[1] == MessageMetadata() and meta[1].is_error is None
    assert meta[2].model == "demo" and meta[2].cost_estimated and meta[2].usage_estimated and meta[2].http_retries == 2
    assert meta[3].is_error is False and meta[3].was_truncated and meta[3]["lines"] == 25
    assert meta[4].cost_unpriced and meta[4].usage_invalid == "stored 0 for prompt_tokens=-5"
    assert meta[5].is_error and meta[5]["exit_code"] == 1 and not meta[5].is_refusal
    assert meta[6].refusal_kind == "depth" and meta[6].duration_ms == 0.1
    assert meta[7].was_summarized and meta[7].payload is not None and meta[7].payload.original_bytes == 90000
    assert meta[7]["validation_metered"] is True and meta[7].get("url") == "https://example.org"
    assert meta[8].refusal_kind == "rejected" and meta[8].not_run == "cap"
    assert meta[9].execution_unknown and meta[10].protocol
    assert meta[11].compaction == "summary" and meta[11].tokens_after == 1200
    assert meta[12].source_ids == {"span_id": "ab12"} and meta[12].content_missing is False
    assert meta[12]["tags"] == ["mine"] and "refused_note" in meta[12] and meta[12]["refused_note"] is None


@pytest.mark.parametrize("kind", KINDS)
async def test_an_old_store_continues(kind: str, tmp_path: Path):
    store = await _open(kind, tmp_path)
    trace = await store.get_trace(TRACE_ID)
    assert trace is not None
    added = Message.create(trace_id=TRACE_ID, role="tool", tool_call_id="c9", tool_name="bash_command", content="ok",
                           parent_sequence=trace.head_sequence, metadata={"is_error": False, "exit_code": 0})
    await store.add_message(added)
    updated = await store.update_message(f"{TRACE_ID}-0007", description="a summarized page")
    assert updated.metadata.was_summarized and updated.description == "a summarized page"
    reopened = store if kind == "postgres" else await _reopen(kind, tmp_path)
    messages = {m.sequence: m for m in await reopened.get_trace_messages(TRACE_ID)}
    assert len(messages) == 13 and messages[13].metadata.is_error is False and messages[13].metadata["exit_code"] == 0
    assert json.loads(messages[7].model_dump_json())["metadata"] == _raw_messages()[7]["metadata"]
    assert messages[7].description == "a summarized page"
    if kind == "file":  # the rewritten record keeps the old shape on disk, key for key
        on_disk = json.loads((tmp_path / "file" / TRACE_ID / "messages" / f"{TRACE_ID}-0007.json").read_text())
        assert on_disk["metadata"] == _raw_messages()[7]["metadata"]


async def _reopen(kind: str, tmp_path: Path) -> BaseTraceStore:
    return FileSystemTraceStore(tmp_path / "file") if kind == "file" else SQLiteTraceStore(tmp_path / "runs.db")


@pytest.mark.parametrize("export", EXPORTS, ids=lambda p: p.name)
def test_every_committed_export_loads_with_its_metadata_unchanged(export: Path):
    count = 0
    for line in export.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for raw in record.get("messages") or []:
            message = Message.model_validate(raw)
            assert json.loads(message.model_dump_json())["metadata"] == raw["metadata"]
            assert message.metadata.is_error == raw["metadata"].get("is_error")
            count += 1
    assert count >= 40  # the smallest export holds 49 messages


@pytest.mark.parametrize(("old", "kind"), [({"refused": True}, "refused"), ({"refused": False, "rejected": True}, "rejected"),
                                           ({"refused": "tree budget"}, "tree budget"), ({}, None)])
def test_refusal_flags_of_every_version_read_the_same(old: dict, kind: str | None):
    from cyber_agent.trace.models import refusal_kind

    message = Message.model_validate({"trace_id": TRACE_ID, "role": "tool", "metadata": {"is_error": True, **old}})
    assert message.metadata.refusal_kind == refusal_kind(old) == kind


def test_a_null_metadata_loads_as_empty():
    message = Message.model_validate({"trace_id": TRACE_ID, "role": "user", "metadata": None})
    assert message.metadata == {} and json.loads(message.model_dump_json())["metadata"] == {}


def test_a_typed_key_with_a_wrong_type_names_the_key():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="metadata.is_error"):
        Message.create(trace_id=TRACE_ID, role="tool", metadata={"is_error": "perhaps"})


@pytest.mark.parametrize("kind", KINDS)
async def test_old_side_records_read_typed(kind: str, tmp_path: Path):
    store = await _open(kind, tmp_path)
    usage = await store.get_resource_usage(TRACE_ID)  # written before `unpriced_calls` existed
    assert usage is not None and (usage.agents, usage.llm_calls, usage.unpriced_calls, usage.cost_usd) == (2, 3, 0, 0.0012)
    approvals = await store.get_tool_approvals(TRACE_ID)
    assert approvals is not None and [b.batch_id for b in approvals.batches] == ["b1"]
    assert approvals.batches[0].calls[0].decision == "approve" and approvals.batches[0].status == "done"
    if kind != "postgres":  # an export (the import's source) carries no stop requests
        stop = (await store.get_stop_requests([TRACE_ID]))[TRACE_ID]
        assert (stop.reason, stop.subtree) == ("user pressed stop", True) and stop.requested_at is not None
    changed = await store.update_resource_usage(TRACE_ID, lambda u: u.model_copy(update={"llm_calls": u.llm_calls + 1}))
    assert changed is not None and changed.llm_calls == 4 and (await store.get_resource_usage(TRACE_ID)).llm_calls == 4


async def test_metadata_given_as_a_dict_is_typed_on_every_write_path():
    from cyber_agent.trace import InMemoryTraceStore, Trace

    store = InMemoryTraceStore()
    trace = Trace.create(task="t")
    await store.create_trace(trace)
    message = Message.create(trace_id=trace.trace_id, role="tool", content="x", metadata={"is_error": True, "mine": 1})
    await store.add_message(message)
    updated = await store.update_message(message.message_id, metadata={"truncated": True, "refused": True})
    assert isinstance(updated.metadata, MessageMetadata) and updated.metadata.refusal_kind == "refused"
    assert updated.metadata.was_truncated and "mine" not in updated.metadata  # a whole replace, as before
    stored = await store.get_message(message.message_id)
    assert stored is not None and stored.metadata == {"truncated": True, "refused": "refused"}
