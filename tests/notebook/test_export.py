"""Exports: one portable file; loading runs nothing; round trip, forward compatibility, damage."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest

from cyber_agent.errors import CorruptRecordError, StoreError
from cyber_agent.notebook import EXPORT_FORMAT, ReadOnlyTraceStore, export_traces, load_export, to_frames
from cyber_agent.trace import Message, TraceStore

from nb_helpers import assert_frames_equal


def test_round_trip_equals_the_live_file_store(demo_store, demo_root, tmp_path):
    path = export_traces(demo_store, [demo_root], tmp_path / "demo.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    header, end = json.loads(lines[0]), json.loads(lines[-1])
    assert header["format"] == EXPORT_FORMAT and header["version"] == 1 and header["roots"] == [demo_root]
    assert end == {"kind": "end", "traces": 5} and len(lines) == 7
    loaded = load_export(path)
    assert isinstance(loaded, ReadOnlyTraceStore)
    assert_frames_equal(to_frames(loaded), to_frames(demo_store, demo_root))
    assert_frames_equal(to_frames(path), to_frames(demo_store, demo_root))


def test_round_trip_from_an_in_memory_store_and_gzip(recursive_store, tmp_path):
    store, root = recursive_store
    path = export_traces(store, None, tmp_path / "tree.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        assert json.loads(handle.readline())["format"] == EXPORT_FORMAT
    assert_frames_equal(to_frames(load_export(path)), to_frames(store))


def test_the_loaded_store_answers_the_protocol_and_refuses_writes(demo_store, demo_root, tmp_path):
    loaded = load_export(export_traces(demo_store, demo_root, tmp_path / "x.jsonl"))

    async def check() -> None:
        trace = await loaded.get_trace(demo_root)
        original = await demo_store.get_trace(demo_root)
        assert trace == original
        path = await loaded.get_main_path_messages(demo_root, trace.head_sequence)
        assert [m.sequence for m in path] == list(range(1, trace.total_messages + 1))
        assert await loaded.get_main_path_messages(demo_root) == path
        assert isinstance(loaded, TraceStore)
        assert await loaded.get_goal_tree(demo_root) == await demo_store.get_goal_tree(demo_root)
        assert len(await loaded.list_traces(parent_trace_id=demo_root, limit=None)) == 4
        assert await loaded.get_events(demo_root, 3) == (await demo_store.get_events(demo_root))[3:]
        with pytest.raises(StoreError, match="read-only"):
            await loaded.add_message(Message.create(trace_id=demo_root, role="user", content="more"))
        with pytest.raises(StoreError, match="read-only"):
            await loaded.update_trace(demo_root, status="running")

    asyncio.run(check())


def _future_export(path, source) -> None:
    """Rewrite an export as a newer version would: new keys everywhere, a new line kind, a new event type."""
    lines = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    lines[0].update(version=7, producer={"name": "cyber_agent", "version": "9.0"})
    for item in lines[1:-1]:
        item["lineage_hash"] = "abc"
        item["trace"]["sandbox"] = {"kind": "vm"}
        item["goal_tree"]["layout"] = "radial"
        item["goal_tree"]["goals"][0]["priority"] = 3
        for message in item["messages"]:
            message["reasoning"] = "hidden"
        item["events"].append({"event_id": 999, "trace_id": item["trace"]["trace_id"], "type": "telepathy",
                               "payload": {"x": 1}, "created_at": "2030-01-01T00:00:00Z", "shard": 2})
    lines.insert(2, {"kind": "annotation", "text": "reviewed by a human"})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_exports_from_a_future_version_still_load(demo_store, demo_root, tmp_path):
    current = export_traces(demo_store, demo_root, tmp_path / "now.jsonl")
    future = tmp_path / "future.jsonl"
    _future_export(future, current)
    frames, expected = to_frames(load_export(future)), to_frames(current)
    for name in ("traces", "messages", "tool_calls", "goals", "usage"):
        # `provenance` names each export file: the rest is the same data
        assert getattr(frames, name).drop(columns=["context", "provenance"], errors="ignore").equals(
            getattr(expected, name).drop(columns=["context", "provenance"], errors="ignore")), name
    assert set(frames.events["type"]) - set(expected.events["type"]) == {"telepathy"}
    events = asyncio.run(load_export(future).get_events(demo_root))
    assert events[-1].type == "telepathy"


def test_a_truncated_export_names_the_file(demo_store, demo_root, tmp_path):
    data = export_traces(demo_store, demo_root, tmp_path / "full.jsonl").read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptRecordError, match="truncated") as info:
        load_export(cut)
    assert "cut.jsonl" in str(info.value)
    no_end = tmp_path / "no-end.jsonl"
    no_end.write_bytes(b"".join(data.splitlines(keepends=True)[:-1]))
    with pytest.raises(CorruptRecordError, match=r"no-end\.jsonl.*truncated"):
        load_export(no_end)
    gz = export_traces(demo_store, demo_root, tmp_path / "full.jsonl.gz").read_bytes()
    (tmp_path / "cut.jsonl.gz").write_bytes(gz[: len(gz) // 2])
    with pytest.raises(CorruptRecordError, match=r"cut\.jsonl\.gz"):
        load_export(tmp_path / "cut.jsonl.gz")


def test_damaged_or_foreign_files_are_refused_with_the_file_named(tmp_path, demo_store, demo_root):
    foreign = tmp_path / "other.jsonl"
    foreign.write_text('{"hello": "world"}\n', encoding="utf-8")
    with pytest.raises(CorruptRecordError, match=r"other\.jsonl.*not a cyber_agent trace export"):
        load_export(foreign)
    text = export_traces(demo_store, demo_root, tmp_path / "ok.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*lines[:2], lines[2][: len(lines[2]) // 2], *lines[3:]]) + "\n", encoding="utf-8")
    with pytest.raises(CorruptRecordError, match=r"broken\.jsonl.*line 3"):
        load_export(broken)
    record = json.loads(lines[1])
    record["messages"][0]["role"] = 17
    invalid = tmp_path / "invalid.jsonl"
    invalid.write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n", encoding="utf-8")
    with pytest.raises(CorruptRecordError, match=r"invalid\.jsonl.*messages"):
        load_export(invalid)


def test_a_missing_export_path_says_where_it_looked_and_what_to_do(tmp_path, monkeypatch):
    import pytest

    from cyber_agent.notebook import load_export

    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as caught:
        load_export("data/exports/legacy_demo.jsonl")
    message = str(caught.value)
    assert "'data/exports/legacy_demo.jsonl'" in message and str(tmp_path) in message
    assert "export_traces(store, root_id, path)" in message and "'../data/...'" in message
