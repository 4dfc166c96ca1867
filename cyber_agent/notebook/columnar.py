"""The columnar path: frames built from a store's Arrow columns (`cyber_agent/trace/columnar.py:ColumnarRead`).

`to_frames` reads the trace records without their messages and events, then asks the store for
`read_columns(records)`: one Arrow table of messages and one of events (SQLite and PostgreSQL read
them with SQL, SQLite through ADBC straight into Arrow; the file and memory stores parse one trace
at a time). Here the columns become pandas arrays without a Python object per value where the
dtype allows it (strings stay Arrow-backed, numbers are NumPy views, timestamps are parsed by
Arrow); only nested values (tool-call arguments, event payloads) are Python objects. The per-trace
values the other frames need (calls, flags, the last refusal, the tools called) are reduced here
with NumPy. The frames equal the records path's (`frame_rows.py`), which
`tests/notebook/test_columnar_frames.py` checks on every store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from cyber_agent.notebook.columns import FRAME_COLUMNS, TS, B, F, I, NB, NI, S, columns_read
from cyber_agent.notebook.frame_rows import MessageTables
from cyber_agent.trace.columnar import ColumnarRead
from cyber_agent.trace.records import TraceRecord

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ColumnarFrames", "columnar_frames"]


class ColumnarFrames:
    """The messages, tool-calls and events frames of a `ColumnarRead`, and what the other frames need."""

    def __init__(self, records: Sequence[TraceRecord], read: ColumnarRead) -> None:
        import pyarrow.compute as pc

        self._pc = pc
        self.records = records
        self.read = read
        table = read.messages
        self.table = table
        self.roles = table["role"]
        self.sequence = _ints(table["sequence"], "sequence")
        self.spans = _spans(table, records)
        """Per record, the (start, end) of its rows in the messages table."""
        self._created_at: Any = None

    def created_at(self) -> Any:
        """The messages' `created_at` as the frames' timestamps (parsed once: the tool-calls frame takes its own)."""
        if self._created_at is None:
            self._created_at = _pandas(self.table["created_at"], TS, "created_at")
        return self._created_at

    # ---- the messages frame --------------------------------------------------------------------
    def messages(self) -> pd.DataFrame:
        table = self.table
        reads = columns_read("messages")
        out: dict[str, Any] = {}
        for column in FRAME_COLUMNS["messages"]:
            if column.name == "created_at":
                out[column.name] = self.created_at()
            elif column.read is not None:
                out[column.name] = _pandas(table[reads[column.name]], column.dtype, column.name)
            elif column.name == "total_tokens":
                out[column.name] = (_ints(table["prompt_tokens"], "prompt_tokens")
                                    + _ints(table["completion_tokens"], "completion_tokens"))
            elif column.name == "on_main_path":
                out[column.name] = self._main_path()
            else:  # pragma: no cover - a declared column nobody computes is a bug caught by every frames test
                raise AssertionError(f"messages column {column.name!r} has no reader")
        return pd.DataFrame(out, copy=False)

    def _main_path(self) -> np.ndarray:
        """Whether each message is on its trace's main path (its head and the head's ancestors)."""
        parents = self.table["parent_sequence"]
        valid = np.asarray(parents.is_valid()) if parents.null_count else np.ones(len(parents), dtype=bool)
        parent = np.asarray(parents.fill_null(0).to_numpy())
        sequence = self.sequence
        out = np.zeros(len(sequence), dtype=bool)
        for record, (start, end) in zip(self.records, self.spans, strict=True):
            if start == end:
                continue
            head = int(record.trace.get("head_sequence") or 0)
            seq, par, ok = sequence[start:end], parent[start:end], valid[start:end]
            if not ok[0] and ok[1:].all() and (par[1:] == seq[:-1]).all():  # one chain in sequence order
                found = np.flatnonzero(seq == head) if head else np.zeros(0, dtype=np.int64)
                if len(found):
                    out[start:start + int(found[0]) + 1] = True
                continue
            links = dict(zip(seq.tolist(), [p if k else None for p, k in zip(par.tolist(), ok.tolist(), strict=True)],
                             strict=True))
            path: set[int] = set()
            current: int | None = head or None
            while current is not None and current not in path and current in links:
                path.add(current)
                current = links[current]
            out[start:end] = [s in path for s in seq.tolist()]
        return out

    # ---- per-record values for the traces, usage and shape columns ------------------------------
    def tables(self) -> MessageTables:
        """Role counts and last refusals per record (the `MessageTables` fields the other frames read)."""
        pc = self._pc
        n = len(self.sequence)
        assistant = np.asarray(pc.equal(self.roles, "assistant").fill_null(False)) if n else np.zeros(0, bool)
        tool = np.asarray(pc.equal(self.roles, "tool").fill_null(False)) if n else np.zeros(0, bool)
        estimated = ((_ints(self.table["usage_estimated"], None) != 0) | (_ints(self.table["cost_estimated"], None) != 0))
        unpriced = _ints(self.table["cost_unpriced"], None) != 0
        refused = tool & np.asarray(self.table["refused"].is_valid()) if n else np.zeros(0, bool)
        texts = self.table["text"]
        is_text = _ints(self.table["content_is_text"], None) != 0
        counts: list[tuple[int, int, int, int]] = []
        refusals: list[str | None] = []
        for record, (start, end) in zip(self.records, self.spans, strict=True):
            counts.append((int(assistant[start:end].sum()), int(tool[start:end].sum()), int(estimated[start:end].sum()),
                           int(unpriced[start:end].sum())))
            last = np.flatnonzero(refused[start:end])
            if not len(last):
                refusals.append(None)
                continue
            row = start + int(last[-1])
            if is_text[row]:
                refusals.append(texts[row].as_py())
            else:
                refusals.append(str(self.read.contents.get((record.trace_id, int(self.sequence[row])))))
        return MessageTables({}, {}, counts, refusals)

    def tool_names(self) -> dict[str, list[str]]:
        """Trace id -> the distinct tools its assistant messages called (what the shape columns ask of them)."""
        pc = self._pc
        if not len(self.sequence):
            return {}
        calling = pc.and_(pc.equal(self.roles, "assistant"), pc.greater(self.table["n_tool_calls"], 0)).fill_null(False)
        grouped = (self.table.select(["trace_id", "tool_call_names"]).filter(calling)
                   .group_by("trace_id").aggregate([("tool_call_names", "distinct")]))
        return {trace_id: sorted({name for joined in names if joined for name in joined.split(",")})
                for trace_id, names in zip(grouped["trace_id"].to_pylist(), grouped["tool_call_names_distinct"].to_pylist(),
                                           strict=True)}

    # ---- the tool-calls frame ------------------------------------------------------------------
    def tool_calls(self) -> pd.DataFrame:
        """One row per tool call, joined to the first later result with its id (as `frame_rows.py:_add_calls`).

        The calls come as columns (`ColumnarRead.calls`) and are joined in Arrow (`_results_of`): no Python
        loop walks the calls or the results."""
        import pyarrow as pa

        pc = self._pc
        table, sequence = self.table, self.sequence
        calls = self.read.calls
        caller_rows = np.asarray(calls["message_row"].to_numpy(), dtype=np.int64)
        call_index = np.asarray(calls["call_index"].to_numpy(), dtype=np.int64)
        call_ids, names = calls["call_id"], calls["tool_name"]
        arguments = _objects(self.read.arguments)
        hit = self._results_of(caller_rows, call_ids)
        take = pa.array(caller_rows, pa.int64())
        lengths = pc.utf8_length(table["text"])  # the lengths, not the texts, are taken for the results
        text_chars = pc.if_else(pc.equal(table["content_is_text"], 1), lengths, pa.scalar(None, lengths.type))
        result_rows = table.select(["sequence", "is_error", "refused", "truncated", "summarized", "duration_ms"]
                                   ).append_column("chars", text_chars).take(hit)
        found = np.asarray(hit.is_valid()) if len(hit) else np.zeros(0, bool)
        chars = result_rows["chars"]
        values: dict[str, Any] = {
            "trace_id": _pandas(table["trace_id"].take(take), S, "trace_id"),
            "message_id": _pandas(table["message_id"].take(take), S, "message_id"),
            "sequence": sequence[caller_rows],
            "call_index": call_index,
            "call_id": _pandas(call_ids, S, "call_id"),
            "tool_name": _pandas(names, S, "tool_name"),
            "arguments": arguments,
            "result_sequence": _pandas(result_rows["sequence"], NI, "result_sequence"),
            "is_error": _flag(result_rows["is_error"], found),
            "refused": _pandas(result_rows["refused"], S, "refused"),
            "truncated": _flag(result_rows["truncated"], found),
            "summarized": _flag(result_rows["summarized"], found),
            "result_chars": _pandas(chars, NI, "result_chars"),
            "duration_ms": _pandas(result_rows["duration_ms"], F, "duration_ms"),
            "created_at": self.created_at().take(caller_rows),
        }
        return pd.DataFrame({c.name: values[c.name] for c in FRAME_COLUMNS["tool_calls"]}, copy=False)

    def _results_of(self, caller_rows: np.ndarray, call_ids: pa.ChunkedArray) -> pa.Array:
        """Per call (its message's row, its id), the row of the first later tool result with its id (null: none).

        The ids of calls and results are dictionary-encoded together (one hash pass); each result is then
        the integer (trace, id, sequence), sorted, and a call's result is found by a binary search for
        its own (trace, id, sequence): the next larger key, if it has the call's trace and id. No string
        key per row is built and no Python loop runs."""
        import pyarrow as pa

        pc = self._pc
        table, sequence = self.table, self.sequence
        found = np.full(len(caller_rows), -1, dtype=np.int64)
        result_id = table["tool_call_id"]
        if not (len(caller_rows) and len(sequence)):
            return pa.array(found, pa.int64(), mask=found < 0)
        answers = pc.and_(pc.equal(self.roles, "tool"), pc.not_equal(result_id, "")).fill_null(False)
        rows = np.flatnonzero(np.asarray(answers))
        if not len(rows):
            return pa.array(found, pa.int64(), mask=found < 0)
        both = pa.chunked_array([*result_id.take(rows).chunks, *call_ids.chunks], type=pa.string())
        encoded = pc.dictionary_encode(both.combine_chunks())
        codes = np.asarray(encoded.indices.fill_null(-1).to_numpy(), dtype=np.int64)
        trace = self._trace_codes()
        ids, top = len(encoded.dictionary) + 1, int(sequence.max()) + 1
        if (int(trace[-1]) + 1) * ids * top >= 2**62:  # pragma: no cover - beyond any store: the hash join instead
            return self._joined(caller_rows, call_ids, rows)
        keys = (trace[rows] * ids + codes[:len(rows)]) * top + sequence[rows]
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        wanted = trace[caller_rows] * ids + codes[len(rows):]
        at = np.searchsorted(keys, wanted * top + sequence[caller_rows], side="right")  # the first later sequence
        inside = at < len(keys)
        at[~inside] = 0
        hit = inside & (codes[len(rows):] >= 0) & (keys[at] // top == wanted)
        found[hit] = rows[order[at[hit]]]
        return pa.array(found, pa.int64(), mask=found < 0)

    def _trace_codes(self) -> np.ndarray:
        """Per message row, the number of its trace's run of rows (the rows of a trace are together)."""
        runs = self._pc.run_end_encode(self.table["trace_id"].combine_chunks())
        ends = np.asarray(runs.run_ends.to_numpy(), dtype=np.int64)
        return np.repeat(np.arange(len(ends), dtype=np.int64), np.diff(ends, prepend=0))

    def _joined(self, caller_rows: np.ndarray, call_ids: pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
        """`_results_of` by a hash join of every (call, result) pair with the same trace and id."""
        import pyarrow as pa

        pc, table, sequence = self._pc, self.table, self.sequence
        found = np.full(len(caller_rows), -1, dtype=np.int64)
        results = pa.table({"trace_id": table["trace_id"].take(rows), "call_id": table["tool_call_id"].take(rows),
                            "result_sequence": sequence[rows], "result_row": rows})
        pairs = pa.table({"call": np.arange(len(caller_rows), dtype=np.int64),
                          "trace_id": table["trace_id"].take(caller_rows), "call_id": call_ids,
                          "sequence": sequence[caller_rows]}).join(results, keys=["trace_id", "call_id"], join_type="inner")
        pairs = pairs.filter(pc.greater(pairs["result_sequence"], pairs["sequence"]))
        if pairs.num_rows:
            call = np.asarray(pairs["call"].to_numpy())
            order = np.lexsort((np.asarray(pairs["result_sequence"].to_numpy()), call))  # by call, then result sequence
            call, first = np.unique(call[order], return_index=True)
            found[call] = np.asarray(pairs["result_row"].to_numpy())[order][first]
        return pa.array(found, pa.int64(), mask=found < 0)


def _flag(values: pa.ChunkedArray, found: np.ndarray) -> pd.arrays.BooleanArray:
    """A joined result's flag: its truth value (null counts as False), <NA> where no result was found."""
    data = np.asarray(values.fill_null(0).to_numpy(zero_copy_only=False)) != 0 if len(found) else np.zeros(0, bool)
    return pd.arrays.BooleanArray(data, ~found)


def events_frame(read: ColumnarRead) -> pd.DataFrame:
    """One row per event (as `frame_rows.py:event_rows`); the payload fields lifted into columns come read."""
    table = read.events
    out: dict[str, Any] = {}
    for column in FRAME_COLUMNS["events"]:
        if column.read is not None:
            out[column.name] = _pandas(table[column.read], column.dtype, column.name)
        elif column.name == "payload":
            out[column.name] = _objects([p if isinstance(p, dict) else {} for p in read.payloads])
        else:  # pragma: no cover - a declared column nobody computes is a bug caught by every frames test
            raise AssertionError(f"events column {column.name!r} has no reader")
    return pd.DataFrame(out, copy=False)


def columnar_frames(records: Sequence[TraceRecord], read: ColumnarRead) -> ColumnarFrames:
    """The columnar frame builder of `records` and their `read`."""
    return ColumnarFrames(records, read)


# ---- Arrow -> pandas, by declared dtype ----------------------------------------------------------------
def _spans(table: pa.Table, records: Sequence[TraceRecord]) -> list[tuple[int, int]]:
    """Per record, where its rows are (the table holds the records' rows in record order)."""
    if table.num_rows == 0:
        return [(0, 0)] * len(records)
    import pyarrow.compute as pc

    runs = pc.run_end_encode(table["trace_id"].combine_chunks())
    ends = runs.run_ends.to_numpy().tolist()
    where = {trace_id: (start, end) for trace_id, start, end in zip(runs.values.to_pylist(), [0, *ends[:-1]], ends,
                                                                   strict=True)}
    return [where.get(record.trace_id, (0, 0)) for record in records]


def _ints(values: pa.ChunkedArray | pa.Array, name: str | None) -> np.ndarray:
    """An int64 column as NumPy; nulls are an error naming the column (`name`), or 0 when `name` is None."""
    if values.null_count:
        if name is not None:
            raise ValueError(f"column {name!r} holds {values.null_count} missing values; it cannot be int64")
        values = values.fill_null(0)
    return np.asarray(values.to_numpy(), dtype=np.int64)


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


_STRING = pd.StringDtype()


def _pandas(values: pa.ChunkedArray | pa.Array, dtype: str, name: str) -> Any:
    """The pandas array of `values` as the column `name` of `dtype` (what the records path builds from lists)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, pa.Array):
        values = pa.chunked_array([values], type=values.type)
    if dtype == S:
        if _STRING.storage == "pyarrow":
            return pd.arrays.ArrowStringArray(values)  # the Arrow buffers as they are: no copy
        return pd.array(values.to_pylist(), dtype=S)
    if dtype == I:
        return _ints(values, name)
    if dtype == F:
        return np.asarray(values.cast(pa.float64()).to_numpy(), dtype=np.float64)
    if dtype in (NI, B, NB):
        mask = ~np.asarray(values.is_valid()) if values.null_count else np.zeros(len(values), dtype=bool)
        data = np.asarray(values.fill_null(0).cast(pa.int64()).to_numpy(), dtype=np.int64)
        if dtype == B:
            return data != 0
        if dtype == NB:
            return pd.arrays.BooleanArray(data != 0, mask)
        return pd.arrays.IntegerArray(data, mask)
    if dtype == TS:
        try:
            stamps = pc.cast(values, pa.timestamp("ns", "UTC"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # not ISO 8601 as Arrow reads it: as pandas does
            return pd.to_datetime(pd.Series(values.to_pylist(), dtype=object), utc=True, format="ISO8601").astype(TS).array
        return stamps.to_pandas().array if len(stamps) else pd.array([], dtype=TS)
    return _objects(values.to_pylist())
