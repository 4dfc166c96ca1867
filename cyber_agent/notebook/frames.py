"""Traces as pandas frames (SPEC J5): `to_frames(store_or_path) -> TraceFrames`.

Column names and dtypes are stable (they are the schemas below, also for empty frames):
strings are `string`, counts `int64` (`Int64` when a value may be missing), money and
durations `float64`, flags `bool` (`boolean` when unknown is possible), timestamps
`datetime64[ns, UTC]`. Nested data (a trace's context, an event payload, tool arguments,
report lists) stays a Python dict or list in an `object` column: `pd.json_normalize` opens it.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, fields
from itertools import compress, repeat
from operator import is_
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cyber_agent.errors import TraceNotFoundError
from cyber_agent.notebook import frame_rows as rows
from cyber_agent.notebook import protocol_rows
from cyber_agent.notebook.bridge import run_sync
from cyber_agent.notebook.display import RichDisplay, html_table
from cyber_agent.notebook.records import (
    StoreSource,
    TraceRecord,
    open_source,
    read_records,
)
from cyber_agent.notebook.columns import SCHEMAS, SHAPE, TS, F, I, NI, S
from cyber_agent.notebook.frame_shape import shape_columns
from cyber_agent.trace.bulk import gc_paused
from cyber_agent.trace.columnar import ColumnarRead, arrow_available, columns_of_records
from cyber_agent.trace.store_listing import warn_damaged

__all__ = ["SCHEMAS", "TraceFrames", "ato_frames", "frames_from_records", "store_origin", "to_frames"]



def _frame(name: str, columns: dict[str, list[Any]]) -> pd.DataFrame:
    # From arrays rather than Series: no index per column to build and then align.
    return pd.DataFrame({column: _column(columns[column], dtype) for column, dtype in SCHEMAS[name].items()}, copy=False)


_STRING = pd.StringDtype()  # what dtype "string" means here (python storage unless pyarrow is the default)


_EMPTY: dict[str, Any] = {}


def _column(values: list[Any], dtype: str) -> Any:
    """The array of a column of `dtype`: always that of `pd.Series(values, dtype=dtype)`, mostly built faster."""
    if not values:  # most columns of the protocol frames: a copy of one empty array (pandas builds one in ~0.1 ms)
        empty = _EMPTY.get(dtype)
        if empty is None:
            empty = _EMPTY[dtype] = pd.Series([], dtype=dtype).array
        return empty.copy()
    if dtype == TS:
        return pd.to_datetime(pd.Series(values, dtype=object), utc=True, format="ISO8601").astype(TS).array
    fast = _fast_array(values, dtype)
    return pd.Series(values, dtype=dtype).array if fast is None else fast


def _fast_array(values: list[Any], dtype: str) -> Any:
    """The array of `pd.Series(values, dtype=dtype)` built in fewer passes, or None to leave it to pandas.

    pandas infers and checks every value of a list again for each dtype (a None in a string column
    is especially slow), and on 100k rows each pass over values scattered through the heap costs.
    Plain data takes one C pass here: `array` reads ints (floats) into int64 (float64) and refuses
    anything else, a masked `Int64` or a float column with gaps scatters the values that are not
    None, and `StringArray` only checks that it holds strings and None. Anything else (other types,
    values out of range) returns None and goes through pandas.
    """
    if dtype == S:
        if _STRING.storage == "pyarrow":
            try:
                import pyarrow as pa
            except ImportError:  # pandas holds its own reference; the columnar path's absence is not this one's
                return None
            try:  # what pandas' own conversion does, without its checks of each value in Python
                return pd.arrays.ArrowStringArray(pa.array(values, pa.large_string(), from_pandas=True))
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                return None
        if _STRING.storage != "python":
            return None
        try:
            return pd.arrays.StringArray(np.fromiter(values, dtype=object, count=len(values)))
        except (TypeError, ValueError):
            return None
    if dtype not in (I, F, NI):
        return None
    code, numpy_type = ("d", np.float64) if dtype == F else ("q", np.int64)
    try:
        if dtype == I:
            return np.array(array(code, values), dtype=numpy_type)
        mask = np.fromiter(map(is_, values, repeat(None)), dtype=bool, count=len(values))
        if not mask.any():
            data = np.array(array(code, values), dtype=numpy_type)
        else:
            data = np.zeros(len(values), dtype=numpy_type) if dtype == NI else np.full(len(values), np.nan)
            data[~mask] = np.frombuffer(array(code, compress(values, ~mask)), dtype=numpy_type)
    except (TypeError, ValueError, OverflowError):
        return None
    return pd.arrays.IntegerArray(data, mask) if dtype == NI else data


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)
class TraceFrames(RichDisplay):
    """Every table of a set of traces; rows of child traces follow their parents."""

    traces: pd.DataFrame
    """One row per trace (meta, lineage, totals, context)."""
    messages: pd.DataFrame
    """One row per message of every branch (`on_main_path` marks the current path)."""
    tool_calls: pd.DataFrame
    """One row per tool call, joined to its result message."""
    goals: pd.DataFrame
    """One row per goal, in plan order."""
    events: pd.DataFrame
    """One row per persisted event."""
    usage: pd.DataFrame
    """One row per trace: LLM calls, tool calls, tokens, cost, duration."""
    reports: pd.DataFrame
    """Recursive mode: one row per TaskBrief/TaskReport, with the parent's review (empty for legacy)."""
    validations: pd.DataFrame
    """Recursive mode: one row per criterion a Validator judged (empty for legacy)."""
    verdicts: pd.DataFrame
    """Recursive mode: one row per validation, its verdict and criteria counted (empty for legacy)."""
    claims: pd.DataFrame
    """Recursive mode: one row per claim an evidence check judged (`claim_index` empty for a whole-report signal)."""

    @property
    def roots(self) -> list[str]:
        """Ids of the root traces, in creation order."""
        roots = self.traces[self.traces["parent_trace_id"].isna()]
        ids: list[str] = roots.sort_values(["created_at", "trace_id"])["trace_id"].tolist()
        return ids

    def tree(self, trace_id: str) -> TraceFrames:
        """The frames restricted to a trace and its descendants."""
        parents = dict(zip(self.traces["trace_id"], self.traces["parent_trace_id"]))
        if trace_id not in parents:
            raise TraceNotFoundError(trace_id)
        children: dict[str, list[str]] = {}
        for child, parent in parents.items():
            if isinstance(parent, str):
                children.setdefault(parent, []).append(child)
        ids, stack = set(), [trace_id]
        while stack:
            current = stack.pop()
            if current not in ids:
                ids.add(current)
                stack.extend(children.get(current, []))
        parts = {}
        for f in fields(self):
            frame = getattr(self, f.name)
            parts[f.name] = frame[frame["trace_id"].isin(ids)].reset_index(drop=True)
        return TraceFrames(**parts)

    @classmethod
    def concat(cls, parts: Sequence[TraceFrames]) -> TraceFrames:
        """Stack frames of several stores or exports (e.g. one per export file)."""
        if not parts:
            return frames_from_records([])
        return cls(**{
            f.name: pd.concat([getattr(p, f.name) for p in parts], ignore_index=True) for f in fields(cls)
        })

    def to_parquet(self, path: str | os.PathLike[str]) -> Path:
        """Write every frame to the folder `path`, one Parquet file each (needs pyarrow; see `parquet.py`)."""
        from cyber_agent.notebook.parquet import write_parquet

        return write_parquet(self, path)

    @classmethod
    def read_parquet(cls, path: str | os.PathLike[str]) -> TraceFrames:
        """Read a folder written by `to_parquet` (the same frames, the `SCHEMAS` dtypes)."""
        from cyber_agent.notebook.parquet import read_parquet

        return read_parquet(path)

    def counts(self) -> dict[str, int]:
        """Rows per frame."""
        return {f.name: len(getattr(self, f.name)) for f in fields(self)}

    def __repr__(self) -> str:
        return "TraceFrames(" + ", ".join(f"{k}={v}" for k, v in self.counts().items()) + ")"

    def to_text(self) -> str:
        """Frame names with their row counts and columns."""
        lines = [repr(self)]
        for name, count in self.counts().items():
            lines.append(f"  .{name:<12} {count:>7} rows  {', '.join(SCHEMAS[name])}")
        return "\n".join(lines)

    def to_html(self) -> str:
        """A table of the frames, their sizes and columns."""
        body = [(f".{name}", count, ", ".join(SCHEMAS[name])) for name, count in self.counts().items()]
        return html_table(body, ["frame", "rows", "columns"], caption=f"TraceFrames — {len(self.traces)} traces")


def frames_from_records(
    records: Sequence[TraceRecord], *, with_messages: bool = True, tables: rows.MessageTables | None = None,
    event_columns: rows.Columns | None = None, origin: str | None = None,
) -> TraceFrames:
    """Build the frames from trace records (pure; no store access): the records path.

    `tables` and `event_columns` replace what the records' messages and events would give; `origin`
    is the store URL or export path the records came from (the `provenance` column of native traces).
    `to_frames` takes the columnar path (`columnar.py`); this one is its reference (the frames are equal).
    """
    if tables is None:
        tables = rows.message_and_call_rows(records)
    tool_names = {r.trace_id: _tool_names(r.messages) for r in records} if with_messages else None
    return _frames(records, tables.role_counts if with_messages else None,
                   tables.refusals if with_messages else None, tool_names, origin,
                   messages=_frame("messages", tables.messages), tool_calls=_frame("tool_calls", tables.tool_calls),
                   events=_frame("events", event_columns if event_columns is not None
                                 else rows.event_rows(records, list(SCHEMAS["events"]))))


def _tool_names(messages: Sequence[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, dict):
            calls = content.get("tool_calls") or ()
            joined = ",".join([c.get("name", "") for c in calls])  # as the stored `tool_call_names` joins them
            if joined:
                names.extend(joined.split(","))
    return names


_SHAPE_NAMES = frozenset(column.name for column in SHAPE)


def _frames(records: Sequence[TraceRecord], counts: Sequence[tuple[int, int, int, int]] | None,
            refusals: Sequence[str | None] | None, tool_names: dict[str, list[str]] | None, origin: str | None, *,
            messages: pd.DataFrame, tool_calls: pd.DataFrame, events: pd.DataFrame) -> TraceFrames:
    """The frames of `records` around their messages, tool-calls and events frames (both paths end here)."""
    index = rows.TreeIndex(records)
    shape = shape_columns(records, [c[0] for c in counts] if counts is not None else None, tool_names)

    def own(name: str) -> list[str]:
        return [column for column in SCHEMAS[name] if column not in _SHAPE_NAMES]

    traces = rows.trace_rows(records, index, own("traces"), refusals, origin)
    usage = rows.usage_rows(records, index, own("usage"), counts)
    return TraceFrames(
        traces=_frame("traces", {**traces, **shape}),
        messages=messages,
        tool_calls=tool_calls,
        goals=_frame("goals", rows.goal_rows(records, list(SCHEMAS["goals"]))),
        events=events,
        usage=_frame("usage", {**usage, **shape}),
        reports=_frame("reports", protocol_rows.report_rows(records, index, list(SCHEMAS["reports"]))),
        validations=_frame("validations", protocol_rows.validation_rows(records, list(SCHEMAS["validations"]))),
        verdicts=_frame("verdicts", protocol_rows.verdict_rows(records, list(SCHEMAS["verdicts"]))),
        claims=_frame("claims", protocol_rows.claim_rows(records, list(SCHEMAS["claims"]))),
    )


def frames_from_columns(records: Sequence[TraceRecord], read: ColumnarRead, *, with_messages: bool = True,
                        origin: str | None = None) -> TraceFrames:
    """Build the frames from records read without messages and events, and their columnar read (the columnar path)."""
    from cyber_agent.notebook.columnar import columnar_frames, events_frame

    built = columnar_frames(records, read)
    tables = built.tables()
    return _frames(records, tables.role_counts if with_messages else None, tables.refusals if with_messages else None,
                   built.tool_names() if with_messages else None, origin,
                   messages=built.messages(), tool_calls=built.tool_calls(), events=events_frame(read))


async def ato_frames(
    source: StoreSource, root_ids: Sequence[str] | str | None = None, *, messages: bool = True, events: bool = True
) -> TraceFrames:
    """Load the trees under `root_ids` (every trace when None) from a store, directory or export.

    The columnar path: the store reads the messages and events as Arrow columns
    (`cyber_agent/trace/protocols.py:TraceReader.read_columns`); an export, or any reader without
    that method, gives records whose columns are built here. Without pyarrow, the records path.
    """
    if isinstance(root_ids, str):
        root_ids = [root_ids]
    store = open_source(source)
    origin = store_origin(store)
    with gc_paused():  # each collection would walk every record loaded so far
        if not arrow_available():
            records = await read_records(store, root_ids, messages=messages, events=events)
            return frames_from_records(records, with_messages=messages, origin=origin)
        read_columns = getattr(store, "read_columns", None)
        if read_columns is not None:
            read: ColumnarRead = read_columns(root_ids, messages=messages, events=events)
            warn_damaged(read.damaged)  # the damaged traces are left out of every frame, and named
        else:
            read = columns_of_records(await read_records(store, root_ids, messages=messages, events=events),
                                      messages=messages, events=events)
        records = read.records
        frames = frames_from_columns(records, read, with_messages=messages, origin=origin)
        # Freed here by reference counting, so the collection owed on leaving the pause only
        # walks what the frames keep (payload and argument dicts), not every parsed record.
        del records, read
    return frames


def store_origin(store: object) -> str:
    """What a native trace's `provenance` column says: the store URL, the export file, or `memory:`."""
    from cyber_agent.trace.store_url import store_url_of

    url = store_url_of(store)
    if url is not None:
        return url
    source = getattr(store, "source", None)  # a ReadOnlyTraceStore over an export names its file
    return str(source) if isinstance(source, str) else "memory:"


def to_frames(
    source: StoreSource | TraceFrames, root_ids: Sequence[str] | str | None = None, *, messages: bool = True,
    events: bool = True,
) -> TraceFrames:
    """Load traces into pandas frames; nothing runs (sync twin of `ato_frames`)."""
    if isinstance(source, TraceFrames):
        if root_ids is None:
            return source
        ids = [root_ids] if isinstance(root_ids, str) else list(root_ids)
        return TraceFrames.concat([source.tree(r) for r in ids])
    return run_sync(ato_frames(source, root_ids, messages=messages, events=events))
