"""SQLite faults a user meets (issue 29): a damaged file, a database another process locks, and a
read command pointed at a file that does not exist. Each error names the file and what is wrong."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cyber_agent.cli import main
from cyber_agent.errors import DatabaseLockedError, StoreError
from cyber_agent.trace import Message, Trace, open_store
from cyber_agent.trace.sqlite_store import SQLiteTraceStore


def _made(path: Path) -> str:
    store = SQLiteTraceStore(path)
    trace = Trace.create(task="kept")
    asyncio.run(store.create_trace(trace))
    asyncio.run(store.add_message(Message.create(trace_id=trace.trace_id, role="user", content="hello " * 2000)))
    return trace.trace_id


@pytest.mark.parametrize("damage", ["garbage", "truncated", "header"])
def test_a_damaged_database_file_is_named_with_what_is_wrong(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "runs.db"
    if damage == "garbage":
        path.write_bytes(b"this is not a database at all\n" * 100)
    else:
        _made(path)
        for extra in tmp_path.glob("runs.db-*"):
            extra.unlink()
        data = path.read_bytes()
        path.write_bytes(data[:len(data) // 3] if damage == "truncated" else b"\x00" * 100 + data[100:])
    with pytest.raises(StoreError) as info:
        store = SQLiteTraceStore(path)
        asyncio.run(store.list_traces(limit=None))
    text = str(info.value)
    assert str(path) in text
    assert "damaged" in text or "malformed" in text or "not a usable SQLite database" in text, text


_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
conn.execute("BEGIN EXCLUSIVE")  # WAL: the write lock, held until told
conn.execute("INSERT INTO side_records (trace_id, name, data) VALUES ('x', 'holder', '{}')")
print("locked", flush=True)
sys.stdin.readline()
conn.rollback()
"""


def test_a_database_locked_by_another_process_is_named_and_busy_timeout_bounds_the_wait(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    trace_id = _made(path)
    store = open_store(f"sqlite:///{path}?busy_timeout=1")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        started = time.monotonic()
        with pytest.raises(DatabaseLockedError) as info:
            asyncio.run(store.add_message(Message.create(trace_id=trace_id, role="user", content="blocked")))
        took = time.monotonic() - started
        with pytest.raises(DatabaseLockedError) as opening:
            SQLiteTraceStore(path, busy_timeout=1)
    finally:
        holder.communicate("\n", timeout=30)
    for error in (info.value, opening.value):
        assert f"the SQLite database {path} is locked by another process" in str(error)
        assert "busy_timeout=1 s" in str(error) and "<schema>" not in str(error)
    assert took < 4, took  # one deadline for the whole write, not five waits of busy_timeout each
    asyncio.run(store.add_message(Message.create(trace_id=trace_id, role="user", content="after")))  # free again


def test_show_and_list_on_a_missing_sqlite_file_create_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "missing.db"
    assert main(["--store", f"sqlite:///{path}", "show", "some-trace"]) == 2
    assert f"no SQLite database at {path}" in capsys.readouterr().err
    assert main(["--store", f"sqlite:///{path}", "list"]) == 2
    assert f"no SQLite database at {path}" in capsys.readouterr().err
    assert not path.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(StoreError, match="a read never creates one"):
        open_store(path, create=False)


def test_a_lock_held_for_a_moment_is_retried_at_once_before_any_sleep(tmp_path, monkeypatch):
    """`_polled` (private: the wait is invisible through the API but for its speed): a lock another process's write
    holds for ~0.1 ms is retried without sleeping for the first `_SPIN_S` — a sleep blocks a sweep worker's
    event loop for its whole timer slack — and only a longer wait falls back to the doubling pauses."""
    from types import SimpleNamespace

    from cyber_agent.trace import sqlite_store

    store = SQLiteTraceStore(tmp_path / "runs.db")
    clock, sleeps = [1000.0], []
    monkeypatch.setattr(sqlite_store, "time", SimpleNamespace(monotonic=lambda: clock[0], sleep=sleeps.append))
    monkeypatch.setattr(sqlite_store, "_yield_cpu", lambda: None)

    def held_for(tries: int, step: float):
        seen = [0]

        def statement() -> str:
            seen[0] += 1
            clock[0] += step
            if seen[0] <= tries:
                raise sqlite3.OperationalError("database is locked")
            return "written"
        return statement, seen

    statement, seen = held_for(5, 0.00002)  # released 0.1 ms later: inside the spin
    assert store._polled(statement, None) == "written" and seen[0] == 6 and sleeps == []
    statement, seen = held_for(5, 0.0002)  # past the spin: the pauses start at the first one
    assert store._polled(statement, None) == "written"
    assert sleeps and sleeps[0] == sqlite_store._FIRST_PAUSE_S
