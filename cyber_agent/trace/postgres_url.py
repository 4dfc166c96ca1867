"""The PostgreSQL store's URL: split into libpq's part and the store's options, checked, never printed with its password.

`parse_url` reads `postgresql://user:pw@host:5432/db?schema=runs&pool_size=4&retry_seconds=30`:
the store's own options (`OPTIONS`) are taken out and converted, every other query name must be
a libpq connection keyword (`psycopg.pq.Conninfo.get_defaults`), and a misspelt one is named with
the nearest known name. Every message shows the URL through `redact_url` (the password, in the
user part or as `password=`, becomes `***`); a URL that does not parse (an unclosed `[` of an
IPv6 host) gets a `ConfigurationError` saying so, never a raw `ValueError`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from cyber_agent.errors import ConfigurationError

__all__ = ["OPTIONS", "PostgresURL", "parse_url", "redact_url"]

OPTIONS: dict[str, type] = {"schema": str, "pool_size": int, "retry_seconds": float}
"""The store's own query options and their types (everything else goes to libpq)."""

_USER_PASSWORD = re.compile(r"(?P<head>//[^/?#@:]*:)[^/?#@]*@")
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&](?:password|sslpassword)=)[^&#]*", re.IGNORECASE)


def redact_url(url: str) -> str:
    """`url` with its password replaced by `***` (works on URLs that do not parse, too)."""
    return _QUERY_PASSWORD.sub(r"\g<head>***", _USER_PASSWORD.sub(r"\g<head>***@", url))


@cache
def _libpq_keywords() -> frozenset[str]:
    from psycopg import pq

    return frozenset(option.keyword.decode() for option in pq.Conninfo.get_defaults())


@dataclass(frozen=True)
class PostgresURL:
    """A parsed store URL: libpq's conninfo (without the store's options) and the options given."""

    conninfo: str
    schema: str | None
    pool_size: int | None
    retry_seconds: float | None


def parse_url(url: str) -> PostgresURL:
    """Split and check a store URL; a bad option or value raises ConfigurationError naming it (password hidden)."""
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        _ = parts.port  # an unclosed IPv6 bracket or a bad port raises here
    except ValueError as exc:
        raise ConfigurationError("store URL", f"{shown!r} does not parse ({exc}); an IPv6 host is written in brackets, "
                                              "e.g. postgresql://user@[::1]:5432/db") from None
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    known = _libpq_keywords()
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in OPTIONS:
            ours[name] = value
        elif name in known:
            theirs.append((name, value))
        else:
            near = difflib.get_close_matches(name, [*OPTIONS, *known], n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise ConfigurationError("store URL", f"{shown!r}: unknown option {name!r}; {hint}the store's options are "
                                                  f"{', '.join(OPTIONS)}, the rest are libpq's (host, port, sslmode, ...)")
    values: dict[str, object] = {}
    for name, raw in ours.items():
        kind = OPTIONS[name]
        try:
            values[name] = kind(raw)
        except ValueError:
            raise ConfigurationError("store URL", f"{shown!r}: option {name}={raw!r} is not valid; "
                                                  f"{name} is {'an int' if kind is int else 'a number'}") from None
    return PostgresURL(conninfo=urlunsplit(parts._replace(query=urlencode(theirs))), schema=ours.get("schema"),
                       pool_size=values.get("pool_size"),  # type: ignore[arg-type]
                       retry_seconds=values.get("retry_seconds"))  # type: ignore[arg-type]
