"""Write the pre-typed store fixtures of tests/trace/test_pre_typed_records.py (kept for the record).

The fixtures were written with the code of main BEFORE `Message.metadata` and the side records
were typed (main at 1f13546, December 2026), so they hold exactly what an older version put on
disk. Run it the same way to rebuild them (a checkout of that commit first on the path):

    git -C /work/main archive 1f13546 | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python tests/trace/data/make_pre_typed_stores.py tests/trace/data/pre_typed

It writes `file/` (a FileSystemTraceStore) and `runs.db` (a SQLiteTraceStore) with the same
trace: every metadata key the runner, harness, importers and tools wrote then, plus a resource
usage record, an approval batch and a stop request.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

from cyber_agent.trace import FileSystemTraceStore, Message, Trace
from cyber_agent.trace.models import MessageContent
from cyber_agent.trace.sqlite_store import SQLiteTraceStore

TRACE_ID = "0b7c1d2e-3f40-4a51-9b62-7c83d94e05f6"
WHEN = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)

# (role, content, fields, metadata) as the code of that time wrote them.
MESSAGES: list[tuple[str, object, dict[str, object], dict[str, object]]] = [
    ("user", "Count the rows of data/sales.csv.", {}, {}),
    ("assistant", {"text": None, "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "data/sales.csv"}}]},
     {"prompt_tokens": 120, "completion_tokens": 14, "cost": 0.0002},
     {"model": "demo", "cost_estimated": True, "usage_estimated": True, "http_retries": 2, "retry_wait_s": 1.5}),
    ("tool", "region,units\n...", {"tool_call_id": "c1", "tool_name": "read_file"},
     {"is_error": False, "truncated": True, "lines": 25, "duration_ms": 0.9}),
    ("assistant", {"text": None, "tool_calls": [{"id": "c2", "name": "bash_command", "arguments": {"command": "wc -l"}},
                                               {"id": "c3", "name": "agent", "arguments": {"task": "deep"}}]},
     {"prompt_tokens": 0, "completion_tokens": 0}, {"model": "demo", "cost_estimated": False, "cost_unpriced": True,
                                                    "usage_invalid": "stored 0 for prompt_tokens=-5"}),
    ("tool", "[exit code: 1]", {"tool_call_id": "c2", "tool_name": "bash_command"},
     {"is_error": True, "exit_code": 1, "timed_out": False, "duration_ms": 12.5}),
    ("tool", "refused: depth", {"tool_call_id": "c3", "tool_name": "agent"},
     {"is_error": True, "refused": "depth", "duration_ms": 0.1}),
    ("tool", "summary of a long page", {"tool_call_id": "c4", "tool_name": "fetch_page"},
     {"is_error": False, "payload": {"path": "summarized", "reason": "over threshold", "original_bytes": 90000,
                                     "final_bytes": 800, "truncated": False, "llm_called": True, "summary_cost": 0.001,
                                     "error": None}, "validation_metered": True, "url": "https://example.org"}),
    ("tool", "not run: cap", {"tool_call_id": "c5", "tool_name": "bash_command"},
     {"is_error": True, "rejected": True, "not_run": "cap"}),
    ("tool", "(execution unknown)", {"tool_call_id": "c6", "tool_name": "bash_command"},
     {"is_error": True, "execution_unknown": True}),
    ("user", "Please report now.", {}, {"protocol": True}),
    ("assistant", {"text": "(compaction)", "tool_calls": []}, {"branch": "compaction", "prompt_tokens": 40},
     {"compaction": "summary", "tokens_before": 9000, "tokens_after": 1200}),
    ("assistant", {"text": "The file has 25 rows.", "tool_calls": []}, {"prompt_tokens": 200, "completion_tokens": 9},
     {"model": "demo", "cost_estimated": False, "source_ids": {"span_id": "ab12"}, "content_missing": False,
      "tags": ["mine"], "refused_note": None}),
]


async def write(store: FileSystemTraceStore | SQLiteTraceStore) -> None:
    """Write the fixture trace, its messages and its side records."""
    await store.create_trace(Trace(trace_id=TRACE_ID, task="Count the rows of data/sales.csv.", model="demo",
                                   created_at=WHEN, updated_at=WHEN))
    head = None
    for number, (role, content, fields, metadata) in enumerate(MESSAGES):
        body = MessageContent.model_validate(content) if isinstance(content, dict) else content
        message = Message.create(trace_id=TRACE_ID, role=role, content=body, parent_sequence=head, metadata=metadata,
                                 created_at=WHEN.replace(second=number), **fields)
        await store.add_message(message)
        if message.branch is None:
            head = message.sequence
    await store.update_trace(TRACE_ID, head_sequence=head, status="completed")
    await store.replace_resource_usage(TRACE_ID, {
        "agents": 2, "llm_calls": 3, "root_validator_calls": 0, "prompt_tokens": 360, "completion_tokens": 23,
        "total_tokens": 383, "cost_usd": 0.0012, "validation_tool_calls": 1, "validation_material_chars": 800,
        "started_at": "2026-12-01T09:30:00Z", "updated_at": "2026-12-01T09:31:00Z", "last_refusal": None,
        "refusals": 0})  # no `unpriced_calls`: a record from before that field
    await store.replace_tool_approvals(TRACE_ID, {"batches": [{
        "batch_id": "b1", "trace_id": TRACE_ID, "assistant_message_id": f"{TRACE_ID}-0004", "status": "done",
        "calls": [{"call_id": "c2", "name": "bash_command", "arguments": {"command": "wc -l"},
                   "requires_confirmation": True, "editable_params": ["command"], "decision": "approve",
                   "edited_arguments": {}, "feedback": ""}],
        "created_at": "2026-12-01T09:30:05Z", "decided_at": "2026-12-01T09:30:09Z", "note": ""}]})
    await store.request_stop(TRACE_ID, "user pressed stop", subtree=True)


def main(target: Path) -> None:
    """Write `target/file/` and `target/runs.db` afresh."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    asyncio.run(write(FileSystemTraceStore(target / "file", checkpoint_every=1, checkpoint_interval=0)))
    asyncio.run(write(SQLiteTraceStore(target / "runs.db")))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
