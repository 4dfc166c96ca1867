"""Store fixtures: every TraceStore implementation the conformance suite runs against.

A new store (SQLite, PostgreSQL, ...) joins the suite by adding one factory to STORE_FACTORIES.
A factory gets a private directory and returns a store; calling it again on the same directory
must give a fresh instance that reads what the first one wrote (in-memory stores return the
same instance, which is all "reopening" can mean for them).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cyber_agent.trace import FileSystemTraceStore, Goal, InMemoryTraceStore, Trace
from cyber_agent.trace.sqlite_store import SQLiteTraceStore
from cyber_agent.trace.store_base import BaseTraceStore
from tests import pg_server

StoreFactory = Callable[[], BaseTraceStore]


def _memory(_directory: Path) -> StoreFactory:
    store = InMemoryTraceStore()
    return lambda: store


def _file(directory: Path) -> StoreFactory:
    return lambda: FileSystemTraceStore(directory)


def _file_eager(directory: Path) -> StoreFactory:
    # Checkpoints meta.json and goal.json on every add: the layout readers of old files expect.
    return lambda: FileSystemTraceStore(directory, checkpoint_every=1, checkpoint_interval=0)


def _sqlite(directory: Path) -> StoreFactory:
    return lambda: SQLiteTraceStore(directory / "runs.db")


def _postgres(directory: Path) -> StoreFactory:
    # One schema per test (named after its directory): the session's server, tests independent.
    from cyber_agent.trace.postgres_store import PostgresTraceStore

    url = pg_server.server().schema_url(pg_server.schema_for(str(directory)))
    return lambda: PostgresTraceStore(url)


STORE_FACTORIES: dict[str, Callable[[Path], StoreFactory]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "file": _file,
    "file-eager": _file_eager,
}
if pg_server.available() or pg_server.required():  # CI requires it: a missing server fails, never skips
    STORE_FACTORIES["postgres"] = _postgres


@pytest.fixture(params=sorted(STORE_FACTORIES))
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Return a function that opens (or reopens) the store under test."""
    return STORE_FACTORIES[request.param](tmp_path / "traces")


@pytest.fixture
def store(open_store: StoreFactory) -> BaseTraceStore:
    """A fresh store of each implementation."""
    return open_store()


@pytest.fixture
async def trace_id(store: BaseTraceStore) -> str:
    """A root trace with goals 1 <- 2 <- 3 (3 is the deepest) and goal 4 beside 1."""
    trace = Trace.create(task="conformance")
    await store.create_trace(trace)
    for goal in (Goal(id="1", description="outer"), Goal(id="2", description="middle", parent_id="1"),
                 Goal(id="3", description="inner", parent_id="2"), Goal(id="4", description="other")):
        await store.add_goal(trace.trace_id, goal)
    return trace.trace_id
