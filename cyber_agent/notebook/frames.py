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
from cyber_agent.notebook.sql_frames import sql_dialect, sql_event_rows, sql_message_tables
from cyber_agent.trace.bulk import gc_paused

__all__ = ["SCHEMAS", "TraceFrames", "ato_frames", "frames_from_records", "store_origin", "to_frames"]

TS = "datetime64[ns, UTC]"
S, I, NI, F, B, NB, O = "string", "int64", "Int64", "float64", "bool", "boolean", "object"

SCHEMAS: dict[str, dict[str, str]] = {
    "traces": {
        "trace_id": S, "root_trace_id": S, "parent_trace_id": S, "parent_goal_id": S, "depth": I, "position": I,
        "label": S, "role": S, "agent_type": S, "agent_mode": S, "created_by_tool": S, "is_validator": B,
        "validation_scope": S, "mode": S, "status": S, "task": S, "model": S, "name": S, "total_messages": I,
        "total_prompt_tokens": I, "total_completion_tokens": I, "total_cached_tokens": I, "total_tokens": I,
        "total_cost": F, "head_sequence": I, "current_goal_id": S, "result_summary": S, "error_message": S,
        "refusal": S, "created_at": TS, "updated_at": TS, "completed_at": TS, "duration_seconds": F, "context": O,
        "protocol": O, "root_setup": O, "resource_usage": O, "source": S, "provenance": S, "source_ids": O,
        "missing": S,
    },
    "messages": {
        "trace_id": S, "message_id": S, "sequence": I, "message_role": S, "goal_id": S, "parent_sequence": NI,
        "branch": S,
        "on_main_path": B, "text": S, "n_tool_calls": I, "tool_call_names": S, "tool_call_id": S, "tool_name": S,
        "is_error": NB, "refused": S, "description": S, "prompt_tokens": I, "completion_tokens": I, "cached_tokens": I,
        "total_tokens": I, "cost": F, "duration_ms": F, "model": S, "usage_estimated": B, "cost_estimated": B,
        "cost_unpriced": B, "truncated": B, "summarized": B, "created_at": TS,
    },
    "tool_calls": {
        "trace_id": S, "message_id": S, "sequence": I, "call_index": I, "call_id": S, "tool_name": S,
        "arguments": O, "result_sequence": NI, "is_error": NB, "refused": S, "truncated": NB, "summarized": NB,
        "result_chars": NI, "duration_ms": F, "created_at": TS,
    },
    "goals": {
        "trace_id": S, "goal_id": S, "parent_goal_id": S, "depth": I, "position": I, "description": S, "reason": S,
        "type": S, "status": S, "trace_status": S, "effective_status": S, "summary": S, "n_sub_traces": I, "sub_trace_ids": O, "self_messages": I,
        "self_tokens": I, "self_cost": F, "cumulative_messages": I, "cumulative_tokens": I, "cumulative_cost": F,
        "is_current": B, "created_at": TS, "completed_at": TS,
    },
    "events": {
        "trace_id": S, "event_id": I, "type": S, "created_at": TS, "goal_id": S, "message_sequence": NI,
        "sub_trace_id": S, "status": S, "payload": O,
    },
    "usage": {
        "trace_id": S, "root_trace_id": S, "parent_trace_id": S, "depth": I, "role": S, "label": S, "status": S,
        "llm_calls": NI, "tool_calls": NI, "total_prompt_tokens": I, "total_completion_tokens": I,
        "total_cached_tokens": I, "total_tokens": I, "total_cost": F, "estimated_calls": NI, "unpriced_calls": NI,
        "duration_seconds": F,
    },
    "reports": {
        "trace_id": S, "parent_trace_id": S, "root_trace_id": S, "depth": I, "role": S, "objective": S, "brief": O,
        "outcome": S, "summary": S, "outputs": O, "evidence": O, "open_issues": O, "artifacts": O,
        "submitted_by": S, "review_decision": S, "review_feedback": S,
    },
    "validations": {
        "trace_id": S, "validator_trace_id": S, "validation_index": I, "scope": S, "verdict": S, "summary": S,
        "criterion_index": NI, "criterion": S, "criterion_verdict": S, "criterion_evidence": S, "created_at": TS,
    },
    "verdicts": {
        "trace_id": S, "validator_trace_id": S, "validation_index": I, "scope": S, "verdict": S, "summary": S,
        "criteria": I, "passed": I, "failed": I, "unknown": I, "created_at": TS,
    },
}
"""Column name -> dtype of every frame of `TraceFrames`."""


def _frame(name: str, columns: dict[str, list[Any]]) -> pd.DataFrame:
    # From arrays rather than Series: no index per column to build and then align.
    return pd.DataFrame({column: _column(columns[column], dtype) for column, dtype in SCHEMAS[name].items()}, copy=False)


_STRING = pd.StringDtype()  # what dtype "string" means here (python storage unless pyarrow is the default)


def _column(values: list[Any], dtype: str) -> Any:
    """The array of a column of `dtype`: always that of `pd.Series(values, dtype=dtype)`, mostly built faster."""
    if dtype == TS:
        if not values:
            return pd.array([], dtype=TS)
        return pd.to_datetime(pd.Series(values, dtype=object), utc=True, format="ISO8601").astype(TS).array
    fast = _fast_array(values, dtype) if values else None
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

    @property
    def roots(self) -> list[str]:
        """Ids of the root traces, in creation order."""
        roots = self.traces[self.traces["parent_trace_id"].isna()]
        return roots.sort_values(["created_at", "trace_id"])["trace_id"].tolist()

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
    """Build the frames from trace records (pure; no store access).

    `tables` and `event_columns` replace what the records' messages and events would give (the
    SQLite store reads them with SQL, `cyber_agent/notebook/sql_frames.py`); `origin` is the store
    URL or export path the records came from (the `provenance` column of native traces).
    """
    index = rows.TreeIndex(records)
    if tables is None:
        tables = rows.message_and_call_rows(records)
    counts = tables.role_counts if with_messages else None
    return TraceFrames(
        traces=_frame("traces", rows.trace_rows(records, index, list(SCHEMAS["traces"]),
                                                tables.refusals if with_messages else None, origin)),
        messages=_frame("messages", tables.messages),
        tool_calls=_frame("tool_calls", tables.tool_calls),
        goals=_frame("goals", rows.goal_rows(records, list(SCHEMAS["goals"]))),
        events=_frame("events", event_columns if event_columns is not None
                      else rows.event_rows(records, list(SCHEMAS["events"]))),
        usage=_frame("usage", rows.usage_rows(records, index, list(SCHEMAS["usage"]), counts)),
        reports=_frame("reports", protocol_rows.report_rows(records, index, list(SCHEMAS["reports"]))),
        validations=_frame("validations", protocol_rows.validation_rows(records, list(SCHEMAS["validations"]))),
        verdicts=_frame("verdicts", protocol_rows.verdict_rows(records, list(SCHEMAS["verdicts"]))),
    )


async def ato_frames(
    source: StoreSource, root_ids: Sequence[str] | str | None = None, *, messages: bool = True, events: bool = True
) -> TraceFrames:
    """Load the trees under `root_ids` (every trace when None) from a store, directory or export."""
    if isinstance(root_ids, str):
        root_ids = [root_ids]
    store = open_source(source)
    with gc_paused():  # each collection would walk every record loaded so far
        if sql_dialect(store) is not None:  # messages and events read with SQL, not record by record
            records = await read_records(store, root_ids, messages=False, events=False)
            tables = sql_message_tables(store, records) if messages else None
            event_columns = sql_event_rows(store, records, list(SCHEMAS["events"])) if events else None
            frames = frames_from_records(records, with_messages=messages, tables=tables, event_columns=event_columns,
                                         origin=store_origin(store))
        else:
            records = await read_records(store, root_ids, messages=messages, events=events)
            frames = frames_from_records(records, with_messages=messages, origin=store_origin(store))
        # Freed here by reference counting, so the collection owed on leaving the pause only
        # walks what the frames keep (payload and argument dicts), not every parsed record.
        del records
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
