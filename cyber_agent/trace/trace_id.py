"""Trace and message ids (SPEC T2): generate, parse and validate.

Root trace: a UUID4, e.g. ``2f8d3a1c-4b6e-4f9a-8c2d-1e5b7a9f3c4d``.
Sub-trace: ``{parent_trace_id}@{mode}-{YYYYmmddHHMMSS}-{seq:03d}``; a sub-trace of a sub-trace
appends another suffix, so the id spells out its lineage.
Message: ``{trace_id}-{sequence:04d}``.

Every id that reaches a store passes `validate_trace_id` first, so no id can name a path
outside the store's base directory.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from cyber_agent.errors import InvalidIdError

__all__ = [
    "FULL_TRACE_ID_RE",
    "MAX_TRACE_ID_LENGTH",
    "ParsedTraceId",
    "message_id_for",
    "new_root_trace_id",
    "new_sub_trace_id",
    "parse_message_id",
    "parse_trace_id",
    "validate_trace_id",
]

MAX_TRACE_ID_LENGTH = 220
"""Longest accepted trace id; keeps `{message_id}.json` under common 255-byte name limits."""

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_MAX_SEQ = 999_999  # six digits, as _SUFFIX parses
_SUFFIX = r"@([a-z][a-z0-9_]{0,31})-(\d{14})-(\d{3,6})"
_SUFFIX_RE = re.compile(_SUFFIX)
_FULL_RE = re.compile(rf"^({_UUID})((?:{_SUFFIX})*)$")
FULL_TRACE_ID_RE = _FULL_RE
"""A root UUID followed by any number of T2 sub-trace suffixes."""
# Ids made outside this module (imports, tests) may be any safe slug.
_SAFE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")


@dataclass(frozen=True, kw_only=True)
class ParsedTraceId:
    """The parts of a T2 trace id."""

    trace_id: str
    root_id: str
    parent_id: str | None
    mode: str | None
    timestamp: datetime | None
    seq: int | None
    depth: int


def validate_trace_id(trace_id: object) -> str:
    """Return the id if it is safe to use as a directory name, else raise InvalidIdError."""
    if not isinstance(trace_id, str):
        raise InvalidIdError("trace id", trace_id, "must be a string")
    if not trace_id:
        raise InvalidIdError("trace id", trace_id, "must not be empty")
    if len(trace_id) > MAX_TRACE_ID_LENGTH:
        raise InvalidIdError("trace id", trace_id[:40] + "...", f"longer than {MAX_TRACE_ID_LENGTH} characters")
    if "\x00" in trace_id or "/" in trace_id or "\\" in trace_id or ".." in trace_id:
        raise InvalidIdError("trace id", trace_id, "contains a path separator, '..' or NUL")
    if not _SAFE_RE.match(trace_id):
        raise InvalidIdError(
            "trace id", trace_id, "use a UUID or {parent}@{mode}-{YYYYmmddHHMMSS}-{seq} (letters, digits, '-', '_', '.', '@')"
        )
    return trace_id


def new_root_trace_id() -> str:
    """Return a fresh root trace id (UUID4)."""
    return str(uuid.uuid4())


def new_sub_trace_id(parent_trace_id: str, mode: str, seq: int, *, now: datetime | None = None) -> str:
    """Return a sub-trace id for the `seq`-th child of `parent_trace_id` created in `mode`."""
    validate_trace_id(parent_trace_id)
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", mode):
        raise InvalidIdError("sub-trace mode", mode, "use lowercase letters, digits and '_' (e.g. 'delegate')")
    if type(seq) is not int or not 0 <= seq <= _MAX_SEQ:
        raise InvalidIdError("sub-trace seq", seq, f"must be an int from 0 to {_MAX_SEQ}")
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d%H%M%S")
    return validate_trace_id(f"{parent_trace_id}@{mode}-{stamp}-{seq:03d}")


def parse_trace_id(trace_id: str) -> ParsedTraceId:
    """Split a T2 id into root, parent, mode, timestamp and seq; raise InvalidIdError otherwise."""
    validate_trace_id(trace_id)
    match = _FULL_RE.match(trace_id)
    if not match:
        raise InvalidIdError("trace id", trace_id, "not a T2 id: expected a UUID optionally followed by @{mode}-{YYYYmmddHHMMSS}-{seq}")
    root = match.group(1)
    suffixes = list(_SUFFIX_RE.finditer(match.group(2) or ""))
    if not suffixes:
        return ParsedTraceId(trace_id=trace_id, root_id=root, parent_id=None, mode=None, timestamp=None, seq=None, depth=0)
    last = suffixes[-1]
    parent = trace_id[: len(trace_id) - len(last.group(0))]
    try:
        stamp = datetime.strptime(last.group(2), "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    except ValueError as exc:
        raise InvalidIdError("trace id", trace_id, f"timestamp {last.group(2)!r} is not a date: {exc}") from None
    return ParsedTraceId(
        trace_id=trace_id, root_id=root, parent_id=parent, mode=last.group(1),
        timestamp=stamp, seq=int(last.group(3)), depth=len(suffixes),
    )


def message_id_for(trace_id: str, sequence: int) -> str:
    """Return the message id of `sequence` in `trace_id`."""
    return f"{trace_id}-{sequence:04d}"


def parse_message_id(message_id: object) -> tuple[str, int]:
    """Split a message id into (trace_id, sequence); raise InvalidIdError when malformed."""
    if not isinstance(message_id, str) or "-" not in message_id:
        raise InvalidIdError("message id", message_id, "expected {trace_id}-{sequence}")
    trace_id, _, seq = message_id.rpartition("-")
    if not (seq.isascii() and seq.isdigit()):
        raise InvalidIdError("message id", message_id, "expected {trace_id}-{sequence} ending in digits")
    validate_trace_id(trace_id)
    return trace_id, int(seq)
