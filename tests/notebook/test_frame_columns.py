"""Frame building internals: fast column paths equal pandas' own, records stay untouched, joins and defaults."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from cyber_agent.notebook.frames import _column, frames_from_records
from cyber_agent.notebook.records import TraceRecord

COLUMNS = [
    ("int64", [1, 2, 3]), ("int64", [True, 2]), ("int64", [1, 2.0]), ("int64", [1.5]), ("int64", [2**63]),
    ("int64", ["1", 2]), ("int64", [1, None]), ("Int64", [1, None, 3]), ("Int64", [None, None]),
    ("Int64", [True, None]), ("Int64", [1.0, None]), ("Int64", [2**64, None]), ("Int64", [4, 5]),
    ("float64", [1, 2.5]), ("float64", [None, 1]), ("float64", [None, None]), ("float64", [True, None]),
    ("float64", ["1.5", None]), ("float64", [float("nan"), 2]), ("string", ["a", None, "b"]), ("string", [None]),
    ("string", [1, "a"]), ("string", ["a", float("nan")]), ("string", [["x"], "a"]), ("boolean", [True, None]),
    ("bool", [True, False]), ("object", [{"a": 1}, None]),
    ("datetime64[ns, UTC]", ["2026-11-29T12:00:00.123456Z", None, "2026-11-29T13:00:00+02:00"]),
]


@pytest.mark.parametrize(("dtype", "values"), COLUMNS)
def test_a_column_is_what_pandas_builds_from_the_list(dtype, values):
    def expected() -> pd.Series:
        if dtype.startswith("datetime64"):
            return pd.to_datetime(pd.Series(values, dtype=object), utc=True, format="ISO8601").astype(dtype)
        return pd.Series(values, dtype=dtype)

    try:
        want = expected()
    except Exception as exc:  # noqa: BLE001 - pandas refuses the list: so must the fast path
        with pytest.raises(type(exc)):
            _column(list(values), dtype)
        return
    got = pd.Series(_column(list(values), dtype))
    pd.testing.assert_series_equal(got, want)
    assert got.dtype == want.dtype


def test_empty_columns_keep_their_dtype():
    for dtype in ("int64", "Int64", "float64", "string", "boolean", "bool", "object", "datetime64[ns, UTC]"):
        assert pd.Series(_column([], dtype)).dtype == pd.Series([], dtype=dtype).dtype


def _message(sequence: int, role: str, **fields) -> dict:
    return {"message_id": f"t-{sequence:04d}", "trace_id": "t", "sequence": sequence, "role": role, "goal_id": "1",
            "content": None, "tool_call_id": None, "tool_name": None, "parent_sequence": sequence - 1 or None,
            "branch": None, "description": "", "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0,
            "cost": 0.0, "duration_ms": None, "metadata": {}, "created_at": f"2026-11-29T12:00:{sequence:02d}Z",
            **fields}


def test_calls_join_the_first_later_result_and_records_are_left_as_they_were():
    calls = [{"id": "a", "name": "read_file", "arguments": {"path": "x"}}, {"id": "b", "name": "bash"}]
    messages = [
        _message(1, "tool", tool_call_id="a", content="too early"),
        _message(2, "assistant", content={"text": "go", "tool_calls": calls}, prompt_tokens=7, completion_tokens=3),
        _message(3, "tool", tool_call_id="a", content="four", metadata={"is_error": True}, duration_ms=2.5),
        _message(4, "tool", tool_call_id="a", content="again"),
        _message(5, "user", content="thanks"),
    ]
    messages[4].pop("metadata")  # an older record: missing fields take their defaults
    messages[4].pop("content")
    events = [{"event_id": 1, "type": "message_added", "payload": {"message": messages[1], "extra": 1},
               "created_at": "2026-11-29T12:00:02Z"}]
    record = TraceRecord(trace={"trace_id": "t", "head_sequence": 5}, messages=messages, events=events)
    before = copy.deepcopy((messages, events))
    frames = frames_from_records([record])
    assert (messages, events) == before

    rows = frames.tool_calls
    assert list(rows["call_id"]) == ["a", "b"]
    assert list(rows["result_sequence"].astype(object).where(rows["result_sequence"].notna(), None)) == [3, None]
    assert rows.loc[0, "is_error"] and rows.loc[0, "result_chars"] == 4 and rows.loc[0, "duration_ms"] == 2.5
    assert rows.loc[0, "arguments"] == {"path": "x"} and rows.loc[1, "arguments"] == {}
    msgs = frames.messages
    assert list(msgs["n_tool_calls"]) == [0, 2, 0, 0, 0]
    assert msgs.loc[1, "tool_call_names"] == "read_file,bash" and msgs.loc[1, "total_tokens"] == 10
    assert pd.isna(msgs.loc[4, "text"]) and pd.isna(msgs.loc[4, "is_error"])
    assert msgs["on_main_path"].all()
    usage = frames.usage.iloc[0]
    assert (usage["llm_calls"], usage["tool_calls"]) == (1, 3)
    event = frames.events.iloc[0]
    assert event["message_sequence"] == 2 and event["payload"] == {"extra": 1}
    assert np.issubdtype(frames.messages["sequence"].dtype, np.int64)
