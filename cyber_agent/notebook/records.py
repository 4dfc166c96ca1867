"""Read trace trees as JSON-mode records from any TraceStore, a store directory or an export.

Every notebook helper reads through `read_records`: it returns one `TraceRecord` per trace of
the selected trees (parents before children, siblings by creation time), holding the trace's
meta, goal tree, messages, events and side records exactly as they are persisted (JSON-mode
dicts). Frames, graphs, budgets and exports are built from these records, so they agree
whichever store the data came from.

A `FileSystemTraceStore` is read straight from its files (SPEC T4 layout), each file exactly
once and without pydantic validation: this is what keeps frames of 100k messages close to the
cost of reading the files. Its `meta.json` / `goal.json` are checkpoints; a trace with
messages beyond its checkpoint (being written right now) gets its meta and goal tree from the
store's own reader, which counts them. Any other store is read through the TraceStore protocol.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cyber_agent.trace.state import RUNNER_OWNED_CONTEXT, migrate_context
from cyber_agent.errors import ConfigurationError, CorruptRecordError, TraceNotFoundError
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.store import FileSystemTraceStore

__all__ = ["StoreSource", "TraceRecord", "open_source", "parse_time", "read_records", "select_trees"]

StoreSource = TraceStore | str | os.PathLike[str]
"""A TraceStore, the directory of a FileSystemTraceStore, or an export file."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True, kw_only=True, repr=False)
class TraceRecord:
    """One persisted trace as JSON-mode data."""

    trace: dict[str, Any]
    """The trace meta (`Trace` fields)."""
    goal_tree: dict[str, Any] | None = None
    """The goal tree (`GoalTree` fields), None when not read or absent."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """Messages in sequence order (empty when not read)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Events in id order (empty when not read)."""
    resource_usage: dict[str, Any] | None = None
    """Tree-wide usage record of a recursive root (A10), else None."""
    tool_approvals: dict[str, Any] | None = None
    """Tool-approval state (T8), else None."""

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
        return self.trace.get("context") or {}

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


def open_source(source: StoreSource) -> TraceStore:
    """Return the store behind `source`: a store as is, a directory as a file store, a file as an export."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            return FileSystemTraceStore(path)
        if path.is_file():
            from cyber_agent.notebook.export import load_export

            return load_export(path)
        raise ConfigurationError("source", f"{str(path)!r} is neither a trace store directory nor an export file")
    return source


def parse_time(value: object) -> datetime:
    """Parse a persisted timestamp (ISO 8601, 'Z' allowed); missing values sort first."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not value:
        return _EPOCH
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def select_trees(metas: Iterable[dict[str, Any]], root_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Return the metas of the trees under `root_ids` (all trees when None), parents first.

    Order: depth-first, siblings by (created_at, trace_id); trees in the order of `root_ids`,
    or by creation time when all trees are selected. A trace whose parent is not in the
    store counts as a root.
    """
    by_id = {m["trace_id"]: m for m in metas}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for meta in by_id.values():
        parent = meta.get("parent_trace_id")
        children.setdefault(parent if parent in by_id else None, []).append(meta)
    for group in children.values():
        group.sort(key=lambda m: (parse_time(m.get("created_at")), m["trace_id"]))
    if root_ids is None:
        roots = [m["trace_id"] for m in children.get(None, [])]
    else:
        roots = list(dict.fromkeys(root_ids))
        for root in roots:
            if root not in by_id:
                raise TraceNotFoundError(root)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for root in roots:
        stack = [by_id[root]]
        while stack:
            meta = stack.pop()
            if meta["trace_id"] in seen:
                continue
            seen.add(meta["trace_id"])
            out.append(meta)
            stack.extend(reversed(children.get(meta["trace_id"], [])))
    return out


async def read_records(
    store: TraceStore,
    root_ids: Sequence[str] | None = None,
    *,
    messages: bool = True,
    events: bool = True,
) -> list[TraceRecord]:
    """Read the trees under `root_ids` (every trace when None) as records, parents first."""
    from cyber_agent.notebook.store_view import ReadOnlyTraceStore

    if isinstance(store, ReadOnlyTraceStore):
        selected = select_trees(store.metas(), root_ids)
        return [store.record(m["trace_id"], messages=messages, events=events) for m in selected]
    if isinstance(store, FileSystemTraceStore):
        return await _read_files(store, root_ids, messages=messages, events=events)
    metas = [t.model_dump(mode="json") for t in await store.list_traces(limit=None)]
    out = []
    for meta in select_trees(metas, root_ids):
        trace_id = meta["trace_id"]
        tree = await store.get_goal_tree(trace_id)
        out.append(TraceRecord(
            trace=meta,
            goal_tree=tree.model_dump(mode="json") if tree is not None else None,
            messages=[m.model_dump(mode="json") for m in await store.get_trace_messages(trace_id)] if messages else [],
            events=[e.model_dump(mode="json") for e in await store.get_events(trace_id)] if events else [],
            resource_usage=await store.get_resource_usage(trace_id),
            tool_approvals=await store.get_tool_approvals(trace_id),
        ))
    return out


# ---- FileSystemTraceStore layout, read directly -------------------------------------------
def _load_json(path: Path) -> Any:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise CorruptRecordError(path, f"invalid JSON ({exc.msg} at position {exc.pos})") from None


async def _read_files(
    store: FileSystemTraceStore, root_ids: Sequence[str] | None, *, messages: bool, events: bool
) -> list[TraceRecord]:
    base = store.base_path
    metas = []
    with os.scandir(base) as entries:
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            meta = _load_json(Path(entry.path) / "meta.json")
            if isinstance(meta, dict) and "trace_id" in meta:
                metas.append(meta)
    out = []
    for meta in select_trees(metas, root_ids):
        trace_id = meta["trace_id"]
        directory = base / trace_id
        goal_tree = _load_json(directory / "goal.json")
        total = int(meta.get("total_messages") or 0)
        next_file = directory / "messages" / f"{trace_id}-{total + 1:04d}.json"
        if next_file.exists():
            # meta.json and goal.json are checkpoints; messages written after the last one are
            # counted by the store's own reader (rare: a trace being written right now).
            trace = await store.get_trace(trace_id)
            tree = await store.get_goal_tree(trace_id)
            if trace is not None:
                meta = trace.model_dump(mode="json")
                goal_tree = tree.model_dump(mode="json") if tree is not None else None
        out.append(TraceRecord(
            trace=meta,
            goal_tree=goal_tree,
            messages=_read_messages(directory / "messages") if messages else [],
            events=_read_events(directory / "events.jsonl") if events else [],
            resource_usage=_load_json(directory / "resource_usage.json"),
            tool_approvals=_load_json(directory / "tool_approvals.json"),
        ))
    return out


def _read_messages(directory: Path) -> list[dict[str, Any]]:
    # The hot loop of big frames: plain strings and one open per file, nothing else.
    out: list[dict[str, Any]] = []
    loads = json.loads
    try:
        entries = os.scandir(directory)
    except FileNotFoundError:
        return out
    with entries:
        for entry in entries:
            name = entry.name
            # Names starting with '.' are the store's temporary files of an in-flight write.
            if name.endswith(".json") and not name.startswith("."):
                try:
                    with open(entry.path, "rb") as handle:
                        data = handle.read()
                except FileNotFoundError:
                    continue
                try:
                    out.append(loads(data))
                except json.JSONDecodeError as exc:
                    raise CorruptRecordError(entry.path, f"invalid JSON ({exc.msg} at position {exc.pos})") from None
    out.sort(key=lambda m: m.get("sequence", 0))
    return out


def _read_events(path: Path) -> list[dict[str, Any]]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    out = []
    # The last element is b'' after a complete file, or a torn line left by a kill: skip it.
    for number, line in enumerate(lines[:-1], start=1):
        if not line or line.isspace():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise CorruptRecordError(path, f"line {number} is not JSON ({exc.msg})") from None
    return out
