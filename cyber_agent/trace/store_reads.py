"""The bulk reads every store shares (`read_records`, `read_columns`), over a store's per-trace record reads.

`BaseTraceStore` inherits them; a store supplies `_record_metas` (each trace's id, parent and
creation time at least: what selecting the trees needs), `_read_record` (the rest of one trace,
projected when asked), `_record_location` and `_read_exchange_lines` (the SQL stores override `read_columns` with SQL,
`cyber_agent/trace/sql_store.py:SQLTraceStore.read_columns`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence

from cyber_agent.errors import CorruptRecordError, InvalidUpdateError, TraceNotFoundError
from cyber_agent.trace.bulk import gc_paused
from cyber_agent.trace.columnar import ColumnarRead, ColumnBuilder
from cyber_agent.trace.exchange_log import decode_exchange
from cyber_agent.trace.record_fields import TraceProjection, trace_projection
from cyber_agent.trace.records import JSONRecord, TraceRecord, select_trees
from cyber_agent.trace.store_listing import DamagedEntry, damaged_record, warn_damaged
from cyber_agent.trace.trace_id import validate_trace_id

__all__ = ["BulkReads"]


class BulkReads:
    """`read_records` and `read_columns` of a store (a mixin of `BaseTraceStore`)."""

    def _record_metas(self, trace_ids: Collection[str] | None = None) -> tuple[list[JSONRecord], list[DamagedEntry]]:
        raise NotImplementedError  # pragma: no cover - BaseTraceStore supplies it

    def _read_record(self, meta: JSONRecord, *, messages: bool, events: bool, goals: bool = True,
                     fields: TraceProjection | None = None) -> TraceRecord:
        raise NotImplementedError  # pragma: no cover - BaseTraceStore supplies it

    def _record_location(self, meta: JSONRecord) -> str:
        raise NotImplementedError  # pragma: no cover - BaseTraceStore supplies it

    def _read_exchange_lines(self, trace_id: str) -> list[str]:
        raise NotImplementedError  # pragma: no cover - BaseTraceStore supplies it

    async def read_records(
        self, root_ids: Sequence[str] | None = None, *, messages: bool = True, events: bool = True,
        exchanges: bool = False, goals: bool = True, fields: Collection[str] | None = None, subtrees: bool = True,
    ) -> list[TraceRecord]:
        """Every trace of the trees under `root_ids` (all traces when None) as JSON records, parents first
        (with `exchanges`, each with its recorded model exchanges: what a copy needs to fork there).

        `goals=False` leaves `goal_tree` None; `fields` keeps only those `Trace` fields (dotted paths
        into them, `cyber_agent/trace/record_fields.py`) in each `trace`; `subtrees=False` reads the
        traces named in `root_ids` only, in that order. The trees are selected from the traces' ids,
        parents and creation times before anything else of a trace is read.
        """
        records, damaged = self._read_selected(root_ids, messages=messages, events=events, goals=goals,
                                               fields=fields, subtrees=subtrees)
        warn_damaged(damaged, stacklevel=3)
        if exchanges:
            records = [dataclasses.replace(r, exchanges=[decode_exchange(line, r.trace_id, i) for i, line in
                                                         enumerate(self._read_exchange_lines(r.trace_id))]) for r in records]
        return records

    def _read_selected(self, root_ids: Sequence[str] | None, *, messages: bool, events: bool, goals: bool = True,
                       fields: Collection[str] | None = None, subtrees: bool = True,
                       each: Callable[[TraceRecord], TraceRecord] | None = None,
                       read: Callable[[JSONRecord], TraceRecord] | None = None,
                       ) -> tuple[list[TraceRecord], list[DamagedEntry]]:
        """The records of `read_records` (each passed through `each` as it is read; `read(meta)` instead of
        `_read_record` when given) and the damaged entries."""
        if isinstance(root_ids, str):
            raise InvalidUpdateError(f"root_ids must be a sequence of trace ids, got the string {root_ids!r}")
        for root_id in root_ids or ():
            validate_trace_id(root_id)
        projection = trace_projection(fields) if fields is not None else None
        with gc_paused():
            if root_ids is not None and not subtrees:
                wanted = list(dict.fromkeys(root_ids))
                metas, damaged = self._record_metas(wanted)
                by_id = {m["trace_id"]: m for m in metas}
                named = {d.name for d in damaged}
                for trace_id in wanted:
                    if trace_id not in by_id and trace_id not in named:
                        raise TraceNotFoundError(trace_id)
                selected = [by_id[t] for t in wanted if t in by_id]
            else:
                metas, damaged = self._record_metas()
                selected = select_trees(metas, root_ids)
            records = []
            for meta in selected:  # a trace whose records cannot be read is skipped and named
                try:
                    record = (self._read_record(meta, messages=messages, events=events, goals=goals, fields=projection)
                              if read is None else read(meta))
                except (CorruptRecordError, ValueError, KeyError, TypeError) as exc:
                    damaged.append(damaged_record(str(meta.get("trace_id")), self._record_location(meta), exc))
                    continue
                records.append(record if each is None else each(record))
        return records, damaged

    def read_columns(self, root_ids: Sequence[str] | None = None, *, messages: bool = True,
                     events: bool = True) -> ColumnarRead:
        """`read_records`' trees with their messages and events as columns (`cyber_agent/trace/columnar.py`): each
        trace's parsed messages are appended to the columns and freed as it is read; damaged traces are named."""
        builder = ColumnBuilder(messages=messages, events=events)
        records, damaged = self._read_selected(root_ids, messages=messages, events=events,
                                               read=lambda meta: self._read_into(meta, builder))
        return builder.build(records, damaged)

    def _read_into(self, meta: JSONRecord, builder: ColumnBuilder) -> TraceRecord:
        """One trace's record without its messages and events, which go to `builder` (a store that parses them
        one at a time hands each over as it is parsed: the file store)."""
        return builder.add_record(self._read_record(meta, messages=builder.messages, events=builder.events))
