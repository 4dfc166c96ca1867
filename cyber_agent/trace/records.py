"""Bulk reads of whole trace trees as JSON-mode records (`TraceStore.read_records`).

A `TraceRecord` holds one trace's meta, goal tree, messages, events and side records exactly as
the store persists them (the JSON of `Trace`, `GoalTree`, `Message`, `TraceEvent`), as plain
dicts: frames of 100k messages are built from these without pydantic. Every store implements
`read_records` with its own rules (the file store's temporary files, torn event lines and
checkpoints stay inside `trace/store.py`), so readers such as the notebook never know a layout.

Each message is parsed once: a `message_added` event line embeds the message's JSON exactly as
its own record was written, so `share_message_events` parses only the rest of the line and puts
the message's parsed dict in the payload (the same object as in `TraceRecord.messages`). A
message rewritten after its event (`update_message`) no longer matches its event's bytes, and
that line is parsed whole: the event keeps what was announced.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, AnyStr, cast

from cyber_agent.errors import TraceNotFoundError
from cyber_agent.trace.state import RUNNER_OWNED_CONTEXT, migrate_context

__all__ = ["JSONRecord", "TraceRecord", "iter_message_events", "loads_json", "parse_time", "select_trees", "share_message_events"]

JSONRecord = dict[str, Any]
"""A persisted record in JSON mode (what `model_dump(mode="json")` of its model returns)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, kw_only=True, repr=False)
class TraceRecord:
    """One persisted trace as JSON-mode data."""

    trace: JSONRecord
    """The trace meta (`Trace` fields)."""
    goal_tree: JSONRecord | None = None
    """The goal tree (`GoalTree` fields), None when not read or absent."""
    messages: list[JSONRecord] = field(default_factory=list)
    """Messages in sequence order (empty when not read)."""
    events: list[JSONRecord] = field(default_factory=list)
    """Events in id order (empty when not read)."""
    resource_usage: JSONRecord | None = None
    """Tree-wide usage record of a recursive root (A10), else None."""
    tool_approvals: JSONRecord | None = None
    """Tool-approval state (T8), else None."""
    exchanges: list[JSONRecord] = field(default_factory=list)
    """Recorded model exchanges of the trace (`read_records(..., exchanges=True)`; empty when not read)."""

    @property
    def trace_id(self) -> str:
        """Id of the trace."""
        return str(self.trace["trace_id"])

    def __repr__(self) -> str:
        # Short on purpose: asyncio's Runner builds reprs of a finished task's result (3.11),
        # and a full dataclass repr of 100k messages costs seconds.
        return f"TraceRecord(trace_id={self.trace_id!r}, messages={len(self.messages)}, events={len(self.events)})"

    def __post_init__(self) -> None:
        # A record written before the runner's state was typed keeps it in `context`: lift it into
        # the typed fields' JSON shape (see `cyber_agent/trace/state.py:migrate_context`).
        context = self.trace.get("context")
        if isinstance(context, dict) and not RUNNER_OWNED_CONTEXT.isdisjoint(context):
            object.__setattr__(self, "trace", migrate_context(self.trace))

    @property
    def context(self) -> dict[str, Any]:
        """The trace's own (user) context dict ({} when absent)."""
        value = self.trace.get("context")
        return value if isinstance(value, dict) else {}

    @property
    def lineage(self) -> dict[str, Any]:
        """The trace's lineage (`Trace.lineage` as JSON; {} when absent)."""
        value = self.trace.get("lineage")
        return value if isinstance(value, dict) else {}

    @property
    def protocol(self) -> dict[str, Any]:
        """The trace's protocol state (`Trace.protocol` as JSON; {} when absent)."""
        value = self.trace.get("protocol")
        return value if isinstance(value, dict) else {}

    @property
    def root_setup(self) -> dict[str, Any] | None:
        """A recursive root's setup (`Trace.root_setup` as JSON), else None."""
        value = self.trace.get("root_setup")
        return value if isinstance(value, dict) else None


def parse_time(value: object) -> datetime:
    """Parse a persisted timestamp (ISO 8601, 'Z' allowed); missing values sort first."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not value:
        return _EPOCH
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def select_trees(metas: Iterable[JSONRecord], root_ids: Sequence[str] | None = None) -> list[JSONRecord]:
    """Return the metas of the trees under `root_ids` (all trees when None), parents first.

    Order: depth-first, siblings by (created_at, trace_id); trees in the order of `root_ids`,
    or by creation time when all trees are selected. A trace whose parent is not in the
    store counts as a root. An unknown root raises TraceNotFoundError.
    """
    by_id = {m["trace_id"]: m for m in metas}
    children: dict[str | None, list[JSONRecord]] = {}
    for meta in by_id.values():
        parent = meta.get("parent_trace_id")
        key = parent if parent in by_id else None
        group = children.get(key)
        if group is None:
            children[key] = [meta]
        else:
            group.append(meta)
    if root_ids is None:
        roots = [m["trace_id"] for m in sorted(children.get(None, []), key=_sibling_order)]
    else:
        roots = list(dict.fromkeys(root_ids))
        for root in roots:
            if root not in by_id:
                raise TraceNotFoundError(root)
    out: list[JSONRecord] = []
    seen: set[str] = set()
    for root in roots:  # only the groups reached are sorted: a small tree of a big store sorts little
        stack = [by_id[root]]
        while stack:
            meta = stack.pop()
            trace_id = meta["trace_id"]
            if trace_id in seen:
                continue
            seen.add(trace_id)
            out.append(meta)
            kids = children.get(trace_id)
            if kids:
                if len(kids) > 1:
                    kids.sort(key=_sibling_order)
                stack.extend(reversed(kids))
    return out


def _sibling_order(meta: JSONRecord) -> tuple[datetime, str]:
    return parse_time(meta.get("created_at")), meta["trace_id"]


_MARKERS = {bytes: b'"type":"message_added","payload":{"message":',
            str: '"type":"message_added","payload":{"message":'}
_NULL = {bytes: b"null", str: "null"}


def loads_json(data: AnyStr) -> Any:
    """`json.loads(data)`; for bytes that start with `{` and no NUL (UTF-8, which `json.detect_encoding` would
    answer) decoded directly: the same result without the detection's Python code (~0.5 us a record)."""
    if isinstance(data, bytes) and data[:1] == b"{" and data[1:2] != b"\x00":
        return json.loads(data.decode("utf-8", "surrogatepass"))
    return json.loads(data)


def share_message_events(
    lines: Iterable[tuple[int, AnyStr]], raw_messages: Mapping[int, AnyStr], messages: Mapping[int, JSONRecord],
    on_error: Callable[[int, json.JSONDecodeError], Exception],
) -> list[JSONRecord]:
    """Parse event lines (number, text); a `message_added` line reuses its message's parsed dict.

    `raw_messages` maps a sequence to the message's persisted JSON text and `messages` to its
    parsed dict; `on_error(number, exc)` turns a JSONDecodeError into the store's error. Lines
    are the layout of `cyber_agent/trace/events.py:encode_event`; any other layout is parsed whole.
    """
    return list(iter_message_events(lines, raw_messages, messages, on_error))


def iter_message_events(
    lines: Iterable[tuple[int, AnyStr]], raw_messages: Mapping[int, AnyStr], messages: Mapping[int, JSONRecord],
    on_error: Callable[[int, json.JSONDecodeError], Exception],
) -> Iterator[JSONRecord]:
    """`share_message_events` one event at a time."""
    loads = loads_json
    expected = 1  # message_added events announce sequences in ascending order
    for number, line in lines:
        try:
            # The dicts map bytes→bytes and str→str; mypy cannot tie the key type to the value type.
            marker = cast(AnyStr, _MARKERS[type(line)])
            null = cast(AnyStr, _NULL[type(line)])
            start = line.find(marker)
            raw = raw_messages.get(expected) if start >= 0 else None
            if raw is not None and line.startswith(raw, start + len(marker)):
                begin = start + len(marker)
                event = loads(line[:begin] + null + line[begin + len(raw):])
                event["payload"]["message"] = messages[expected]
            else:
                event = loads(line)
        except json.JSONDecodeError as exc:
            raise on_error(number, exc) from None
        if start >= 0:
            message = (event.get("payload") or {}).get("message")
            sequence = message.get("sequence") if isinstance(message, dict) else None
            expected = (sequence if isinstance(sequence, int) else expected) + 1
        yield event
