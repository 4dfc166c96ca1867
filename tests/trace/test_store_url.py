"""Store selection by URL (`cyber_agent/trace/store_url.py:open_store`): every spelling, every refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from cyber_agent.errors import ConfigurationError, StoreError
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore, SQLiteTraceStore, Trace, open_store
from cyber_agent.trace.store_url import STORE_ENV, store_url_of


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(STORE_ENV, raising=False)


def test_the_default_is_the_seed_layout_in_dot_trace(tmp_path: Path) -> None:
    store = open_store()
    assert isinstance(store, FileSystemTraceStore) and store.base_path == Path(".trace")


def test_the_environment_names_the_store_when_none_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STORE_ENV, "sqlite:///env.db")
    store = open_store()
    assert isinstance(store, SQLiteTraceStore) and store.path == Path("env.db")


@pytest.mark.parametrize(("url", "kind", "where"), [
    ("file:.t1", FileSystemTraceStore, ".t1"),
    ("sqlite:///rel.db", SQLiteTraceStore, "rel.db"),
    ("plain.db", SQLiteTraceStore, "plain.db"),
    ("plain.sqlite3", SQLiteTraceStore, "plain.sqlite3"),
    ("folder", FileSystemTraceStore, "folder"),
])
def test_relative_spellings(url: str, kind: type, where: str) -> None:
    store = open_store(url)
    assert isinstance(store, kind)
    assert (store.path if isinstance(store, SQLiteTraceStore) else store.base_path) == Path(where)  # type: ignore[attr-defined]


def test_absolute_spellings_and_options(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/abs.db?durable=1&busy_timeout=2.5")
    assert isinstance(store, SQLiteTraceStore)
    assert store.path == tmp_path / "abs.db" and store.durable and store.busy_timeout == 2.5
    files = open_store(f"file://{tmp_path}/files?checkpoint_every=1")
    assert isinstance(files, FileSystemTraceStore) and files.base_path == tmp_path / "files"
    assert isinstance(open_store("memory:"), InMemoryTraceStore)


async def test_store_url_of_reopens_the_same_store_in_another_process(tmp_path: Path) -> None:
    for url in ("sqlite:///shared.db", "file:shared"):
        first = open_store(url)
        trace = Trace.create(task="shared")
        await first.create_trace(trace)
        again = store_url_of(first)
        assert again is not None and str(tmp_path) in again  # absolute: valid from any working directory
        assert await open_store(again).get_trace(trace.trace_id) is not None
    assert store_url_of(InMemoryTraceStore()) is None


@pytest.mark.parametrize(("url", "names"), [
    ("sqlite://host/x.db", "a host ('host') is not allowed"),
    ("sqlite:///x.db?foo=1", "unknown option 'foo'"),
    ("sqlite:///x.db?durable=maybe", "durable='maybe' must be bool"),
    ("sqlite:///x.db?busy_timeout=soon", "busy_timeout='soon' must be float"),
    ("memory:/x", "takes no path"),
    ("bogus:x", "unknown scheme 'bogus'"),
    ("sqlite:///", "name the database file"),
    ("file:", "name the folder"),
    ("", "non-empty string"),
])
def test_bad_urls_are_refused_naming_the_value_and_the_fix(url: str, names: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_store(url)
    assert names in str(info.value)
    assert "file:.trace" in str(info.value) or "sqlite:///" in str(info.value) or "memory:" in str(info.value)


def test_a_directory_is_not_a_database(tmp_path: Path) -> None:
    (tmp_path / "d.db").mkdir()
    with pytest.raises(StoreError, match="is a directory"):
        open_store("sqlite:///d.db")
