"""Portable trace exports (SPEC J5): one JSON Lines file per export, loaded without running anything.

Format (`.jsonl`, or `.jsonl.gz` compressed), one JSON document per line:

    {"format": "cyber_agent.traces", "version": 1, "exported_at": ..., "roots": [...], "traces": N}
    {"kind": "trace", "trace": {...}, "goal_tree": {...}, "messages": [...], "events": [...],
     "resource_usage": {...} | null, "tool_approvals": {...} | null}      (N lines, parents first)
    {"kind": "end", "traces": N}

Records are exactly what the store persisted (the JSON of Trace, GoalTree, Message and
TraceEvent). Readers ignore keys and line kinds they do not know, so exports written by a
newer version still load; a file without its `end` line, or with a line that is not JSON,
is reported as truncated or corrupt, naming the file.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Sequence
from datetime import datetime, UTC
from pathlib import Path
from typing import IO, Any

from cyber_agent.errors import CorruptRecordError
from cyber_agent.notebook.bridge import run_sync
from cyber_agent.notebook.records import StoreSource, TraceRecord, open_source, read_records
from cyber_agent.notebook.store_view import ReadOnlyTraceStore

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "aexport_traces", "export_traces", "load_export"]

EXPORT_FORMAT = "cyber_agent.traces"
"""Value of the header's `format` key."""
EXPORT_VERSION = 1
"""Version this code writes; readers accept any version and ignore what they do not know."""


def _open(path: Path, mode: str, *, compressed: bool) -> IO[str]:
    if compressed:
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def aexport_traces(source: StoreSource, root_ids: Sequence[str] | str | None, path: str | os.PathLike[str]) -> Path:
    """Write the trees under `root_ids` (every trace when None) to one export file; return its path."""
    if isinstance(root_ids, str):
        root_ids = [root_ids]
    records = await read_records(open_source(source), root_ids)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    roots = [r.trace_id for r in records if not r.trace.get("parent_trace_id")] if root_ids is None else list(root_ids)
    header = {
        "format": EXPORT_FORMAT, "version": EXPORT_VERSION,
        "exported_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "roots": roots, "traces": len(records),
    }
    # Write beside the target and rename, so a reader never sees half an export.
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        with _open(Path(tmp), "w", compressed=target.name.endswith(".gz")) as out:
            out.write(_dump(header) + "\n")
            for record in records:
                out.write(_dump({
                    "kind": "trace", "trace": record.trace, "goal_tree": record.goal_tree,
                    "messages": record.messages, "events": record.events,
                    "resource_usage": record.resource_usage, "tool_approvals": record.tool_approvals,
                }) + "\n")
            out.write(_dump({"kind": "end", "traces": len(records)}) + "\n")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; an export is an ordinary file
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def export_traces(source: StoreSource, root_ids: Sequence[str] | str | None, path: str | os.PathLike[str]) -> Path:
    """Write the trees under `root_ids` (every trace when None) to one portable file (sync twin)."""
    return run_sync(aexport_traces(source, root_ids, path))


def load_export(path: str | os.PathLike[str]) -> ReadOnlyTraceStore:
    """Read an export into a read-only store; nothing runs. Raise CorruptRecordError naming the file."""
    source = Path(path)
    if not source.is_file():
        here = Path.cwd()
        raise FileNotFoundError(
            f"no export file at {str(path)!r} (looked in {source.resolve()}; the working directory is {here}); "
            "write one with export_traces(store, root_id, path), or fix the path (a notebook under notebooks/ "
            "reaches the repository's data as '../data/...')")
    records: list[TraceRecord] = []
    header: dict[str, Any] | None = None
    ended = False
    try:
        with _open(source, "r", compressed=source.name.endswith(".gz")) as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                if not line.endswith("\n"):
                    raise CorruptRecordError(source, f"truncated export: line {number} is cut short; export again")
                try:
                    item = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CorruptRecordError(source, f"line {number} is not JSON ({exc.msg}); the export is corrupt") from None
                if not isinstance(item, dict):
                    raise CorruptRecordError(source, f"line {number} is not a JSON object")
                if header is None:
                    header = _check_header(source, item)
                    continue
                kind = item.get("kind")
                if kind == "trace":
                    records.append(_record(source, number, item))
                elif kind == "end":
                    ended = True
                    if item.get("traces") != len(records):
                        raise CorruptRecordError(
                            source, f"end line announces {item.get('traces')} traces but {len(records)} were read"
                        )
                # Other kinds come from newer versions: skipped.
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise CorruptRecordError(source, f"cannot be read: {exc}") from None
    if header is None:
        raise CorruptRecordError(source, "empty file: not a cyber_agent trace export")
    if not ended:
        raise CorruptRecordError(
            source, f"truncated export: no end line after {len(records)} of {header.get('traces', '?')} traces; export again"
        )
    return ReadOnlyTraceStore(records, source=str(source))


def _check_header(source: Path, item: dict[str, Any]) -> dict[str, Any]:
    if item.get("format") != EXPORT_FORMAT:
        raise CorruptRecordError(source, f"not a cyber_agent trace export (format {item.get('format')!r}, expected {EXPORT_FORMAT!r})")
    version = item.get("version")
    if not isinstance(version, int) or version < 1:
        raise CorruptRecordError(source, f"export version {version!r} is not a positive integer")
    return item


def _record(source: Path, number: int, item: dict[str, Any]) -> TraceRecord:
    trace = item.get("trace")
    if not isinstance(trace, dict) or not isinstance(trace.get("trace_id"), str):
        raise CorruptRecordError(source, f"line {number}: a trace line needs a 'trace' object with a 'trace_id'")

    def listed(key: str) -> list[dict[str, Any]]:
        value = item.get(key) or []
        if not isinstance(value, list):
            raise CorruptRecordError(source, f"line {number}: {key!r} must be a list")
        return value

    def optional(key: str) -> dict[str, Any] | None:
        value = item.get(key)
        return value if isinstance(value, dict) else None

    return TraceRecord(
        trace=trace, goal_tree=optional("goal_tree"), messages=listed("messages"), events=listed("events"),
        resource_usage=optional("resource_usage"), tool_approvals=optional("tool_approvals"),
    )
