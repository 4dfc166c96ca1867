"""FileSystemTraceStore specifics: layout, corrupt files, torn events, read and write costs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from store_helpers import add_chain, assistant, user

from cyber_agent.errors import CorruptRecordError, InvalidIdError
from cyber_agent.trace import FileSystemTraceStore, Goal, GoalTree, Trace


async def _trace(store: FileSystemTraceStore) -> str:
    trace = Trace.create(task="file store")
    await store.create_trace(trace)
    await store.add_goal(trace.trace_id, Goal(id="1", description="outer"))
    await store.add_goal(trace.trace_id, Goal(id="2", description="inner", parent_id="1"))
    return trace.trace_id


def _json_files(directory: Path) -> list[Path]:
    return sorted(directory.rglob("*.json"))


async def test_layout_matches_the_seed(tmp_path):
    store = FileSystemTraceStore(tmp_path)
    trace_id = await _trace(store)
    await add_chain(store, trace_id, 3, goal="2")
    await store.replace_resource_usage(trace_id, {"llm_calls": 1})
    await store.replace_tool_approvals(trace_id, {"batches": []})
    await store.flush()
    directory = tmp_path / trace_id
    assert sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*")) == [
        ".writer.lock",  # held during each write (docs/trace.md, "Several writers")
        "events.jsonl", "goal.json", "messages", *(f"messages/{trace_id}-{i:04d}.json" for i in (1, 2, 3)),
        "meta.json", "resource_usage.json", "tool_approvals.json",
    ]
    for path in _json_files(directory):
        json.loads(path.read_text())
    assert json.loads((directory / "meta.json").read_text())["total_messages"] == 3
    assert all(json.loads(line) for line in (directory / "events.jsonl").read_text().splitlines())


async def test_store_parameters_are_checked(tmp_path):
    for bad in ({"checkpoint_every": 0}, {"checkpoint_interval": -1}):
        with pytest.raises(ValueError):
            FileSystemTraceStore(tmp_path, **bad)


async def test_durable_mode_writes_the_same_records(tmp_path):
    store = FileSystemTraceStore(tmp_path, durable=True)
    trace_id = await _trace(store)
    await add_chain(store, trace_id, 2, goal="2")
    reader = FileSystemTraceStore(tmp_path)
    assert (await reader.get_trace(trace_id)).total_messages == 2
    assert [e.type for e in await reader.get_events(trace_id)][-2:] == ["message_added", "message_added"]


FAILING_WRITES = {
    "update_trace": lambda s, t: s.update_trace(t, status="failed"),
    "add_goal": lambda s, t: s.add_goal(t, Goal(id="3", description="new")),
    "update_goal": lambda s, t: s.update_goal(t, "2", status="completed"),
    "update_goal_tree": lambda s, t: s.update_goal_tree(t, GoalTree(mission="replaced")),
}


@pytest.mark.parametrize("operation", sorted(FAILING_WRITES))
async def test_a_failed_write_changes_nothing_on_disk_or_in_the_writer(tmp_path, monkeypatch, operation):
    store = FileSystemTraceStore(tmp_path)
    trace_id = await _trace(store)
    before = {p: p.read_bytes() for p in _json_files(tmp_path)}
    views = (await store.get_trace(trace_id), await store.get_goal_tree(trace_id))

    def full_disk(*_args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("os.replace", full_disk)
    with pytest.raises(OSError):
        await FAILING_WRITES[operation](store, trace_id)
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in _json_files(tmp_path)} == before
    assert not list(tmp_path.rglob("*.tmp"))
    assert (await store.get_trace(trace_id)).model_dump() == views[0].model_dump()
    assert (await store.get_goal_tree(trace_id)).model_dump() == views[1].model_dump()


# ---- corrupt records --------------------------------------------------------------------
CORRUPTIONS = {"bad json": b'{"trace_id": ', "wrong shape": b'["a", "list"]', "bad utf-8": b'{"x": "\xff\xfe"}'}


@pytest.mark.parametrize("content", list(CORRUPTIONS.values()), ids=list(CORRUPTIONS))
async def test_corrupt_meta_raises_naming_its_path(tmp_path, content):
    trace_id = await _trace(FileSystemTraceStore(tmp_path))
    meta = tmp_path / trace_id / "meta.json"
    meta.write_bytes(content)
    reader = FileSystemTraceStore(tmp_path)
    for call in (reader.get_trace(trace_id), reader.update_trace(trace_id, status="failed")):
        with pytest.raises(CorruptRecordError) as info:
            await call
        assert info.value.path == meta and str(meta) in str(info.value)
    report = await reader.list_traces_report()  # a listing skips it and names the file
    assert report.traces == [] and [(e.name, e.path, e.kind) for e in report.errors] == [(trace_id, str(meta), "corrupt")]


async def test_meta_of_another_trace_is_corrupt(tmp_path):
    trace_id = await _trace(FileSystemTraceStore(tmp_path))
    other = Trace.create(task="x")
    (tmp_path / trace_id / "meta.json").write_text(other.model_dump_json())
    with pytest.raises(CorruptRecordError):
        await FileSystemTraceStore(tmp_path).get_trace(trace_id)


@pytest.mark.parametrize("content", list(CORRUPTIONS.values()), ids=list(CORRUPTIONS))
@pytest.mark.parametrize("record", ["goal.json", "message", "resource_usage.json", "tool_approvals.json"])
async def test_corrupt_records_raise_naming_their_path(tmp_path, record, content):
    writer = FileSystemTraceStore(tmp_path)
    trace_id = await _trace(writer)
    await add_chain(writer, trace_id, 1)
    await writer.replace_resource_usage(trace_id, {})
    await writer.replace_tool_approvals(trace_id, {})
    name = f"messages/{trace_id}-0001.json" if record == "message" else record
    path = tmp_path / trace_id / name
    path.write_bytes(content)
    reader = FileSystemTraceStore(tmp_path)
    read = {
        "goal.json": lambda: reader.get_goal_tree(trace_id),
        "message": lambda: reader.get_message(f"{trace_id}-0001"),
        "resource_usage.json": lambda: reader.get_resource_usage(trace_id),
        "tool_approvals.json": lambda: reader.get_tool_approvals(trace_id),
    }[record]
    with pytest.raises(CorruptRecordError) as info:
        await read()
    assert info.value.path == path


async def test_a_message_file_holding_another_message_is_corrupt(tmp_path):
    store = FileSystemTraceStore(tmp_path)
    trace_id = await _trace(store)
    await add_chain(store, trace_id, 2)
    messages = tmp_path / trace_id / "messages"
    (messages / f"{trace_id}-0002.json").write_bytes((messages / f"{trace_id}-0001.json").read_bytes())
    with pytest.raises(CorruptRecordError):
        await FileSystemTraceStore(tmp_path).get_main_path_messages(trace_id, 2)


async def test_a_corrupt_middle_event_line_raises(tmp_path):
    store = FileSystemTraceStore(tmp_path)
    trace_id = await _trace(store)
    events = tmp_path / trace_id / "events.jsonl"
    lines = events.read_text().splitlines()
    events.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    with pytest.raises(CorruptRecordError, match="line 2") as info:
        await FileSystemTraceStore(tmp_path).get_events(trace_id)
    assert info.value.path == events


async def test_a_torn_last_event_line_is_ignored_and_cut_by_the_next_append(tmp_path):
    trace_id = await _trace(FileSystemTraceStore(tmp_path))
    events = tmp_path / trace_id / "events.jsonl"
    with events.open("a") as handle:
        handle.write('{"event_id": 3, "trace_id": "x", "type": "prog')
    reader = FileSystemTraceStore(tmp_path)
    assert [e.event_id for e in await reader.get_events(trace_id)] == [1, 2]
    assert await reader.append_event(trace_id, "progress", {"n": 1}) == 3
    text = events.read_text()
    assert text.endswith("\n") and "prog\n" not in text and '"prog{' not in text
    assert [json.loads(line)["event_id"] for line in text.splitlines()] == [1, 2, 3]


# ---- costs ------------------------------------------------------------------------------
async def test_main_path_reads_only_the_path(tmp_path, monkeypatch):
    """Counts calls of the private `_read_message` and opened files: O(path), not O(all messages)."""
    writer = FileSystemTraceStore(tmp_path)
    trace_id = await _trace(writer)
    await add_chain(writer, trace_id, 150)
    await writer.update_trace(trace_id, head_sequence=4)
    await add_chain(writer, trace_id, 3, parent=4)  # main path: 1..4, 151..153
    reader = FileSystemTraceStore(tmp_path)
    reads: list[int] = []
    original = reader._read_message
    monkeypatch.setattr(reader, "_read_message", lambda t, seq: reads.append(seq) or original(t, seq))
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k))
    path = await reader.get_main_path_messages(trace_id, 153)
    assert [m.sequence for m in path] == [1, 2, 3, 4, 151, 152, 153]
    assert sorted(reads) == [1, 2, 3, 4, 151, 152, 153]
    assert len([p for p in opened if "/messages/" in p]) == 7


async def test_adding_a_message_rewrites_nothing_that_grows_with_the_trace(tmp_path, monkeypatch):
    """Wraps the private `_write_atomic`: the bytes written per add must not grow with the message count."""
    store = FileSystemTraceStore(tmp_path)
    trace_id = await _trace(store)
    written: list[tuple[str, int]] = []
    original = store._write_atomic
    monkeypatch.setattr(store, "_write_atomic",
                        lambda directory, name, data: written.append((name, len(data))) or original(directory, name, data))

    async def window(parent: int | None) -> tuple[int, dict[str, int]]:
        written.clear()
        for _ in range(100):
            message = assistant(trace_id, parent=parent, goal="2")
            await store.add_message(message)
            parent = message.sequence
        largest: dict[str, int] = {}
        for name, size in written:
            kind = "message" if name.startswith(trace_id) else name
            largest[kind] = max(largest.get(kind, 0), size)
        return sum(size for _, size in written), largest

    early_total, early_largest = await window(None)
    for _ in range(6):  # grow the trace to 700 messages
        await window((await store.get_trace(trace_id)).head_sequence)
    late_total, late_largest = await window((await store.get_trace(trace_id)).head_sequence)
    assert set(late_largest) <= {"message", "meta.json", "goal.json"}
    for kind, size in late_largest.items():
        assert size <= early_largest[kind] + 64, kind
    # A window may hold one checkpoint more than another; nothing else may differ.
    assert late_total <= early_total + late_largest.get("meta.json", 0) + late_largest.get("goal.json", 0) + 100 * 16


async def test_polling_for_new_events_reads_only_the_end_of_the_log(tmp_path, monkeypatch):
    """Counts calls of the private `_parse_event`: a watcher's poll must not re-read the whole log."""
    import cyber_agent.trace.store as store_module

    store = FileSystemTraceStore(tmp_path)
    trace_id = await _trace(store)
    for step in range(300):
        await store.append_event(trace_id, "progress", {"step": step})
    parsed: list[bytes] = []
    original = store_module._parse_event
    monkeypatch.setattr(store_module, "_parse_event", lambda *a: parsed.append(a[1]) or original(*a))
    assert [e.event_id for e in await store.get_events(trace_id, since_event_id=300)] == [301, 302]
    assert len(parsed) == 3


async def test_event_log_is_appended_not_rewritten(tmp_path):
    store = FileSystemTraceStore(tmp_path)
    trace_id = await _trace(store)
    events = tmp_path / trace_id / "events.jsonl"
    await add_chain(store, trace_id, 5)
    inode, prefix = events.stat().st_ino, events.read_bytes()
    await add_chain(store, trace_id, 5, parent=5)
    assert events.stat().st_ino == inode and events.read_bytes().startswith(prefix)


# ---- checkpoints and recovery -------------------------------------------------------------
async def test_readers_count_messages_written_after_the_last_checkpoint(tmp_path):
    writer = FileSystemTraceStore(tmp_path, checkpoint_every=1000, checkpoint_interval=1000)
    trace_id = await _trace(writer)
    await add_chain(writer, trace_id, 5, goal="2")
    assert json.loads((tmp_path / trace_id / "meta.json").read_text())["total_messages"] == 0
    reader = FileSystemTraceStore(tmp_path)
    trace = await reader.get_trace(trace_id)
    assert (trace.total_messages, trace.head_sequence) == (5, 5)
    assert (await reader.get_goal_tree(trace_id)).find("1").cumulative_stats.message_count == 5
    assert [t.total_messages for t in await reader.list_traces()] == [5]
    await writer.flush()
    assert json.loads((tmp_path / trace_id / "meta.json").read_text())["total_messages"] == 5


async def test_a_new_writer_adopts_orphans_once_and_announces_only_unannounced_ones(tmp_path):
    """Simulates a kill after message files were written: drops the writer without a checkpoint."""
    writer = FileSystemTraceStore(tmp_path, checkpoint_every=1000, checkpoint_interval=1000)
    trace_id = await _trace(writer)
    await add_chain(writer, trace_id, 4, goal="2")
    events = tmp_path / trace_id / "events.jsonl"
    lines = events.read_text().splitlines(keepends=True)
    events.write_text("".join(lines[:-1]) + lines[-1][:25])  # the 4th message's event was torn
    (tmp_path / trace_id / "messages" / ".stale.json.123-1.tmp").write_text('{"half')
    successor = FileSystemTraceStore(tmp_path)
    message = user(trace_id, parent=4, goal="2")
    await successor.add_message(message)
    assert message.sequence == 5
    added = [e for e in await successor.get_events(trace_id) if e.type == "message_added"]
    assert [e.payload["message"]["sequence"] for e in added] == [1, 2, 3, 4, 5]
    assert [e.payload.get("recovered", False) for e in added] == [False, False, False, True, False]
    assert (await successor.get_goal_tree(trace_id)).find("2").self_stats.message_count == 5
    assert not list((tmp_path / trace_id).rglob("*.tmp"))
    third = FileSystemTraceStore(tmp_path)
    await third.append_event(trace_id, "progress", {})
    assert sum(e.type == "message_added" for e in await third.get_events(trace_id)) == 5


async def test_unknown_directories_are_not_traces(tmp_path):
    store = FileSystemTraceStore(tmp_path)
    trace_id = await _trace(store)
    (tmp_path / "not a trace").mkdir()
    (tmp_path / "half-created").mkdir()  # created, killed before meta.json
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # foreign: reported, not warned about; half-created: not damage
        assert [t.trace_id for t in await store.list_traces()] == [trace_id]
    assert [(e.name, e.kind) for e in (await store.list_traces_report()).errors] == [("not a trace", "foreign")]
    with pytest.raises(InvalidIdError):
        await store.get_trace("not a trace")
    assert await store.get_trace("half-created") is None
