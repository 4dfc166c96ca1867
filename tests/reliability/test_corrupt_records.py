"""Corrupt or truncated records fail closed, or are tolerated where the spec says so, and name the file.

The spec (A10, T4, T8; docs/trace.md "Crash safety"): missing or corrupt resource usage fails
closed; a corrupt `meta.json` (skipped and reported by listings), `goal.json`, message file, side record or middle line of
`events.jsonl` raises `CorruptRecordError` naming the file; a torn last line of `events.jsonl`
(a killed append) is ignored by readers and cut by the next writer. Every case starts from a
real finished recursive run on a FileSystemTraceStore (root, its validator) and damages one file.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from reliability_helpers import PlanModel, clean_agent_env, recursive_config  # noqa: F401 - autouse fixture

from cyber_agent import cli
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.errors import CorruptRecordError
from cyber_agent.trace import FileSystemTraceStore
from cyber_agent.trace.models import Trace


class Finished:
    """A finished recursive root on disk, and how to continue it."""

    def __init__(self, base: Path, root: Trace) -> None:
        self.base, self.root = base, root
        self.dir = base / root.trace_id

    def file(self, name: str) -> Path:
        return self.dir / name

    async def continue_run(self) -> tuple[Trace | None, PlanModel, BaseException | None]:
        """Continue the root with a fresh runner and store; return (final trace, model, raised error)."""
        model = PlanModel()
        runner = AgentRunner(trace_store=FileSystemTraceStore(self.base), llm_call=model.llm, workspace=self.base)
        try:
            result = await runner.run_result([{"role": "user", "content": "one more thing"}],
                                              RunConfig(trace_id=self.root.trace_id))
        except Exception as exc:  # noqa: BLE001 - the test inspects what was raised
            return None, model, exc
        return result.trace, model, None


@pytest.fixture
def finished(tmp_path: Path) -> Finished:
    async def run() -> Trace:
        model = PlanModel()
        runner = AgentRunner(trace_store=FileSystemTraceStore(tmp_path), llm_call=model.llm, workspace=tmp_path)
        result = await runner.run_result([{"role": "user", "content": "solve it"}], recursive_config())
        assert result.status == "completed", result.trace.error_message
        return result.trace

    return Finished(tmp_path, asyncio.run(run()))


def _store(finished: Finished) -> FileSystemTraceStore:
    return FileSystemTraceStore(finished.base)


def _names_file(error: BaseException, path: Path) -> None:
    assert isinstance(error, CorruptRecordError), f"{type(error).__name__}: {error}"
    assert error.path == path, f"error names {error.path}, the damaged file is {path}"
    assert str(path) in str(error)


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


# ---- resource_usage.json: fail closed -----------------------------------------------------------
@pytest.mark.parametrize("damage", ["garbage", "truncated", "array"])
def test_unparsable_usage_fails_closed_naming_the_file(finished, damage):
    path = finished.file("resource_usage.json")
    if damage == "garbage":
        path.write_bytes(b"\x00not json{")
    elif damage == "truncated":
        _truncate(path)
    else:
        path.write_text("[1, 2]")
    with pytest.raises(CorruptRecordError) as raised:
        asyncio.run(_store(finished).get_resource_usage(finished.root.trace_id))
    _names_file(raised.value, path)
    trace, model, error = asyncio.run(finished.continue_run())
    assert error is None and trace is not None
    assert trace.status == "failed" and str(path) in (trace.error_message or "")
    assert sum(model.calls.values()) == 0, "no model call may be made against an unreadable budget"


@pytest.mark.parametrize("damage", ["field missing", "negative", "wrong type"])
def test_parsable_but_incomplete_usage_fails_closed_naming_the_record(finished, damage):
    path = finished.file("resource_usage.json")
    usage = json.loads(path.read_text())
    if damage == "field missing":
        del usage["llm_calls"]
    elif damage == "negative":
        usage["total_tokens"] = -5
    else:
        usage["agents"] = "many"
    path.write_text(json.dumps(usage))
    trace, model, error = asyncio.run(finished.continue_run())
    assert error is None and trace is not None and trace.status == "failed"
    # The budget names the record by trace and file name (it does not know the store's layout).
    assert f"{finished.root.trace_id}/resource_usage.json" in (trace.error_message or "")
    assert sum(model.calls.values()) == 0


def test_missing_usage_fails_closed(finished):
    finished.file("resource_usage.json").unlink()
    trace, model, error = asyncio.run(finished.continue_run())
    assert error is None and trace is not None and trace.status == "failed"
    assert "resource usage" in (trace.error_message or "") and "missing" in (trace.error_message or "")
    assert sum(model.calls.values()) == 0


# ---- meta.json: fail closed everywhere ----------------------------------------------------------
@pytest.mark.parametrize("damage", ["garbage", "truncated", "another trace"])
def test_corrupt_meta_fails_closed_naming_the_file(finished, damage, capsys):
    path = finished.file("meta.json")
    if damage == "garbage":
        path.write_text("{{{")
    elif damage == "truncated":
        _truncate(path)
    else:
        meta = json.loads(path.read_text())
        meta["trace_id"] = "00000000-0000-4000-8000-000000000000"
        path.write_text(json.dumps(meta))
    store = _store(finished)
    for read in (lambda: store.get_trace(finished.root.trace_id),
                 lambda: store.get_main_path_messages(finished.root.trace_id)):
        with pytest.raises(CorruptRecordError) as raised:
            asyncio.run(read())
        _names_file(raised.value, path)
    # A listing skips the damaged trace (its validator stays listed) and names the file.
    report = asyncio.run(store.list_traces_report(limit=None))
    assert finished.root.trace_id not in [t.trace_id for t in report.traces] and report.traces
    assert [(e.name, e.path) for e in report.errors] == [(finished.root.trace_id, str(path))]
    _trace, _model, error = asyncio.run(finished.continue_run())
    _names_file(error, path)
    code = cli.main(["--store", str(finished.base), "show", finished.root.trace_id])
    assert code != 0 and str(path) in capsys.readouterr().err


# ---- events.jsonl: a corrupt middle line fails, a torn last line is tolerated and cut -------------
def test_a_corrupt_middle_event_line_names_the_file_and_line(finished):
    path = finished.file("events.jsonl")
    lines = path.read_bytes().split(b"\n")
    assert len(lines) > 4
    lines[2] = b'{"event_id": 3, "torn'
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptRecordError) as raised:
        asyncio.run(_store(finished).get_events(finished.root.trace_id))
    _names_file(raised.value, path)
    assert "line 3" in str(raised.value)


def test_a_torn_last_event_line_is_ignored_then_cut_by_the_next_writer(finished):
    path = finished.file("events.jsonl")
    trace_id = finished.root.trace_id
    before = asyncio.run(_store(finished).get_events(trace_id))
    with path.open("ab") as handle:
        handle.write(b'{"event_id": ' + str(len(before) + 1).encode() + b', "type": "progr')
    assert asyncio.run(_store(finished).get_events(trace_id)) == before
    assert asyncio.run(_store(finished).get_events(trace_id, since_event_id=len(before) - 1)) == before[-1:]

    async def write_next() -> int:
        return await FileSystemTraceStore(finished.base).append_event(trace_id, "progress", {"after": "torn line"})
    assert asyncio.run(write_next()) == len(before) + 1
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and b'"progr\n' not in raw and b"progr{" not in raw
    after = asyncio.run(_store(finished).get_events(trace_id))
    assert [e.event_id for e in after] == list(range(1, len(before) + 2))


# ---- tool_approvals.json: fail closed -----------------------------------------------------------
@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_unparsable_approvals_refuse_to_continue_naming_the_file(finished, damage):
    path = finished.file("tool_approvals.json")
    if damage == "garbage":
        path.write_text("]]")
    else:
        path.write_text('{"batches": [{"batch_id": "b1", "trace_id"')
    with pytest.raises(CorruptRecordError) as raised:
        asyncio.run(_store(finished).get_tool_approvals(finished.root.trace_id))
    _names_file(raised.value, path)
    trace, model, error = asyncio.run(finished.continue_run())
    _names_file(error, path)
    assert sum(model.calls.values()) == 0
    assert asyncio.run(FileSystemTraceStore(finished.base).get_trace(finished.root.trace_id)).status == "completed"


def test_approvals_of_the_wrong_shape_refuse_to_continue_naming_the_record(finished):
    finished.file("tool_approvals.json").write_text(json.dumps({"batches": [{"batch_id": 7}]}))
    _trace, model, error = asyncio.run(finished.continue_run())
    assert isinstance(error, CorruptRecordError), error
    assert error.path == Path(f"{finished.root.trace_id}/tool_approvals.json")
    assert sum(model.calls.values()) == 0


# ---- the other records ----------------------------------------------------------------------------
def test_a_corrupt_goal_tree_names_the_file(finished):
    path = finished.file("goal.json")
    _truncate(path)
    with pytest.raises(CorruptRecordError) as raised:
        asyncio.run(_store(finished).get_goal_tree(finished.root.trace_id))
    _names_file(raised.value, path)


def test_a_corrupt_message_file_names_the_file(finished):
    path = sorted((finished.dir / "messages").glob("*.json"))[1]
    _truncate(path)
    store = _store(finished)
    for read in (lambda: store.get_trace_messages(finished.root.trace_id),
                 lambda: store.get_main_path_messages(finished.root.trace_id),
                 lambda: store.get_message(path.stem)):
        with pytest.raises(CorruptRecordError) as raised:
            asyncio.run(read())
        _names_file(raised.value, path)

