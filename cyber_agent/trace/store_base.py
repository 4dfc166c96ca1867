"""Store logic shared by every TraceStore: sequencing, totals, goal stats, events, recovery.

A concrete store implements the `_primitive` methods (read or write one record) and inherits
the protocol. Each instance keeps the write-side state of the traces it writes (`_Hot`: trace,
goal tree, last event id), so adding a message reads nothing. Every operation runs without
awaiting under one `threading.Lock` per trace, so coroutines of one loop, and loops in several
threads (the notebook bridge), never lose an update. One instance is the only writer of a
trace (one process per run); readers may be anywhere.

Message records are the source of truth; the trace and goal records are checkpoints of the
totals and stats derived from them. A message above the checkpointed `total_messages` is
adopted (counted) by every reader and, once, by the next writer; goal stats skip sequences at
or below `GoalTree.stats_sequence`. The goal tree is always written before the trace, so an
adopted message is never counted twice, whatever moment a crash hit.

The pure helpers and the updatable-field sets live in `store_rules.py`.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping, Sequence
from types import TracebackType
from contextlib import contextmanager
from typing import Any


from cyber_agent.errors import (
    ConflictError,
    CorruptRecordError,
    GoalError,
    InvalidUpdateError,
    MessageNotFoundError,
    StoreError,
    TraceNotFoundError,
)
from cyber_agent.trace.bulk import gc_paused
from cyber_agent.trace.events import (
    EVENT_TYPES,
    EventType,
    TraceEvent,
    encode_event,
    encode_json,
    message_added_payload,
)
from cyber_agent.trace.event_payloads import check_payload
from cyber_agent.trace.goal_models import Goal, GoalStats, GoalTree
from cyber_agent.trace.models import Message, Trace, utc_now
from cyber_agent.trace.record_fields import TraceProjection, dump_projected
from cyber_agent.trace.records import JSONRecord, TraceRecord
from cyber_agent.trace.store_listing import DamagedEntry, TraceListing, warn_damaged
from cyber_agent.trace.store_reads import BulkReads
from cyber_agent.trace.store_side import SideRecordStore
from cyber_agent.trace.store_rules import (
    _FINAL,
    _GOAL_FIELDS,
    _MESSAGE_FIELDS,
    _TRACE_DERIVED,
    _TRACE_FIELDS,
    _account,
    _assign,
    _check_counted_fields,
    _copy,
    _evented_sequence,
)
from cyber_agent.trace.trace_filter import TraceFilter
from cyber_agent.trace.trace_id import parse_message_id, validate_trace_id

__all__ = ["BaseTraceStore"]


class _Hot:
    """Write-side state of one trace: the live records and the bookkeeping of checkpoints."""

    __slots__ = ("flushed_at", "generation", "goals_dirty", "last_event_id", "trace", "tree", "unflushed")

    def __init__(self, trace: Trace, tree: GoalTree, last_event_id: int) -> None:
        self.trace = trace
        self.tree = tree
        self.last_event_id = last_event_id
        self.unflushed = 0
        self.goals_dirty = False
        self.flushed_at = time.monotonic()
        # The writer-lock generation this state matches (`_writing`): a newer one means another writer.
        self.generation = 0


_SCALARS = frozenset({str, int, float, bool, type(None), datetime})
"""Types of update values that are immutable: a stored record may hold them as given."""


def _check_fields(updates: Mapping[str, Any], allowed: frozenset[str] | set[str], what: str) -> None:
    bad = set(updates) - allowed
    if bad:
        raise InvalidUpdateError(f"cannot update {what} field(s) {sorted(bad)}; updatable: {sorted(allowed)}")


def _restated(tree: GoalTree, old: GoalTree) -> GoalTree:
    """A checked copy of `tree` replacing `old`: stats stay the store's (self_stats kept by goal id, cumulative recomputed)."""
    new = _copy(tree)
    new.check_structure()
    for goal in new.goals:
        previous = old.find(goal.id)
        goal.self_stats = previous.self_stats.model_copy() if previous else GoalStats()
    new.recompute_cumulative()
    new.stats_sequence = old.stats_sequence
    new.next_id = max([new.next_id, old.next_id] + [int(g.id) + 1 for g in new.goals if g.id.isdigit()])
    return new


def _warn_damaged(entries: Sequence[DamagedEntry]) -> None:
    warn_damaged(entries, stacklevel=4)


class _WriteScope:
    """`with store._writing(trace_id) as hot:` — a class, not a generator: a write's scope is on every hot path."""

    __slots__ = ("lock", "store", "taken", "trace_id")

    def __init__(self, store: BaseTraceStore, trace_id: str) -> None:
        self.store = store
        self.trace_id = trace_id
        self.lock = store._lock(trace_id)
        self.taken: list[Any] | None = None

    def __enter__(self) -> _Hot:
        self.lock.acquire()
        try:
            hot, self.taken = self.store._enter_write(self.trace_id)
        except BaseException:
            self.lock.release()
            raise
        return hot

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            self.store._end_write(self.trace_id, kind is not None, self.taken)
        finally:
            self.lock.release()


class _SideScope(_WriteScope):
    """`with store._writing_side(trace_id):` — the live state left as it is."""

    __slots__ = ()

    def __enter__(self) -> None:  # type: ignore[override]
        self.lock.acquire()
        try:
            self.taken = self.store._enter_side(self.trace_id)
        except BaseException:
            self.lock.release()
            raise


class BaseTraceStore(BulkReads, SideRecordStore, ABC):
    """TraceStore logic over abstract record primitives."""

    # Checkpoint the trace and goal records after this many adds or seconds (1 / 0: every add).
    _checkpoint_every: int = 1
    _checkpoint_interval: float = 0.0

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._hot: dict[str, _Hot] = {}

    # ---- primitives -------------------------------------------------------------------
    @abstractmethod
    def _trace_exists(self, trace_id: str) -> bool: ...
    @abstractmethod
    def _create_record(self, trace: Trace, tree: GoalTree) -> None: ...
    @abstractmethod
    def _read_trace(self, trace_id: str) -> Trace | None: ...
    @abstractmethod
    def _write_trace(self, trace: Trace) -> None: ...
    @abstractmethod
    def _read_goals(self, trace_id: str) -> GoalTree | None: ...
    @abstractmethod
    def _write_goals(self, trace_id: str, tree: GoalTree) -> None: ...
    @abstractmethod
    def _read_message(self, trace_id: str, sequence: int) -> Message | None: ...
    @abstractmethod
    def _write_message(self, trace_id: str, sequence: int, data: str) -> None: ...
    def _rewrite_message(self, trace_id: str, sequence: int, data: str) -> None:
        """Replace a stored message (`update_message`); a store that shares it with its event unshares it here."""
        self._write_message(trace_id, sequence, data)

    @abstractmethod
    def _read_all_messages(self, trace_id: str) -> list[Message]: ...
    @abstractmethod
    def _delete_message(self, trace_id: str, sequence: int) -> None: ...
    @abstractmethod
    def _append_event_line(self, trace_id: str, line: str) -> None: ...
    @abstractmethod
    def _read_events(self, trace_id: str, since_event_id: int) -> list[TraceEvent]: ...
    @abstractmethod
    def _all_traces(self) -> list[Trace]: ...

    # Bulk reads (`read_records`): JSON-mode records; a store overrides these to skip pydantic.
    def _list_entries(self) -> tuple[list[Trace], list[DamagedEntry]]:
        """Every readable trace as persisted, and the entries skipped as damaged (none in this default)."""
        return self._all_traces(), []

    def _record_metas(self, trace_ids: Collection[str] | None = None) -> tuple[list[JSONRecord], list[DamagedEntry]]:
        """Every trace's (or those of `trace_ids` that exist) id, parent and creation time, and the damaged entries.

        What selecting trees needs, read from the live objects: `_read_record` dumps the rest of
        the selected traces only (a whole dump of every trace made a 100k-trace read 5 s).
        """
        if trace_ids is None:
            traces, damaged = self._list_entries()
        else:
            traces, damaged = [], []
            for trace_id in trace_ids:
                hot = self._hot.get(trace_id)
                trace = hot.trace if hot is not None else self._read_trace(trace_id)
                if trace is not None:
                    traces.append(trace)
        return [{"trace_id": t.trace_id, "parent_trace_id": t.parent_trace_id, "created_at": t.created_at}
                for t in traces], damaged

    def _meta_and_tree(self, trace_id: str, *, goals: bool, fields: TraceProjection | None,
                       ) -> tuple[JSONRecord, JSONRecord | None]:
        """A trace's meta (projected to `fields`) and goal tree (None without `goals`) as a fresh reader sees them."""
        hot = self._hot.get(trace_id)
        if hot is not None:
            with self._lock(trace_id):
                trace, tree = hot.trace, hot.tree
                return (trace.model_dump(mode="json") if fields is None else dump_projected(trace, fields),
                        tree.model_dump(mode="json") if goals else None)
        view = self._cold_view(trace_id)
        if view is None:
            raise TraceNotFoundError(trace_id)  # gone since the listing: named as damaged by the reader
        return (view[0].model_dump(mode="json") if fields is None else dump_projected(view[0], fields),
                view[1].model_dump(mode="json") if goals else None)

    def _read_record(self, meta: JSONRecord, *, messages: bool, events: bool, goals: bool = True,
                     fields: TraceProjection | None = None) -> TraceRecord:
        """The record of the trace `meta` (from `_record_metas`) names."""
        trace_id = meta["trace_id"]
        trace, tree = self._meta_and_tree(trace_id, goals=goals, fields=fields)
        return TraceRecord(
            trace=trace, goal_tree=tree,
            messages=[m.model_dump(mode="json") for m in sorted(self._read_all_messages(trace_id), key=lambda m: m.sequence)]
            if messages else [],
            events=[e.model_dump(mode="json") for e in self._read_events(trace_id, 0)] if events else [],
            resource_usage=self._read_side_record(trace_id, "resource_usage"),
            tool_approvals=self._read_side_record(trace_id, "tool_approvals"),
        )

    def _repair(self, trace_id: str) -> tuple[int, int]:
        """Make a trace's records appendable after a crash; return (last event id, last evented sequence)."""
        events = self._read_events(trace_id, 0)
        evented = next((_evented_sequence(e.payload) for e in reversed(events) if e.type == "message_added"), 0)
        return (events[-1].event_id if events else 0), evented

    # Cross-process writers (a file store overrides these; one process cannot share memory).
    def _acquire_writer(self, trace_id: str) -> int | None:
        """Take the trace's writer lock, bump and return its previous generation (None: no other writer can exist)."""
        return None

    def _release_writer(self, trace_id: str, *, failed: bool) -> None:
        """Release what `_acquire_writer` took; `failed`: the write raised (a transactional store rolls back)."""

    def _writing(self, trace_id: str) -> _WriteScope:
        """Hold the trace's locks for one write; yield live state that matches the files."""
        return _WriteScope(self, trace_id)

    def _writing_side(self, trace_id: str) -> _SideScope:
        """Hold the trace's locks for a write that leaves the live state as it is (a side record, a message rewrite)."""
        return _SideScope(self, trace_id)

    def _enter_write(self, trace_id: str) -> tuple[_Hot, list[Any] | None]:
        """The start of a `_writing` scope, the trace's lock held: live state matching the files, deferred records written."""
        generation = self._acquire_writer(trace_id)
        taken: list[Any] | None = None
        try:
            hot = self._hot.get(trace_id)
            if hot is not None and generation is not None and hot.generation != generation:
                del self._hot[trace_id]  # another writer changed the files: re-read them under the lock
            hot = self._load_for_write(trace_id)
            if generation is not None:
                hot.generation = generation + 1
            taken = self._write_deferred(trace_id, hot)
        except BaseException:
            self._end_write(trace_id, True, taken)
            raise
        return hot, taken

    def _enter_side(self, trace_id: str) -> list[Any] | None:
        """The start of a `_writing_side` scope, the trace's lock held."""
        generation = self._acquire_writer(trace_id)
        try:
            hot = self._hot.get(trace_id)
            if hot is not None and generation is not None and hot.generation == generation:
                hot.generation = generation + 1
            return self._write_deferred(trace_id, None)
        except BaseException:
            self._end_write(trace_id, True, None)
            raise

    def _end_write(self, trace_id: str, failed: bool, taken: list[Any] | None) -> None:
        """Release the writer; deferred records the write took go back when it did not commit."""
        try:
            self._release_writer(trace_id, failed=failed)
        except BaseException:
            self._restore_deferred(trace_id, taken)
            raise
        if failed:
            self._restore_deferred(trace_id, taken)

    # Records a store writes with the trace's next write instead of in their own (SQLite: one
    # transaction fewer each); `sql_store.py:SQLTraceStore.defer_exchange` / `defer_event`.
    def _write_deferred(self, trace_id: str, hot: _Hot | None) -> list[Any] | None:
        """Write the trace's deferred records inside this write (events only when `hot`); return what was taken."""
        return None

    def _restore_deferred(self, trace_id: str, taken: list[Any] | None) -> None:
        """Put back what `_write_deferred` took for a write that did not commit."""

    # ---- state --------------------------------------------------------------------------
    def _lock(self, trace_id: str) -> threading.Lock:
        lock = self._locks.get(trace_id)
        if lock is None:
            lock = self._locks.setdefault(trace_id, threading.Lock())
        return lock

    def _orphans(self, trace: Trace) -> Iterator[Message]:
        """Messages persisted after the trace record was last checkpointed."""
        sequence = trace.total_messages + 1
        while (message := self._read_message(trace.trace_id, sequence)) is not None:
            yield message
            sequence += 1

    def _cold_view(self, trace_id: str) -> tuple[Trace, GoalTree] | None:
        """Trace and goal tree as persisted, with orphan messages counted (what a fresh reader sees)."""
        trace = self._read_trace(trace_id)
        if trace is None:
            return None
        tree = self._read_goals(trace_id) or GoalTree(mission=trace.task)
        for orphan in self._orphans(trace):
            _account(trace, tree, orphan)
        return trace, tree

    def _load_for_write(self, trace_id: str) -> _Hot:
        hot = self._hot.get(trace_id)
        if hot is not None:
            return hot
        trace = self._read_trace(trace_id)
        if trace is None:
            raise TraceNotFoundError(trace_id)
        tree = self._read_goals(trace_id) or GoalTree(mission=trace.task)
        last_event_id, evented = self._repair(trace_id)
        hot = _Hot(trace, tree, last_event_id)
        adopted = False
        for orphan in self._orphans(trace):
            affected = _account(trace, tree, orphan)
            adopted = True
            if orphan.sequence > evented:
                # Killed between the message write and its event: announce it now, exactly once.
                self._emit(hot, "message_added", message_added_payload(orphan.model_dump_json(), affected, recovered=True))
        if adopted:
            hot.goals_dirty = True
            self._checkpoint(hot)
        self._hot[trace_id] = hot
        return hot

    def _exists(self, trace_id: str) -> bool:
        return trace_id in self._hot or self._trace_exists(trace_id)

    def _require_exists(self, trace_id: str) -> None:
        if not self._exists(trace_id):
            raise TraceNotFoundError(trace_id)

    def _emit(self, hot: _Hot, event_type: str, payload_json: str) -> int:
        event_id = hot.last_event_id + 1
        try:
            self._append_event_line(hot.trace.trace_id, encode_event(event_id, hot.trace.trace_id, event_type, payload_json))
        except BaseException:
            # The live state may be ahead of the files now: the next write re-reads (and repairs) them.
            self._hot.pop(hot.trace.trace_id, None)
            raise
        hot.last_event_id = event_id
        return event_id

    def _checkpoint(self, hot: _Hot) -> None:
        if hot.goals_dirty:
            self._write_goals(hot.trace.trace_id, hot.tree)
            hot.goals_dirty = False
        self._write_trace(hot.trace)
        hot.unflushed = 0
        hot.flushed_at = time.monotonic()

    def _commit_tree(self, hot: _Hot, tree: GoalTree) -> None:
        """Persist a changed copy of the goal tree, then make it the live one (a failed write changes nothing)."""
        self._write_goals(hot.trace.trace_id, tree)
        hot.tree = tree
        hot.goals_dirty = False

    async def flush(self) -> None:
        """Checkpoint every trace this instance writes (readers reconcile anyway; this updates the files)."""
        for trace_id in list(self._hot):
            with self._writing(trace_id) as hot:  # a state another writer outdated is re-read, not written
                if hot.unflushed or hot.goals_dirty:
                    self._checkpoint(hot)

    # ---- traces -------------------------------------------------------------------------
    async def create_trace(self, trace: Trace, *, goal_tree: GoalTree | None = None) -> str:
        """Persist a new trace and its goal tree (empty when None) in one write; return its id.

        `goal_tree` is stored as `update_goal_tree` right after the create would store it (stats
        the store's, all zero), without a second write of the trace's records."""
        trace_id = validate_trace_id(trace.trace_id)
        nonzero = sorted(f for f in _TRACE_DERIVED | {"head_sequence"} if getattr(trace, f))
        if nonzero:
            raise InvalidUpdateError(f"a new trace has no messages; {nonzero} must be 0 (the store maintains them)")
        stored = Trace.model_validate_json(encode_json(trace, f"trace {trace_id!r}"))
        empty = GoalTree(mission=stored.task)
        tree = empty if goal_tree is None else _restated(goal_tree, empty)
        with self._lock(trace_id):
            if self._exists(trace_id):
                raise ConflictError(f"trace {trace_id!r} already exists; continue it instead of creating it")
            self._create_record(stored, tree)
            self._hot[trace_id] = _Hot(stored, tree, 0)
        return trace_id

    async def get_trace(self, trace_id: str) -> Trace | None:
        """Return the trace, or None when it does not exist."""
        validate_trace_id(trace_id)
        hot = self._hot.get(trace_id)
        if hot is not None:
            with self._lock(trace_id):
                return _copy(hot.trace)
        view = self._cold_view(trace_id)
        return None if view is None else view[0]

    async def require_trace(self, trace_id: str) -> Trace:
        """Return the trace or raise TraceNotFoundError."""
        trace = await self.get_trace(trace_id)
        if trace is None:
            raise TraceNotFoundError(trace_id)
        return trace

    async def update_trace(self, trace_id: str, **updates: Any) -> Trace:
        """Update trace fields; a status change appends `trace_status_changed`."""
        validate_trace_id(trace_id)
        _check_fields(updates, _TRACE_FIELDS, "trace")
        with self._writing(trace_id) as hot:
            return Trace.model_validate_json(self._update_trace_held(hot, trace_id, updates))

    async def end_trace(self, trace_id: str, updates: Mapping[str, Any], *,
                        goal: tuple[str, Mapping[str, Any]] | None = None) -> Trace:
        """End a run's trace in one write: `goal` (id, fields) as `update_goal`, then `updates` as
        `update_trace`, then, when the status is `completed`, a `trace_completed` event.

        The records are those of the three calls one after the other (same events, same order);
        a transactional store commits them together."""
        validate_trace_id(trace_id)
        _check_fields(updates, _TRACE_FIELDS, "trace")
        if goal is not None:
            _check_fields(goal[1], _GOAL_FIELDS, "goal")
        with self._writing(trace_id) as hot:
            if goal is not None:
                self._update_goal_held(hot, trace_id, goal[0], dict(goal[1]))
            trace = Trace.model_validate_json(self._update_trace_held(hot, trace_id, dict(updates)))
            if trace.status == "completed" and updates.get("status") == "completed":
                self._emit(hot, "trace_completed",
                           f'{{"trace_id":{encode_json(trace_id, "trace id")},"total_messages":{trace.total_messages}}}')
            return trace

    def _update_trace_held(self, hot: _Hot, trace_id: str, updates: dict[str, Any]) -> str:
        """`update_trace` inside a held write; return the stored trace's JSON."""
        old = hot.trace
        candidate = _assign(old, updates, f"trace {trace_id!r}")
        if not 0 <= candidate.head_sequence <= old.total_messages:
            raise InvalidUpdateError(f"head_sequence {candidate.head_sequence} is not a message of trace {trace_id!r} "
                                     f"(it has {old.total_messages}; 0 means no message)")
        if "updated_at" not in updates:
            candidate.updated_at = utc_now()
        if candidate.status != old.status and "completed_at" not in updates:
            candidate.completed_at = candidate.updated_at if candidate.status in _FINAL else None
        data = encode_json(candidate, f"update of trace {trace_id!r}")
        # The stored trace shares no object with the caller: re-read from our own JSON when a value
        # given may be shared (a dict, a list, a model); scalars are immutable, the copy is enough.
        hot.trace = candidate if all(type(v) in _SCALARS for v in updates.values()) else Trace.model_validate_json(data)
        try:
            self._checkpoint(hot)
        except BaseException:
            hot.trace = old  # not persisted: the update did not happen
            raise
        if candidate.status != old.status:
            status = encode_json({"trace_id": trace_id, "status": candidate.status, "previous": old.status}, "event")
            self._emit(hot, "trace_status_changed", status)
        return data

    async def list_traces(self, where: TraceFilter | None = None, /, **filters: Any) -> list[Trace]:
        """Newest first; every filter (`TraceFilter`, or its fields as keywords) is applied before `limit`.

        Damaged entries are skipped with a warning."""
        listing = await self.list_traces_report(TraceFilter.of(where, filters))
        _warn_damaged(listing.errors)
        return listing.traces

    async def list_traces_report(self, where: TraceFilter | None = None, /, **filters: Any) -> TraceListing:
        """Like `list_traces`, and every damaged or foreign entry the listing skipped (`TraceListing.errors`)."""
        where = TraceFilter.of(where, filters)
        limit = where.limit
        matched = []
        traces, damaged = self._list_entries()
        for trace in traces:
            hot = self._hot.get(trace.trace_id)
            if hot is not None:
                trace = hot.trace
            # Only totals and the head change without a checkpoint; every filtered field is current.
            if where.matches(trace):
                matched.append(trace)
        matched.sort(key=lambda t: (t.created_at, t.trace_id), reverse=True)
        out = []
        for trace in matched if limit is None else matched[:limit]:
            if trace.trace_id in self._hot:
                with self._lock(trace.trace_id):
                    out.append(_copy(self._hot[trace.trace_id].trace))
            else:
                try:
                    for orphan in self._orphans(trace):  # a record read just now: ours to update
                        _account(trace, GoalTree(), orphan)
                except CorruptRecordError as exc:
                    damaged.append(DamagedEntry(name=trace.trace_id, path=str(exc.path), kind="corrupt", detail=str(exc)))
                    continue
                out.append(trace)
        return TraceListing(traces=out, errors=damaged)

    def _record_location(self, meta: JSONRecord) -> str:
        """Where a trace's records live, for a damaged-entry report."""
        return f"{self!r}/{meta.get('trace_id')}"

    async def import_records(self, records: Sequence[TraceRecord], *, skip_existing: bool = False) -> list[str]:
        """Write whole traces read from another store or an export (`read_records`), ids, sequences,
        event ids and timestamps kept; return the ids written. A trace already here raises
        ConflictError (or is left as it is with `skip_existing`); nothing of a refused trace is written.
        """
        written: list[str] = []
        for record in records:
            trace = Trace.model_validate(record.trace)
            trace_id = validate_trace_id(trace.trace_id)
            tree = GoalTree.model_validate(record.goal_tree) if record.goal_tree else GoalTree(mission=trace.task)
            messages = sorted(record.messages, key=lambda m: int(m["sequence"]))
            if [int(m["sequence"]) for m in messages] != list(range(1, len(messages) + 1)):
                raise InvalidUpdateError(f"trace {trace_id!r}: message sequences must run 1..n to be imported")
            events = sorted(record.events, key=lambda e: int(e["event_id"]))
            with self._lock(trace_id):
                if self._exists(trace_id):
                    if skip_existing:
                        continue
                    raise ConflictError(f"trace {trace_id!r} already exists in {self!r}; import into another store "
                                        "or pass skip_existing=True")
                with self._importing(trace_id):
                    self._create_record(trace, tree)
                    for message in messages:
                        self._write_message(trace_id, int(message["sequence"]), encode_json(message, "message"))
                    self._import_events(trace_id, events, {int(m["sequence"]): m for m in messages})
                    for name, value in (("resource_usage", record.resource_usage), ("tool_approvals", record.tool_approvals)):
                        if value is not None:
                            self._write_side_record(trace_id, name, encode_json(value, name))
                    for exchange in record.exchanges:
                        self._append_exchange_line(trace_id, encode_json(exchange, "exchange"))
            written.append(trace_id)
        return written

    @contextmanager
    def _importing(self, trace_id: str) -> Iterator[None]:
        """Scope of one imported trace's writes (a transactional store makes it all or nothing)."""
        yield

    def _import_events(self, trace_id: str, events: Sequence[JSONRecord], messages: Mapping[int, JSONRecord]) -> None:
        """Persist imported events as they are (ids and times kept)."""
        for event in events:
            self._append_event_line(trace_id, encode_json(event, "event"))

    # ---- goals --------------------------------------------------------------------------
    async def get_goal_tree(self, trace_id: str) -> GoalTree | None:
        """Return the trace's goal tree (None when the trace does not exist)."""
        validate_trace_id(trace_id)
        hot = self._hot.get(trace_id)
        if hot is not None:
            with self._lock(trace_id):
                return _copy(hot.tree)
        view = self._cold_view(trace_id)
        return None if view is None else view[1]

    async def update_goal_tree(self, trace_id: str, tree: GoalTree) -> None:
        """Replace the goal tree; stats stay the store's (self_stats kept by goal id, cumulative recomputed)."""
        validate_trace_id(trace_id)
        with self._writing(trace_id) as hot:
            self._commit_tree(hot, _restated(tree, hot.tree))

    async def add_goal(self, trace_id: str, goal: Goal) -> None:
        """Insert a goal (its stats start at zero) and append `goal_added`."""
        validate_trace_id(trace_id)
        new = _copy(goal)
        new.self_stats, new.cumulative_stats = GoalStats(), GoalStats()
        with self._writing(trace_id) as hot:
            tree = _copy(hot.tree)
            tree.insert(new)
            self._commit_tree(hot, tree)
            self._emit(hot, "goal_added", f'{{"goal":{new.model_dump_json()}}}')

    async def update_goal(self, trace_id: str, goal_id: str, **updates: Any) -> list[Goal]:
        """Update a goal (status changes follow the tree's cascade rule); append `goal_updated`."""
        validate_trace_id(trace_id)
        _check_fields(updates, _GOAL_FIELDS, "goal")
        with self._writing(trace_id) as hot:
            return [_copy(g) for g in self._update_goal_held(hot, trace_id, goal_id, updates)]

    def _update_goal_held(self, hot: _Hot, trace_id: str, goal_id: str, updates: dict[str, Any]) -> list[Goal]:
        """`update_goal` inside a held write; return the changed goals (the live tree's: copy before handing out)."""
        tree = _copy(hot.tree)
        goal = tree.get(goal_id, trace_id)
        merged = _assign(goal, updates, f"goal {goal_id!r}")
        if "parent_id" in updates and merged.parent_id is not None:
            if tree.find(merged.parent_id) is None:
                raise GoalError(f"cannot move goal {goal_id!r} under {merged.parent_id!r}: no such goal")
            if any(g.id == goal_id for g in tree.ancestors(merged.parent_id)):
                raise GoalError(f"cannot move goal {goal_id!r} under its own descendant {merged.parent_id!r}")
        for field in updates:
            if field != "status":
                setattr(goal, field, getattr(merged, field))
        changed = tree.set_status(goal_id, merged.status, summary=merged.summary) if "status" in updates else [goal]
        if "parent_id" in updates:
            tree.recompute_cumulative()
        self._commit_tree(hot, tree)
        patch = encode_json({k: getattr(merged, k) for k in updates}, f"update of goal {goal_id!r}")
        affected = ",".join(g.model_dump_json() for g in changed)
        self._emit(hot, "goal_updated", f'{{"goal_id":{encode_json(goal_id, "goal id")},"patch":{patch},'
                                        f'"affected_goals":[{affected}]}}')
        return changed

    # ---- messages -----------------------------------------------------------------------
    async def add_message(self, message: Message) -> str:
        """Assign the next sequence, persist, update totals and goal stats, append `message_added`.

        The caller's message gets its `sequence` and `message_id`; the store keeps its own copy.
        """
        trace_id = message.trace_id
        if type(trace_id) is not str or trace_id not in self._hot:  # hot ids were validated already
            validate_trace_id(trace_id)
        _check_counted_fields(message)
        with self._writing(trace_id) as hot:
            self._add_message_held(hot, trace_id, message)
        return message.message_id

    async def add_messages(self, messages: Sequence[Message]) -> list[str]:
        """`add_message` for each of `messages` (all of one trace), in order, in ONE write: the same records as the
        calls one after the other, committed together by a transactional store (SQLite, PostgreSQL: one
        transaction instead of one each). A message's `parent_sequence` may name one added before it here."""
        if not messages:
            return []
        trace_id = messages[0].trace_id
        if type(trace_id) is not str or trace_id not in self._hot:
            validate_trace_id(trace_id)
        for message in messages:
            if message.trace_id != trace_id:
                raise InvalidUpdateError(f"add_messages takes messages of one trace: {message.trace_id!r} is not {trace_id!r}")
            _check_counted_fields(message)
        with self._writing(trace_id) as hot:
            for message in messages:
                self._add_message_held(hot, trace_id, message)
        return [message.message_id for message in messages]

    def _add_message_held(self, hot: _Hot, trace_id: str, message: Message) -> None:
        """The body of `add_message`, the trace's write open."""
        total = hot.trace.total_messages
        parent = message.parent_sequence
        if parent is not None and not (type(parent) is int and 0 < parent <= total):
            raise InvalidUpdateError(
                f"parent_sequence {parent!r} does not exist in trace {trace_id!r} (it has {total} messages)")
        previous = (message.sequence, message.message_id)
        message.assign(total + 1)
        try:
            data = encode_json(message, f"message of trace {trace_id!r}")
            self._write_message(trace_id, message.sequence, data)
        except BaseException:
            message.sequence, message.message_id = previous
            raise
        affected = _account(hot.trace, hot.tree, message, utc_now())
        hot.unflushed += 1
        hot.goals_dirty = hot.goals_dirty or bool(affected)
        try:
            self._emit(hot, "message_added", message_added_payload(data, affected))
        except BaseException:
            # All or nothing: without its event the message is undone (_emit dropped the counted
            # totals). A crash before the unlink leaves an orphan the next writer announces.
            self._delete_message(trace_id, message.sequence)
            message.sequence, message.message_id = previous
            raise
        if hot.unflushed >= self._checkpoint_every or time.monotonic() - hot.flushed_at >= self._checkpoint_interval:
            try:
                self._checkpoint(hot)
            except OSError:
                pass  # the add landed (file and event; readers count it); the next add checkpoints again

    async def get_message(self, message_id: str) -> Message | None:
        """Return the message, or None."""
        trace_id, sequence = parse_message_id(message_id)
        return self._read_message(trace_id, sequence)

    async def get_trace_messages(self, trace_id: str) -> list[Message]:
        """All messages of the trace in sequence order, every branch included."""
        validate_trace_id(trace_id)
        self._require_exists(trace_id)
        with gc_paused():
            return sorted(self._read_all_messages(trace_id), key=lambda m: m.sequence)

    async def get_main_path_messages(self, trace_id: str, head_sequence: int | None = None) -> list[Message]:
        """Messages from the first one to `head_sequence` (default: the trace's head) along `parent_sequence`."""
        validate_trace_id(trace_id)
        if head_sequence is None:
            trace = await self.get_trace(trace_id)
            if trace is None:
                raise TraceNotFoundError(trace_id)
            head_sequence = trace.head_sequence
        else:
            self._require_exists(trace_id)
        path: list[Message] = []
        sequence: int | None = head_sequence or None
        with gc_paused():
            while sequence is not None:
                message = self._read_message(trace_id, sequence)
                if message is None:
                    raise MessageNotFoundError(f"{trace_id}-{sequence:04d}")
                parent = message.parent_sequence
                if parent is not None and not 0 < parent < sequence:
                    # Parents always precede their children; anything else would loop or dangle.
                    raise StoreError(f"trace {trace_id!r}: message {sequence} has invalid parent_sequence {parent}")
                path.append(message)
                sequence = parent
        path.reverse()
        return path

    async def get_messages_by_goal(self, trace_id: str, goal_id: str) -> list[Message]:
        """Messages recorded under a goal, in sequence order."""
        return [m for m in await self.get_trace_messages(trace_id) if m.goal_id == goal_id]

    async def update_message(self, message_id: str, **updates: Any) -> Message:
        """Update fields of a message other than its identity, tree position and counted numbers."""
        trace_id, sequence = parse_message_id(message_id)
        bad = set(updates) - _MESSAGE_FIELDS
        if bad:
            raise InvalidUpdateError(f"cannot update message field(s) {sorted(bad)}; updatable: {sorted(_MESSAGE_FIELDS)}")
        with self._writing_side(trace_id):
            message = self._read_message(trace_id, sequence)
            if message is None:
                raise MessageNotFoundError(message_id)
            updated = _assign(message, updates, f"message {message_id!r}")
            data = encode_json(updated, f"update of message {message_id!r}")
            self._rewrite_message(trace_id, sequence, data)
            return Message.model_validate_json(data)

    # ---- events -------------------------------------------------------------------------
    @staticmethod
    def _event_json(trace_id: str, event_type: EventType, payload: dict[str, Any]) -> str:
        """An event's payload checked and encoded, before any lock (`append_event` and every `defer_event`): the
        JSON is persisted as given; its model (`event_payloads.py:PAYLOAD_MODELS`) only checks it."""
        validate_trace_id(trace_id)
        if event_type not in EVENT_TYPES:
            raise InvalidUpdateError(f"unknown event type {event_type!r}; known: {sorted(EVENT_TYPES)}")
        if not isinstance(payload, Mapping):
            raise InvalidUpdateError(f"event payload must be a mapping, got {type(payload).__name__}")
        payload_json = encode_json(dict(payload), f"{event_type} payload")
        check_payload(event_type, payload_json)
        return payload_json

    async def append_event(self, trace_id: str, event_type: EventType, payload: dict[str, Any]) -> int:
        """Append an event whose payload fits its model (`event_payloads.py:PAYLOAD_MODELS`); return its id."""
        payload_json = self._event_json(trace_id, event_type, payload)
        with self._writing(trace_id) as hot:
            return self._emit(hot, event_type, payload_json)

    async def get_events(self, trace_id: str, since_event_id: int = 0) -> list[TraceEvent]:
        """Events with id greater than `since_event_id`, in order."""
        validate_trace_id(trace_id)
        self._require_exists(trace_id)
        return self._read_events(trace_id, since_event_id)
