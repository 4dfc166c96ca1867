"""FileSystemTraceStore: one directory per trace (SPEC T4).

    {base_path}/{trace_id}/
        meta.json              Trace (checkpoint of totals and head)
        goal.json              GoalTree, flat (checkpoint of goal stats)
        resource_usage.json    tree-wide usage of a recursive root
        tool_approvals.json    approval batches
        messages/{message_id}.json
        events.jsonl           one TraceEvent per line

Crash safety: every JSON file is written to a hidden temporary file in the same directory and
renamed over the target, so a reader sees the old or the new file, never half of one.
`events.jsonl` is only appended to; readers ignore a torn last line left by a kill and the
next writer cuts it. Adding a message creates its file and appends its event; `goal.json` and
`meta.json` are checkpointed every `checkpoint_every` adds or `checkpoint_interval` seconds
and on every other change. Readers count messages above the checkpoint (`_cold_view`), and the
next writer adopts them (`_load_for_write`), so a kill at any moment loses nothing that
`add_message` acknowledged. With `durable=True` every write is also fsynced (power loss).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import threading
import time
import weakref
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from cyber_agent.errors import CorruptRecordError, InvalidIdError, TraceLockedError
from cyber_agent.trace.exchange_log import EXCHANGES_FILE
from cyber_agent.trace.events import TraceEvent
from cyber_agent.trace.goal_models import GoalTree
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.columnar import ColumnBuilder
from cyber_agent.trace.record_fields import TraceProjection, project_meta
from cyber_agent.trace.records import JSONRecord, TraceRecord, iter_message_events, loads_json, share_message_events
from cyber_agent.trace.store_deferred import DeferredEventStore
from cyber_agent.trace.store_listing import DamagedEntry, DamageKind
from cyber_agent.trace.store_rules import _evented_sequence
from cyber_agent.trace.trace_id import FULL_TRACE_ID_RE as _FULL_ID, message_id_for, validate_trace_id

__all__ = ["FileSystemTraceStore"]

_SIDE_RECORDS = {"resource_usage": "resource_usage.json", "tool_approvals": "tool_approvals.json",
                 "stop_request": "stop_request.json"}
_CHUNK = 1 << 16
_M = TypeVar("_M", bound=BaseModel)
# O_BINARY: no newline translation on Windows; O_CLOEXEC: no fd leaks into subprocesses.
_EXTRA_FLAGS = getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _EXTRA_FLAGS
_READ_FLAGS = os.O_RDONLY | _EXTRA_FLAGS
_APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | _EXTRA_FLAGS
_MAX_CACHED_DIRS = 4096
# Held during each write; holds "{generation} pid {pid} on {host}", the holder named when a wait times out.
_WRITER_LOCK = ".writer.lock"
_LOCK_RECORD = 128
_MAX_LOCK_FILES = 256
_HOST = socket.gethostname()


class FileSystemTraceStore(DeferredEventStore):
    """Persist traces as JSON files under `base_path`."""

    def __init__(
        self, base_path: str | os.PathLike[str] = ".trace", *, durable: bool = False,
        checkpoint_every: int = 32, checkpoint_interval: float = 0.5, lock_timeout: float = 10.0,
    ) -> None:
        super().__init__()
        if checkpoint_every < 1 or checkpoint_interval < 0:
            raise ValueError(f"checkpoint_every must be >= 1 and checkpoint_interval >= 0, "
                             f"got {checkpoint_every} and {checkpoint_interval}")
        self.base_path = Path(base_path)
        self.durable = durable
        self._checkpoint_every = checkpoint_every
        self._checkpoint_interval = checkpoint_interval
        self.base_path.mkdir(parents=True, exist_ok=True)
        self._base = os.fspath(self.base_path)
        self._base_real = os.path.realpath(self._base)
        self._dirs: dict[str, str] = {}
        self._lock_timeout = lock_timeout
        self._lock_fds: dict[str, int] = {}
        self._exchange_ends: dict[str, tuple[int, int]] = {}  # trace -> (file size, exchanges) after our last append
        weakref.finalize(self, _close_all, self._lock_fds)  # a dropped store leaks no descriptors

    # ---- the writer lock: one write at a time per trace, across processes ---------------------
    def _acquire_writer(self, trace_id: str) -> int | None:
        if fcntl is None:
            return None  # no flock (Windows): one writing process per trace, as documented
        fd = self._lock_fds.get(trace_id)
        if fd is None:
            try:
                fd = os.open(f"{self._dir(trace_id)}/{_WRITER_LOCK}", os.O_RDWR | os.O_CREAT | _EXTRA_FLAGS, 0o666)
            except FileNotFoundError:
                return None  # no such trace: the operation itself reports it
            self._close_idle_lock_files()
            self._lock_fds[trace_id] = fd
        _flock(fd, trace_id, self._lock_timeout)
        try:
            record = os.pread(fd, _LOCK_RECORD, 0).split(b" ", 1)[0]
            generation = int(record) if record.isdigit() else 0
            os.pwrite(fd, f"{generation + 1} pid {os.getpid()} on {_HOST}".encode().ljust(_LOCK_RECORD), 0)
        except BaseException:
            fcntl.flock(fd, fcntl.LOCK_UN)
            raise
        return generation

    def _release_writer(self, trace_id: str, *, failed: bool) -> None:
        fd = self._lock_fds.get(trace_id)
        if fd is not None and fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _close_idle_lock_files(self) -> None:
        """Keep at most `_MAX_LOCK_FILES` lock files open (reopening one costs a path lookup per write)."""
        if len(self._lock_fds) < _MAX_LOCK_FILES:
            return
        for trace_id in list(self._lock_fds):
            lock = self._lock(trace_id)
            if lock.acquire(blocking=False):  # not in a write of another thread
                try:
                    os.close(self._lock_fds.pop(trace_id))
                finally:
                    lock.release()

    def __repr__(self) -> str:
        return f"FileSystemTraceStore(base_path={self._base!r})"

    # ---- paths --------------------------------------------------------------------------
    def trace_dir(self, trace_id: str) -> Path:
        """Directory of a trace; refuses ids that could leave `base_path`."""
        return Path(self._dir(trace_id))

    def _dir(self, trace_id: str) -> str:
        directory = self._dirs.get(trace_id)
        if directory is None:
            validate_trace_id(trace_id)
            directory = os.path.join(self._base, trace_id)
            # The id is a plain name; resolving catches a symlink planted under base_path.
            if os.path.dirname(os.path.realpath(directory)) != self._base_real:
                raise InvalidIdError("trace id", trace_id, "resolves outside the store's base path")
            if len(self._dirs) >= _MAX_CACHED_DIRS:
                self._dirs.clear()
            self._dirs[trace_id] = directory
        return directory

    def _message_path(self, trace_id: str, sequence: int) -> str:
        return f"{self._dir(trace_id)}/messages/{message_id_for(trace_id, sequence)}.json"

    # ---- file primitives ----------------------------------------------------------------
    def _write_atomic(self, directory: str, name: str, data: bytes) -> None:
        """Write `directory/name` through a temporary file and a rename."""
        tmp = f"{directory}/.{name}.{os.getpid()}-{threading.get_ident()}.tmp"
        fd = os.open(tmp, _OPEN_FLAGS, 0o666)
        try:
            try:
                _write_all(fd, data)
                if self.durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, f"{directory}/{name}")
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        if self.durable:
            self._fsync_dir(directory)

    @staticmethod
    def _fsync_dir(directory: str) -> None:
        if os.name == "nt":
            return  # directories cannot be opened there; NTFS journals the rename itself
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    @staticmethod
    def _read_bytes(path: str) -> bytes | None:
        # Unbuffered: a buffered file object costs as much to set up as a small record takes to read.
        try:
            fd = os.open(path, _READ_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as exc:  # a file where a directory should be, permissions, ...: name the file
            raise CorruptRecordError(path, f"cannot be read ({exc.strerror})") from None
        try:
            chunks = []
            while chunk := os.read(fd, _CHUNK):
                chunks.append(chunk)
        except OSError as exc:
            raise CorruptRecordError(path, f"cannot be read ({exc.strerror})") from None
        finally:
            os.close(fd)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _parse(self, path: str, model: type[_M]) -> _M | None:
        raw = self._read_bytes(path)
        if raw is None:
            return None
        try:
            return model.model_validate_json(raw)
        except ValidationError as exc:
            raise CorruptRecordError(path, f"does not match {model.__name__}: {exc.errors()[0]['msg']}") from None

    # ---- primitives ---------------------------------------------------------------------
    def _trace_exists(self, trace_id: str) -> bool:
        return os.path.isfile(f"{self._dir(trace_id)}/meta.json")

    def _create_record(self, trace: Trace, tree: GoalTree) -> None:
        directory = self._dir(trace.trace_id)
        os.makedirs(f"{directory}/messages", exist_ok=True)
        self._write_goals(trace.trace_id, tree)
        # meta.json last: its presence is what makes the trace exist.
        self._write_trace(trace)

    def _read_trace(self, trace_id: str) -> Trace | None:
        path = f"{self._dir(trace_id)}/meta.json"
        trace = self._parse(path, Trace)
        if trace is not None and trace.trace_id != trace_id:
            raise CorruptRecordError(path, f"holds trace {trace.trace_id!r}, not {trace_id!r}")
        return trace

    def _write_trace(self, trace: Trace) -> None:
        self._write_atomic(self._dir(trace.trace_id), "meta.json", trace.model_dump_json().encode())

    def _read_goals(self, trace_id: str) -> GoalTree | None:
        return self._parse(f"{self._dir(trace_id)}/goal.json", GoalTree)

    def _write_goals(self, trace_id: str, tree: GoalTree) -> None:
        self._write_atomic(self._dir(trace_id), "goal.json", tree.model_dump_json().encode())

    def _read_message(self, trace_id: str, sequence: int) -> Message | None:
        path = self._message_path(trace_id, sequence)
        message = self._parse(path, Message)
        if message is not None and (message.trace_id != trace_id or message.sequence != sequence):
            raise CorruptRecordError(path, f"holds message {message.message_id!r}")
        return message

    def _write_message(self, trace_id: str, sequence: int, data: str) -> None:
        self._write_atomic(f"{self._dir(trace_id)}/messages", f"{message_id_for(trace_id, sequence)}.json", data.encode())

    def _read_all_messages(self, trace_id: str) -> list[Message]:
        directory = f"{self._dir(trace_id)}/messages"
        out = []
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.endswith(".json") and not entry.name.startswith("."):
                    message = self._parse(entry.path, Message)
                    if message is not None:
                        out.append(message)
        return out

    def _events_path(self, trace_id: str) -> str:
        return f"{self._dir(trace_id)}/events.jsonl"

    def _append_event_line(self, trace_id: str, line: str) -> None:
        self._append_line(self._events_path(trace_id), line, size=False)

    def _append_line(self, path: str, line: str, *, size: bool = True) -> int:
        """Append `line` and a newline to `path`; return the file's size after it (-1 without `size`: no fstat)."""
        fd = os.open(path, _APPEND_FLAGS, 0o666)
        try:
            view = memoryview((line + "\n").encode())
            written = 0
            try:
                while written < len(view):  # os.write may write fewer bytes (a full disk, a size limit)
                    count = os.write(fd, view[written:])
                    if count <= 0:
                        raise OSError(errno.ENOSPC, f"wrote 0 of {len(view) - written} bytes")
                    written += count
                if self.durable:
                    os.fsync(fd)
            except BaseException:
                # Cut back to the previous end (the writer lock keeps other appends out): no torn
                # line stays for the next append to bury in the middle.
                os.ftruncate(fd, os.fstat(fd).st_size - written)
                raise
            return os.fstat(fd).st_size if size else -1
        finally:
            os.close(fd)

    def _append_exchange_line(self, trace_id: str, line: str) -> int:
        path = f"{self._dir(trace_id)}/{EXCHANGES_FILE}"
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            size = 0
        known = self._exchange_ends.get(trace_id)
        if known is not None and known[0] == size:
            count = known[1]
        else:  # first append of this instance, or another process appended: count (and cut a torn line)
            raw = self._read_bytes(path) or b""
            end = raw.rfind(b"\n") + 1
            if end < len(raw):
                os.truncate(path, end)
            count = raw.count(b"\n")
        self._exchange_ends[trace_id] = (self._append_line(path, line), count + 1)
        return count

    def _read_exchange_lines(self, trace_id: str) -> list[str]:
        raw = self._read_bytes(f"{self._dir(trace_id)}/{EXCHANGES_FILE}")
        if not raw:
            return []
        return [line.decode() for line in raw.split(b"\n")[:-1] if line.strip()]  # a torn last line is skipped

    def _delete_message(self, trace_id: str, sequence: int) -> None:
        try:
            os.unlink(self._message_path(trace_id, sequence))
        except FileNotFoundError:
            pass

    def _read_events(self, trace_id: str, since_event_id: int) -> list[TraceEvent]:
        path = self._events_path(trace_id)
        if since_event_id > 0:
            # A watcher polls for what is new: read back from the end only as far as needed.
            return self._read_events_after(path, since_event_id)
        raw = self._read_bytes(path)
        if not raw:
            return []
        lines = raw.split(b"\n")
        # The last element is b'' after a complete file, or a torn line left by a kill: skip it.
        return [_parse_event(path, line, f"line {number}")
                for number, line in enumerate(lines[:-1], start=1) if line.strip()]

    @staticmethod
    def _read_events_after(path: str, since_event_id: int) -> list[TraceEvent]:
        try:
            fd = os.open(path, os.O_RDONLY | _EXTRA_FLAGS)
        except FileNotFoundError:
            return []
        try:
            newer: list[TraceEvent] = []
            for line in _lines_backwards(fd, _last_newline_end(fd, os.fstat(fd).st_size)):
                event = _parse_event(path, line, f"a line after event {since_event_id}")
                if event.event_id <= since_event_id:
                    break
                newer.append(event)
        finally:
            os.close(fd)
        newer.reverse()
        return newer

    def _repair(self, trace_id: str) -> tuple[int, int]:
        """Cut a torn event line, drop stale temporary files; read only the end of the event log."""
        self._remove_temp_files(self._dir(trace_id))
        self._remove_temp_files(f"{self._dir(trace_id)}/messages")
        path = self._events_path(trace_id)
        try:
            fd = os.open(path, os.O_RDWR | _EXTRA_FLAGS)
        except FileNotFoundError:
            return 0, 0
        try:
            size = os.fstat(fd).st_size
            end = _last_newline_end(fd, size)
            if end != size:
                os.ftruncate(fd, end)
                if self.durable:
                    os.fsync(fd)
            last_event_id = evented = 0
            for line in _lines_backwards(fd, end):
                try:
                    event = json.loads(line)
                    event_id = event["event_id"]
                except (ValueError, KeyError, TypeError):
                    raise CorruptRecordError(path, "a line near the end is not an event") from None
                last_event_id = last_event_id or event_id
                if event.get("type") == "message_added":
                    evented = _evented_sequence(event.get("payload") or {})
                    break
            return last_event_id, evented
        finally:
            os.close(fd)

    @staticmethod
    def _remove_temp_files(directory: str) -> None:
        try:
            with os.scandir(directory) as entries:
                stale = [e.path for e in entries if e.name.startswith(".") and e.name.endswith(".tmp")]
        except FileNotFoundError:
            return
        for path in stale:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _read_side_record(self, trace_id: str, name: str) -> dict[str, Any] | None:
        path = f"{self._dir(trace_id)}/{_SIDE_RECORDS[name]}"
        raw = self._read_bytes(path)
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise CorruptRecordError(path, f"invalid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise CorruptRecordError(path, f"expected a JSON object, got {type(data).__name__}")
        return data

    def _write_side_record(self, trace_id: str, name: str, data: str) -> None:
        self._write_atomic(self._dir(trace_id), _SIDE_RECORDS[name], data.encode())

    # ---- bulk reads: the files parsed as JSON, each exactly once, without pydantic ------------
    def _load_json(self, path: str) -> Any:
        raw = self._read_bytes(path)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CorruptRecordError(path, f"invalid JSON ({exc.msg} at position {exc.pos})") from None
        except UnicodeDecodeError as exc:  # e.g. a leading NUL byte: json.loads took the bytes for UTF-16
            raise CorruptRecordError(path, f"not UTF-8 JSON ({exc.reason} at byte {exc.start})") from None

    def _record_metas(self, trace_ids: Collection[str] | None = None) -> tuple[list[JSONRecord], list[DamagedEntry]]:
        # The whole meta.json of each trace: selecting trees needs its parent, and no index holds that.
        metas = []
        if trace_ids is None:
            names, damaged = self._entry_names()
        else:
            names, damaged = [t for t in trace_ids if os.path.isdir(f"{self._base}/{t}")], []
        for name in names:
            hot = self._hot.get(name)
            if hot is not None:
                with self._lock(name):
                    metas.append(hot.trace.model_dump(mode="json"))
                continue
            try:
                meta = self._load_json(f"{self._base}/{name}/meta.json")
            except CorruptRecordError as exc:
                damaged.append(_damaged(name, exc))
                continue
            if isinstance(meta, dict) and meta.get("trace_id") == name:
                metas.append(meta)
            elif meta is not None:
                damaged.append(_damaged(name, CorruptRecordError(f"{self._base}/{name}/meta.json",
                                                                 "is not the meta record of this trace")))
        return metas, damaged

    def _read_record(self, meta: JSONRecord, *, messages: bool, events: bool, goals: bool = True,
                     fields: TraceProjection | None = None) -> TraceRecord:
        trace_id = meta["trace_id"]
        directory = self._dir(trace_id)
        hot = self._hot.get(trace_id)
        goal_tree: JSONRecord | None = None
        if hot is not None:
            if goals:
                with self._lock(trace_id):
                    goal_tree = hot.tree.model_dump(mode="json")
        else:
            total = int(meta.get("total_messages") or 0)
            if os.path.exists(self._message_path(trace_id, total + 1)):
                # meta.json and goal.json are checkpoints; messages written after the last one are
                # counted by the cold view (rare: a trace being written right now by another process).
                view = self._cold_view(trace_id)
                if view is not None:
                    meta, goal_tree = view[0].model_dump(mode="json"), view[1].model_dump(mode="json")
            if goal_tree is None and goals:
                goal_tree = self._load_json(f"{directory}/goal.json")
        parsed, raw = self._read_raw_messages(f"{directory}/messages") if messages else ([], {})
        return TraceRecord(
            trace=meta if fields is None else project_meta(meta, fields), goal_tree=goal_tree if goals else None,
            messages=parsed,
            events=self._read_raw_events(self._events_path(trace_id), raw, parsed) if events else [],
            resource_usage=self._load_json(f"{directory}/{_SIDE_RECORDS['resource_usage']}"),
            tool_approvals=self._load_json(f"{directory}/{_SIDE_RECORDS['tool_approvals']}"),
        )

    def _read_into(self, meta: JSONRecord, builder: ColumnBuilder) -> TraceRecord:
        """`read_columns`' read of one trace: each message and event goes to `builder` as soon as it is parsed,
        while it is in the CPU's caches (after a whole trace of 10k messages, most of them are not: the columns
        then cost three times as much), and the parsed dicts are freed at once. Files named out of sequence
        order (not this store's) are read the usual way."""
        record = self._read_record(meta, messages=False, events=False)  # the meta (or its cold view), goals, side records
        trace_id, directory = record.trace_id, self._dir(record.trace_id)
        mark = builder.mark()
        try:
            raw = self._stream_messages(trace_id, f"{directory}/messages", builder) if builder.messages else {}
            if raw is None:  # not in sequence order by name: undo, then read the whole trace first
                builder.rollback(mark, trace_id)
                return builder.add_record(self._read_record(meta, messages=True, events=builder.events))
            if builder.events:
                path = self._events_path(trace_id)
                data = self._read_bytes(path)
                lines = data.split(b"\n") if data else []
                numbered = ((number, line) for number, line in enumerate(lines[:-1], start=1) if line and not line.isspace())

                def corrupt(number: int, exc: json.JSONDecodeError) -> Exception:
                    return CorruptRecordError(path, f"line {number} is not JSON ({exc.msg})")

                add = builder.add_event
                for event in iter_message_events(numbered, raw, _Announced(), corrupt):
                    add(trace_id, event)
        except BaseException:
            builder.rollback(mark, trace_id)
            raise
        builder.end_record()
        return record

    def _stream_messages(self, trace_id: str, directory: str, builder: ColumnBuilder) -> dict[int, bytes] | None:
        """Each message file of `directory` parsed and handed to `builder` in sequence order; the files' texts by
        sequence (what the events' splice needs), or None when the names are not in sequence order."""
        raw: dict[int, bytes] = {}
        add, parsed = builder.add_message, self._message_file
        try:
            with os.scandir(directory) as found:
                # `{trace_id}-{sequence:04d}.json`: shorter names first, then by name, is sequence order
                entries = sorted((e for e in found if e.name.endswith(".json") and not e.name.startswith(".")),
                                 key=lambda e: (len(e.name), e.name))
        except FileNotFoundError:
            return raw
        last = 0
        for entry in entries:
            read = parsed(entry.path)
            if read is None:
                continue
            data, message = read
            sequence = message.get("sequence", 0)
            if not isinstance(sequence, int) or sequence <= last:
                return None
            last = sequence
            add(trace_id, message)
            raw[sequence] = data
        return raw

    def _read_raw_messages(self, directory: str) -> tuple[list[JSONRecord], dict[int, bytes]]:
        # The hot loop of big frames: plain bytes and one open per file, nothing else.
        out: list[JSONRecord] = []
        raw: dict[int, bytes] = {}
        parsed = self._message_file
        try:
            entries = os.scandir(directory)
        except FileNotFoundError:
            return out, raw
        with entries:
            for entry in entries:
                name = entry.name
                # Names starting with '.' are temporary files of an in-flight write.
                if name.endswith(".json") and not name.startswith("."):
                    read = parsed(entry.path)
                    if read is None:
                        continue
                    data, message = read
                    out.append(message)
                    raw[message.get("sequence", 0)] = data
        out.sort(key=lambda m: m.get("sequence", 0))
        return out, raw

    def _message_file(self, path: str) -> tuple[bytes, JSONRecord] | None:
        """A message file's text and parsed record (None: the file went away meanwhile); invalid JSON is a
        `CorruptRecordError` naming the file."""
        data = self._read_bytes(path)
        if data is None:
            return None
        try:
            return data, loads_json(data)
        except json.JSONDecodeError as exc:
            raise CorruptRecordError(path, f"invalid JSON ({exc.msg} at position {exc.pos})") from None

    def _read_raw_events(self, path: str, raw: dict[int, bytes], messages: list[JSONRecord]) -> list[JSONRecord]:
        data = self._read_bytes(path)
        if not data:
            return []
        lines = data.split(b"\n")
        # The last element is b'' after a complete file, or a torn line left by a kill: skip it.
        numbered = ((number, line) for number, line in enumerate(lines[:-1], start=1) if line and not line.isspace())

        def corrupt(number: int, exc: json.JSONDecodeError) -> Exception:
            return CorruptRecordError(path, f"line {number} is not JSON ({exc.msg})")

        return share_message_events(numbered, raw, {m.get("sequence", 0): m for m in messages}, corrupt)

    def _all_traces(self) -> list[Trace]:
        return self._list_entries()[0]

    def _list_entries(self) -> tuple[list[Trace], list[DamagedEntry]]:
        out = []
        names, damaged = self._entry_names()
        for name in names:
            try:
                trace = self._read_trace(name)
            except CorruptRecordError as exc:
                damaged.append(_damaged(name, exc))
                continue
            if trace is not None:  # None: created, killed before meta.json (not damage)
                out.append(trace)
        return out, damaged

    def _entry_names(self) -> tuple[list[str], list[DamagedEntry]]:
        """Names of the trace directories under the base path, and the entries that cannot be traces."""
        names, damaged = [], []
        with os.scandir(self._base) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue  # temporary and lock files; never a trace
                try:
                    validate_trace_id(name)
                except InvalidIdError as exc:
                    damaged.append(DamagedEntry(name=name, path=entry.path, kind="foreign",
                                                detail=f"not a trace directory ({exc}); move it out of the store"))
                    continue
                if entry.is_symlink():
                    # Never followed: a link could point anywhere, including at another trace.
                    damaged.append(DamagedEntry(name=name, path=entry.path, kind="symlink",
                                                detail="a symbolic link, not a trace directory; replace it with the directory"))
                elif not entry.is_dir(follow_symlinks=False):
                    # A file named like a trace id sits where a trace should be; any other file
                    # (a recording, notes) was put beside the traces on purpose.
                    kind: DamageKind = "not_a_directory" if _FULL_ID.match(name) else "foreign"
                    damaged.append(DamagedEntry(name=name, path=entry.path, kind=kind,
                                                detail="a file where a trace directory should be; move it out of the store"
                                                if kind == "not_a_directory" else "a file, not a trace directory"))
                else:
                    names.append(name)
        return names, damaged


def _damaged(name: str, exc: CorruptRecordError) -> DamagedEntry:
    kind: DamageKind = "unreadable" if "cannot be read" in str(exc) else "corrupt"
    return DamagedEntry(name=name, path=str(exc.path), kind=kind, detail=str(exc))


def _close_all(fds: dict[str, int]) -> None:
    for fd in fds.values():
        os.close(fd)
    fds.clear()


def _flock(fd: int, trace_id: str, timeout: float) -> None:
    """Take an exclusive flock on `fd`, waiting up to `timeout` seconds; then name the holder."""
    assert fcntl is not None
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                record = os.pread(fd, _LOCK_RECORD, 0).decode(errors="replace").strip()
                holder = record.split(" ", 1)[1] if " " in record else "another process"
                raise TraceLockedError(trace_id, holder, timeout) from None
            # A write holds it for microseconds; sleeping here blocks only while another process writes.
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte or raise: `os.write` may write fewer (a full disk, a file-size limit)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, f"wrote 0 of {len(view)} bytes")
        view = view[written:]


def _pread(fd: int, size: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # Windows has no pread
    return os.read(fd, size)


def _parse_event(path: str, line: bytes, where: str) -> TraceEvent:
    try:
        return TraceEvent.model_validate_json(line)
    except ValidationError as exc:
        raise CorruptRecordError(path, f"{where} is not an event: {exc.errors()[0]['msg']}") from None


def _last_newline_end(fd: int, size: int) -> int:
    """Offset just past the last newline (0 if none): where complete lines end."""
    pos = size
    while pos > 0:
        step = min(_CHUNK, pos)
        pos -= step
        index = _pread(fd, step, pos).rfind(b"\n")
        if index >= 0:
            return pos + index + 1
    return 0


def _lines_backwards(fd: int, end: int) -> Iterator[bytes]:
    """Yield the non-empty lines before `end`, last first."""
    pos, rest = end, b""
    while pos > 0:
        step = min(_CHUNK, pos)
        pos -= step
        parts = (_pread(fd, step, pos) + rest).split(b"\n")
        rest = parts[0]
        for line in reversed(parts[1:]):
            if line.strip():
                yield line
    if rest.strip():
        yield rest


class _Announced(dict[int, JSONRecord]):
    """What a streamed read puts in a `message_added` event for its message: only the sequence (the message went
    to the columns already; the columns read nothing else of it)."""

    def __missing__(self, sequence: int) -> JSONRecord:
        return {"sequence": sequence}
