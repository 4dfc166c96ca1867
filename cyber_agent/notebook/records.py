"""Where the notebook helpers get their data: a store, a store directory or an export file.

Every helper reads through `read_records`, which asks the store itself
(`cyber_agent/trace/protocols.py:TraceStore.read_records`): one `TraceRecord` per trace of the
selected trees, parents first, as the JSON the store persisted. Frames, graphs, budgets and
exports are built from these records, so they agree whichever store the data came from, and
nothing here knows how any store lays out its records.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from cyber_agent.errors import ConfigurationError
from cyber_agent.trace.protocols import TraceReader
from cyber_agent.trace.records import TraceRecord, parse_time, select_trees
from cyber_agent.trace.sqlite_store import SQLiteTraceStore
from cyber_agent.trace.store import FileSystemTraceStore
from cyber_agent.trace.store_url import open_store

__all__ = ["StoreSource", "TraceRecord", "open_source", "parse_time", "read_records", "select_trees"]

StoreSource = TraceReader | str | os.PathLike[str]
"""A TraceStore (or any TraceReader), the directory of a FileSystemTraceStore, or an export file."""


def _is_sqlite(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(16) == b"SQLite format 3\x00"


def open_source(source: StoreSource) -> TraceReader:
    """Return the store behind `source`: a store as is, a store URL, a directory (file store), a
    SQLite database file, or an export file."""
    if isinstance(source, str) and ":" in source.split("/", 1)[0] and len(source.split(":", 1)[0]) > 1:
        return open_store(source, create=False)  # a store URL (file:, sqlite:///, memory:); a read creates nothing
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            return FileSystemTraceStore(path)
        if path.is_file():
            if _is_sqlite(path):
                return SQLiteTraceStore(path)
            from cyber_agent.notebook.export import load_export

            return load_export(path)
        raise ConfigurationError("source", f"{str(path)!r} is neither a trace store directory, a SQLite database, "
                                           "a store URL (file:, sqlite:///, memory:) nor an export file")
    return source


async def read_records(
    store: TraceReader,
    root_ids: Sequence[str] | None = None,
    *,
    messages: bool = True,
    events: bool = True,
) -> list[TraceRecord]:
    """Read the trees under `root_ids` (every trace when None) as records, parents first."""
    return await store.read_records(root_ids, messages=messages, events=events)
