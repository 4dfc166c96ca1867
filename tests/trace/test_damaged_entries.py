"""A damaged or foreign entry of the store's directory is skipped and reported, never fatal to the others.

docs/trace.md, "Damaged entries": `list_traces` skips with a `DamagedEntryWarning`,
`list_traces_report` names every skipped entry, reads of healthy traces work, and a read of
the damaged trace itself raises `CorruptRecordError` naming the file.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from cyber_agent.errors import CorruptRecordError, InvalidIdError
from cyber_agent.trace import FileSystemTraceStore, Message, Trace
from cyber_agent.trace.store_listing import DamagedEntryWarning

CORRUPT, LINKED, FILE_ID, UNREADABLE = (f"0000000{i}-0000-4000-8000-000000000000" for i in range(1, 5))


async def _healthy(base: Path) -> str:
    store = FileSystemTraceStore(base)
    trace_id = await store.create_trace(Trace.create(task="healthy"))
    await store.add_message(Message(trace_id=trace_id, role="user", content="hi"))
    return trace_id


def _damage(base: Path, healthy: str, outside: Path) -> dict[str, str]:
    """Plant one entry of each kind; return {name: expected kind}."""
    (base / CORRUPT).mkdir()
    (base / CORRUPT / "meta.json").write_text('{"trace_id": ')
    outside.mkdir()
    os.symlink(outside, base / LINKED)
    (base / FILE_ID).write_text("not a directory")
    (base / UNREADABLE).mkdir()
    (base / UNREADABLE / "meta.json").mkdir()  # reading it fails in the OS, whoever the user is
    (base / "my notes").mkdir()
    return {CORRUPT: "corrupt", LINKED: "symlink", FILE_ID: "not_a_directory", UNREADABLE: "unreadable",
            "my notes": "foreign"}


@pytest.fixture
async def damaged(tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    base = tmp_path / "store"
    healthy = await _healthy(base)
    return base, healthy, _damage(base, healthy, tmp_path / "outside")


async def test_listing_skips_every_damaged_entry_and_reports_it(damaged):
    base, healthy, expected = damaged
    store = FileSystemTraceStore(base)
    report = await store.list_traces_report(limit=None)
    assert [t.trace_id for t in report.traces] == [healthy]
    assert {e.name: e.kind for e in report.errors} == expected
    corrupt = next(e for e in report.errors if e.name == CORRUPT)
    assert corrupt.path == str(base / CORRUPT / "meta.json") and corrupt.path in corrupt.detail
    with pytest.warns(DamagedEntryWarning) as caught:
        traces = await store.list_traces(limit=None)
    assert [t.trace_id for t in traces] == [healthy]
    # Foreign entries (a file or folder that is not a trace id) are reported, never warned about.
    warned = {e.name for e in caught[0].message.entries}  # type: ignore[union-attr]
    assert warned == {name for name, kind in expected.items() if kind != "foreign"}
    assert str(base / CORRUPT / "meta.json") in str(caught[0].message)


async def test_healthy_traces_stay_readable_and_writable_beside_damaged_ones(damaged):
    base, healthy, _expected = damaged
    store = FileSystemTraceStore(base)
    assert (await store.get_trace(healthy)).total_messages == 1
    assert [m.content for m in await store.get_main_path_messages(healthy)] == ["hi"]
    await store.add_message(Message(trace_id=healthy, role="assistant", content="still here"))
    assert [e.type for e in await store.get_events(healthy)] == ["message_added", "message_added"]
    with pytest.warns(DamagedEntryWarning):
        records = await store.read_records()
    assert [r.trace["trace_id"] for r in records] == [healthy] and len(records[0].messages) == 2
    assert await store.list_traces_report(parent_trace_id=healthy) is not None


@pytest.mark.parametrize("name", [CORRUPT, FILE_ID, UNREADABLE])
async def test_reading_the_damaged_trace_itself_names_the_file(damaged, name):
    base, _healthy_id, _expected = damaged
    with pytest.raises(CorruptRecordError) as raised:
        await FileSystemTraceStore(base).get_trace(name)
    assert raised.value.path == base / name / "meta.json" and str(base / name) in str(raised.value)


async def test_a_symlinked_trace_is_refused_by_id(damaged):
    base, _healthy_id, _expected = damaged
    with pytest.raises(InvalidIdError, match="outside the store"):
        await FileSystemTraceStore(base).get_trace(LINKED)


async def test_a_message_beyond_the_checkpoint_that_is_corrupt_is_reported_not_fatal(tmp_path):
    healthy = await _healthy(tmp_path)
    other = FileSystemTraceStore(tmp_path)
    broken = await other.create_trace(Trace.create(task="broken later"))
    (tmp_path / broken / "messages" / f"{broken}-0001.json").write_text("{")  # above total_messages = 0
    report = await FileSystemTraceStore(tmp_path).list_traces_report()
    assert [t.trace_id for t in report.traces] == [healthy]
    assert [(e.name, e.kind) for e in report.errors] == [(broken, "corrupt")]


async def test_a_clean_store_lists_without_a_warning(tmp_path):
    healthy = await _healthy(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [t.trace_id for t in await FileSystemTraceStore(tmp_path).list_traces()] == [healthy]
    assert (await FileSystemTraceStore(tmp_path).list_traces_report()).errors == []


async def test_a_file_kept_beside_the_traces_is_reported_but_never_warned_about(tmp_path: Path):
    import warnings

    base = tmp_path / "store"
    healthy = await _healthy(base)
    (base / "recording.jsonl").write_text("{}\n")
    store = FileSystemTraceStore(base)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [t.trace_id for t in await store.list_traces(limit=None)] == [healthy]
    assert [(e.name, e.kind) for e in (await store.list_traces_report(limit=None)).errors] == [("recording.jsonl", "foreign")]
