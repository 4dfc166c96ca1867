"""Choose a store by URL: one spelling for the Python API, the CLI, the server and the notebooks.

    file:.trace            the seed's layout: one folder per trace, JSON files (the default)
    file:///abs/path       the same, absolute
    sqlite:///runs.db      one SQLite database, relative path (SQLAlchemy's three slashes)
    sqlite:////abs/runs.db the same, absolute (four slashes)
    memory:                process memory (tests, throw-away notebooks)
    postgresql://user@host:5432/db?schema=runs
                           a PostgreSQL server (the `postgres` extra); libpq's URL, plus the
                           store's options schema, pool_size, retry_seconds
    .trace                 a plain path: a file store there, or a SQLite store if it names a
                           SQLite database file (`*.db`, `*.sqlite`, `*.sqlite3`)

Options ride in the query string (`sqlite:///runs.db?durable=1&busy_timeout=10`,
`file:.trace?checkpoint_every=1`). `CYBER_AGENT_STORE` names the store where none is given.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from cyber_agent.errors import ConfigurationError
from cyber_agent.trace.memory_store import InMemoryTraceStore
from cyber_agent.trace.postgres_url import redact_url
from cyber_agent.trace.sqlite_store import SQLiteTraceStore
from cyber_agent.trace.store import FileSystemTraceStore
from cyber_agent.trace.store_base import BaseTraceStore

__all__ = ["DEFAULT_STORE_URL", "STORE_ENV", "open_store", "store_url_of"]

STORE_ENV = "CYBER_AGENT_STORE"
DEFAULT_STORE_URL = "file:.trace"
_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_OPTIONS: dict[str, dict[str, type]] = {
    "file": {"durable": bool, "checkpoint_every": int, "checkpoint_interval": float, "lock_timeout": float},
    "sqlite": {"durable": bool, "busy_timeout": float},
    "memory": {},
}
_EXAMPLES = "file:.trace, sqlite:///runs.db, postgresql://user@host/db, memory:"


def _value(scheme: str, name: str, raw: str, url: str) -> bool | int | float:
    kind = _OPTIONS[scheme][name]
    try:
        if kind is bool:
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true", "yes")
        return int(raw) if kind is int else float(raw)
    except ValueError:
        raise ConfigurationError("store URL", f"{url!r}: option {name}={raw!r} must be {kind.__name__}") from None


def open_store(url: str | os.PathLike[str] | None = None, *, create: bool = True) -> BaseTraceStore:
    """Open the store a URL names (None: `CYBER_AGENT_STORE`, else `file:.trace`).

    `create=False` (read commands): a SQLite file that does not exist is refused, never created."""
    if url is None:
        url = os.environ.get(STORE_ENV) or DEFAULT_STORE_URL
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError("store URL", f"a store URL must be a non-empty string such as {_EXAMPLES}; got {url!r}")
    text = url.strip()
    scheme, sep, _ = text.partition(":")
    if not sep or len(scheme) == 1 or "/" in scheme or "\\" in scheme:  # a plain path (C:\\ on Windows too)
        path = Path(text)
        if path.suffix.lower() in _SQLITE_SUFFIXES:
            return SQLiteTraceStore(path, create=create)
        return FileSystemTraceStore(path)
    scheme = scheme.lower()
    if scheme in ("postgresql", "postgres"):
        return _open_postgres(text)
    if scheme not in _OPTIONS:
        raise ConfigurationError("store URL", f"{redact_url(text)!r}: unknown scheme {scheme!r}; use one of {_EXAMPLES}")
    shown = redact_url(text)
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise ConfigurationError("store URL", f"{shown!r} does not parse ({exc})") from None
    options = {}
    for name, raw in parse_qsl(parts.query, keep_blank_values=True):
        if name not in _OPTIONS[scheme]:
            known = ", ".join(sorted(_OPTIONS[scheme])) or "none"
            raise ConfigurationError("store URL", f"{shown!r}: unknown option {name!r} for {scheme}: stores (known: {known})")
        options[name] = _value(scheme, name, raw, shown)
    if scheme == "memory":
        if parts.path or parts.netloc:
            raise ConfigurationError("store URL", f"{shown!r}: memory: takes no path (write just 'memory:')")
        return InMemoryTraceStore()
    if parts.netloc:
        raise ConfigurationError("store URL", f"{shown!r}: a host ({redact_url('//' + parts.netloc)[2:]!r}) is not allowed for a local {scheme}: store; "
                          f"write {scheme}:///relative/path or {scheme}:////absolute/path")
    raw_path = unquote(parts.path)
    if scheme == "sqlite":
        # SQLAlchemy's convention: sqlite:///rel.db is relative, sqlite:////abs.db absolute.
        if not raw_path.startswith("/") or raw_path == "/":
            raise ConfigurationError("store URL", f"{shown!r}: name the database file, e.g. sqlite:///runs.db "
                              "(relative) or sqlite:////abs/path/runs.db")
        path = Path(raw_path[1:])
        return SQLiteTraceStore(path, create=create, **options)  # type: ignore[arg-type]
    if not raw_path:
        raise ConfigurationError("store URL", f"{shown!r}: name the folder, e.g. file:.trace")
    return FileSystemTraceStore(Path(raw_path), **options)  # type: ignore[arg-type]


def _open_postgres(url: str) -> BaseTraceStore:
    try:
        from cyber_agent.trace.postgres_store import PostgresTraceStore
    except ImportError as exc:
        raise ConfigurationError("store URL", f"{redact_url(url)!r} needs psycopg ({exc}); install it with "
                                              "pip install 'cyber-agent[postgres]'") from None
    return PostgresTraceStore(url)


def store_url_of(store: object) -> str | None:
    """The URL that reopens `store` in another process, or None (a memory store cannot be shared)."""
    url = getattr(store, "url", None)
    if type(store).__name__ == "PostgresTraceStore" and isinstance(url, str):  # psycopg may not be installed
        return url
    if isinstance(store, SQLiteTraceStore):
        path = store.path.resolve()
        return f"sqlite:///{path}" if path.is_absolute() else f"sqlite:///{store.path}"
    if isinstance(store, FileSystemTraceStore):
        return f"file:{store.base_path.resolve()}"
    return None
