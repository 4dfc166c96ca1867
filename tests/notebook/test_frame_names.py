"""Frames: consistent names across frames, flags for estimated/unpriced cost and shaped results, one row per verdict,
and docs/notebook.md holding one schema table per frame that matches `SCHEMAS`."""

from __future__ import annotations

import re

from cyber_agent.notebook import SCHEMAS, to_frames
from cyber_agent.notebook.columns import FRAME_COLUMNS
from cyber_agent.notebook.frames import frames_from_records
from cyber_agent.notebook.records import TraceRecord

from nb_helpers import CHILD, REPO, VALIDATOR

RECURSIVE_EXPORT = REPO / "data" / "exports" / "recursive_demo.jsonl"


def _message(sequence: int, role: str, **fields) -> dict:
    return {"message_id": f"t-{sequence:04d}", "trace_id": "t", "sequence": sequence, "role": role, "goal_id": "1",
            "content": None, "tool_call_id": None, "tool_name": None, "parent_sequence": sequence - 1 or None,
            "branch": None, "description": "", "prompt_tokens": 4, "completion_tokens": 1, "cached_tokens": 0,
            "cost": 0.0, "duration_ms": None, "metadata": {}, "created_at": f"2026-11-29T12:00:{sequence:02d}Z",
            **fields}


def test_one_meaning_per_column_name():
    # `role` is always an agent's role; a message's own is `message_role`. Per-trace totals are `total_*`
    # everywhere; the parent is `parent_trace_id` everywhere.
    for name, schema in SCHEMAS.items():
        assert "parent" not in schema and "tokens" not in schema, name
        if "role" in schema:
            assert name in ("traces", "usage", "reports"), name
    assert "message_role" in SCHEMAS["messages"] and "role" not in SCHEMAS["messages"]
    per_trace = ["total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_tokens", "total_cost"]
    assert all(c in SCHEMAS["traces"] and c in SCHEMAS["usage"] for c in per_trace)


def test_flags_for_estimated_and_unpriced_cost_and_shaped_results():
    calls = [{"id": "a", "name": "read_file", "arguments": {}}, {"id": "b", "name": "bash_command", "arguments": {}}]
    messages = [
        _message(1, "assistant", content={"text": None, "tool_calls": calls},
                 metadata={"model": "m", "cost_estimated": True, "usage_estimated": True}),
        _message(2, "tool", tool_call_id="a", content="x" * 10, metadata={"is_error": False, "truncated": True}),
        _message(3, "tool", tool_call_id="b", content="digest",
                 metadata={"is_error": False, "payload": {"path": "summarized", "original_bytes": 90000}}),
        _message(4, "assistant", content={"text": "done"}, metadata={"model": "m", "cost_unpriced": True}),
    ]
    frames = frames_from_records([TraceRecord(trace={"trace_id": "t", "head_sequence": 4}, messages=messages)])
    flags = frames.messages[["usage_estimated", "cost_estimated", "cost_unpriced", "truncated", "summarized"]]
    assert flags.values.tolist() == [[True, True, False, False, False], [False, False, False, True, False],
                                     [False, False, False, False, True], [False, False, True, False, False]]
    assert frames.tool_calls[["truncated", "summarized"]].values.tolist() == [[True, False], [False, True]]
    usage = frames.usage.iloc[0]
    assert (usage["estimated_calls"], usage["unpriced_calls"]) == (1, 1)


def test_one_row_per_verdict_beside_one_row_per_criterion():
    frames = to_frames(RECURSIVE_EXPORT)
    verdicts, criteria = frames.verdicts, frames.validations
    assert len(verdicts) == criteria.drop_duplicates(["trace_id", "validation_index"]).shape[0] == 10
    assert verdicts["validator_trace_id"].is_unique
    assert (verdicts["criteria"] == verdicts["passed"] + verdicts["failed"] + verdicts["unknown"]).all()
    assert verdicts["verdict"].value_counts().to_dict() == {"pass": 6, "fail": 4}
    first = verdicts.sort_values("created_at").groupby("trace_id").first()
    labels = frames.traces.set_index("trace_id")["label"]
    assert sorted(first.loc[first["verdict"] == "fail"].index.map(labels)) == [
        "explore 1", "explore 2", "explore 3", "explore 4"]


def test_verdicts_of_the_synthetic_tree(recursive_store):
    store, root = recursive_store
    row = to_frames(store).verdicts.iloc[0]
    assert (row["trace_id"], row["validator_trace_id"], row["verdict"]) == (CHILD, VALIDATOR, "fail")
    assert (row["criteria"], row["passed"], row["failed"], row["unknown"]) == (2, 1, 1, 0)


def _doc_tables() -> dict[str, list[tuple[str, str, str]]]:
    """`### frame` headed tables of the schema section: (column, dtype, meaning) rows."""
    text = (REPO / "docs" / "notebook.md").read_text(encoding="utf-8")
    section = text.split("## Frame schemas", 1)[1].split("\n## ", 1)[0]
    tables = {}
    for name, body in re.findall(r"^### `(\w+)`\n(.*?)(?=^### |\Z)", section, re.M | re.S):
        rows = re.findall(r"^\| `(\w+)` \| `([\w\[\], ]+)` \| ?(.*?) ?\|$", body, re.M)
        tables[name] = [(column, dtype, meaning.strip()) for column, dtype, meaning in rows]
    return tables


def test_docs_hold_one_schema_table_per_frame_equal_to_the_declarations():
    # docs/notebook.md's tables are `FRAME_COLUMNS` row for row: name, dtype and meaning.
    assert _doc_tables() == {frame: [(c.name, c.dtype, c.meaning) for c in columns]
                             for frame, columns in FRAME_COLUMNS.items()}
    assert {frame: {c.name: c.dtype for c in columns} for frame, columns in FRAME_COLUMNS.items()} == SCHEMAS
