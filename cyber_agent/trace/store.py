"""FileSystemTraceStore: one directory per trace (SPEC T4).

    {base_path}/{trace_id}/
        meta.json              Trace
        goal.json              GoalTree (flat)
        resource_usage.json    tree-wide usage of a recursive root
        tool_approvals.json    approval batches
        messages/{message_id}.json
        events.jsonl           one TraceEvent per line

Crash safety: every JSON file is written to a temporary file in the same directory and
renamed over the target, so a reader sees the old or the new file, never half of one. A
message file is written before the totals in `meta.json`; a process killed between the two
leaves an orphan message that the next writer adopts (`_recover`). `events.jsonl` is only
appended to; a torn last line left by a kill is ignored by readers and cut by the next writer.
With `durable=True` every write is also fsynced (survives power loss, costs ~ms per write).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cyber_agent.errors import CorruptRecordError, InvalidIdError
from cyber_agent.trace.events import TraceEvent
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.store_base import BaseTraceStore
from cyber_agent.trace.trace_id import message_id_for, validate_trace_id

__all__ = ["FileSystemTraceStore"]

_SIDE_RECORDS = {"resource_usage": "resource_usage.json", "tool_approvals": "tool_approvals.json"}


class FileSystemTraceStore(BaseTraceStore):
    """Persist traces as JSON files under `base_path`."""

    def __init__(self, base_path: str | os.PathLike[str] = ".trace", *, durable: bool = False) -> None:
        super().__init__()
        self.base_path = Path(base_path)
        self.durable = durable
        self.base_path.mkdir(parents=True, exist_ok=True)
        self._base_resolved = self.base_path.resolve()
        self._events_checked: set[str] = set()

    def __repr__(self) -> str:
        return f"FileSystemTraceStore(base_path={str(self.base_path)!r})"

    # ---- paths --------------------------------------------------------------------------
    def trace_dir(self, trace_id: str) -> Path:
        """Directory of a trace; refuses ids that could leave `base_path`."""
        validate_trace_id(trace_id)
        path = self.base_path / trace_id
        if path.resolve().parent != self._base_resolved:
            raise InvalidIdError("trace id", trace_id, "resolves outside the store's base path")
        return path

    def _message_path(self, trace_id: str, sequence: int) -> Path:
        return self.trace_dir(trace_id) / "messages" / f"{message_id_for(trace_id, sequence)}.json"

    # ---- file primitives ----------------------------------------------------------------
    def _write_atomic(self, path: Path, data: str) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
                if self.durable:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        if self.durable:
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    @staticmethod
    def _read_text(path: Path) -> str | None:
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def _parse(self, path: Path, model: type[Any]) -> Any:
        text = self._read_text(path)
        if text is None:
            return None
        try:
            return model.model_validate_json(text)
        except ValidationError as exc:
            raise CorruptRecordError(path, f"does not match {model.__name__}: {exc.errors()[0]['msg']}") from None

    # ---- primitives ---------------------------------------------------------------------
    def _trace_exists(self, trace_id: str) -> bool:
        return (self.trace_dir(trace_id) / "meta.json").is_file()

    def _create_record(self, trace: Trace, tree: GoalTree) -> None:
        directory = self.trace_dir(trace.trace_id)
        (directory / "messages").mkdir(parents=True, exist_ok=True)
        self._write_goals(trace.trace_id, tree)
        # meta.json last: its presence is what makes the trace exist.
        self._write_trace(trace)

    def _read_trace(self, trace_id: str) -> Trace | None:
        return self._parse(self.trace_dir(trace_id) / "meta.json", Trace)

    def _write_trace(self, trace: Trace) -> None:
        self._write_atomic(self.trace_dir(trace.trace_id) / "meta.json", trace.model_dump_json(indent=1))

    def _read_goals(self, trace_id: str) -> GoalTree | None:
        return self._parse(self.trace_dir(trace_id) / "goal.json", GoalTree)

    def _write_goals(self, trace_id: str, tree: GoalTree) -> None:
        self._write_atomic(self.trace_dir(trace_id) / "goal.json", tree.model_dump_json(indent=1))

    def _read_message(self, trace_id: str, sequence: int) -> Message | None:
        return self._parse(self._message_path(trace_id, sequence), Message)

    def _write_message(self, message: Message) -> None:
        self._write_atomic(self._message_path(message.trace_id, message.sequence), message.model_dump_json())

    def _read_all_messages(self, trace_id: str) -> list[Message]:
        directory = self.trace_dir(trace_id) / "messages"
        out = []
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.endswith(".json") and not entry.name.startswith("."):
                    message = self._parse(Path(entry.path), Message)
                    if message is not None:
                        out.append(message)
        return out

    def _recover(self, trace: Trace, tree: GoalTree) -> list[Message]:
        orphans = []
        sequence = trace.total_messages + 1
        while (message := self._read_message(trace.trace_id, sequence)) is not None:
            orphans.append(message)
            sequence += 1
        return orphans

    def _events_path(self, trace_id: str) -> Path:
        return self.trace_dir(trace_id) / "events.jsonl"

    def _append_event_record(self, event: TraceEvent) -> None:
        path = self._events_path(event.trace_id)
        if event.trace_id not in self._events_checked:
            self._cut_torn_tail(path)
            self._events_checked.add(event.trace_id)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(event.model_dump_json() + "\n")
            if self.durable:
                handle.flush()
                os.fsync(handle.fileno())

    @staticmethod
    def _cut_torn_tail(path: Path) -> None:
        try:
            with open(path, "rb+") as handle:
                data = handle.read()
                if data and not data.endswith(b"\n"):
                    handle.truncate(data.rfind(b"\n") + 1)
        except FileNotFoundError:
            pass

    def _read_events(self, trace_id: str) -> list[TraceEvent]:
        path = self._events_path(trace_id)
        text = self._read_text(path)
        if not text:
            return []
        lines = text.split("\n")
        # The last element is '' after a complete file, or a torn line left by a kill: skip it.
        events = []
        for number, line in enumerate(lines[:-1], start=1):
            if not line.strip():
                continue
            try:
                events.append(TraceEvent.model_validate_json(line))
            except ValidationError as exc:
                raise CorruptRecordError(path, f"line {number} is not an event: {exc.errors()[0]['msg']}") from None
        return events

    def _read_side_record(self, trace_id: str, name: str) -> dict[str, Any] | None:
        path = self.trace_dir(trace_id) / _SIDE_RECORDS[name]
        text = self._read_text(path)
        if text is None:
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CorruptRecordError(path, f"invalid JSON ({exc.msg} at position {exc.pos})") from None
        if not isinstance(data, dict):
            raise CorruptRecordError(path, f"expected a JSON object, got {type(data).__name__}")
        return data

    def _write_side_record(self, trace_id: str, name: str, data: dict[str, Any]) -> None:
        path = self.trace_dir(trace_id) / _SIDE_RECORDS[name]
        self._write_atomic(path, json.dumps(data, ensure_ascii=False, indent=1, default=str))

    def _all_traces(self) -> list[Trace]:
        out = []
        with os.scandir(self.base_path) as entries:
            for entry in entries:
                if not entry.is_dir() or entry.name.startswith("."):
                    continue
                meta = Path(entry.path) / "meta.json"
                if meta.is_file():
                    trace = self._parse(meta, Trace)
                    if trace is not None:
                        out.append(trace)
        return out
