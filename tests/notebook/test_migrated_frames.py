"""A SQLite store written by an older schema (version 3, tests/trace/data/pre_typed/runs.db) opens, takes the
columnar indexes (version 4, `cyber_agent/trace/sqlite_schema.py:_V4`) and gives the records path's frames."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

from nb_helpers import assert_frames_equal
from cyber_agent.notebook import to_frames
from cyber_agent.notebook.frames import frames_from_records
from cyber_agent.trace import SQLiteTraceStore

FIXTURE = Path(__file__).resolve().parents[1] / "trace" / "data" / "pre_typed" / "runs.db"


def test_an_old_store_s_frames_equal_the_records_path_after_its_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    shutil.copy(FIXTURE, path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT max(version) FROM schema_versions").fetchone() == (3,)
    store = SQLiteTraceStore(path)
    frames = to_frames(store)
    assert_frames_equal(frames, frames_from_records(asyncio.run(store.read_records(None)), origin=f"sqlite:///{path}"))
    assert len(frames.messages) == 12 and frames.messages.refused.notna().sum() >= 2
