"""Record -> replay of multi-agent runs: keyed by position in the tree, the replayed tree equals the recorded one.

Frames are compared with ids normalised (`normalise_ids`: fresh root UUIDs and T2 timestamps) and
every time field dropped (`*_at`, `duration_ms`, `duration_seconds`) and the `provenance` column
(it names the store each tree was read from); nothing else is excused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm import RecordingLLM, ReplayLLM, load_exchanges
from cyber_agent.llm.call_site import id_mapping, normalise_ids, rename_ids, tree_position
from cyber_agent.llm.demo import DemoModel
from cyber_agent.notebook import ato_frames
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore

REPO = Path(__file__).resolve().parents[2]
TASK = [{"role": "user", "content": DEMO_TASK}]
TIMES = ("_at", "duration_ms", "duration_seconds")
FRAMES = ("traces", "messages", "tool_calls", "goals", "events", "usage", "reports", "validations")
ROOT = "2f8d3a1c-4b6e-4f9a-8c2d-1e5b7a9f3c4d"
OTHER = "9a7b5c3d-1e2f-4a6b-8c0d-2e4f6a8b0c1d"


def _config(mode: str, **extra: Any) -> RunConfig:
    anchor = DEMO_ANCHOR if mode == "recursive" else None
    return RunConfig(model="demo", workspace=str(REPO), agent_mode=mode, root_task_anchor=anchor, **extra)  # type: ignore[arg-type]


def _timeless(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if not k.endswith(TIMES)}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


async def tree_frames(store, root_id: str) -> dict[str, list[dict]]:
    frames = await ato_frames(store, root_id)
    rows = {name: json.loads(getattr(frames, name).to_json(orient="records", date_format="iso")) for name in FRAMES}
    for row in rows["traces"]:
        row.pop("provenance", None)  # names the store each tree was read from, by design (docs/importers.md)
    return normalise_ids(_timeless(rows))


async def record_and_replay(tmp_path: Path, config: RunConfig, store_factory=InMemoryTraceStore):
    path = tmp_path / "run.jsonl"
    recorded_store, replayed_store = store_factory(), store_factory()
    recorder = RecordingLLM(DemoModel(), path)
    recorded = await AgentRunner(trace_store=recorded_store, llm_call=recorder).run_result(TASK, config)
    replay = ReplayLLM(path)
    replayed = await AgentRunner(trace_store=replayed_store, llm_call=replay).run_result(TASK, config)
    assert recorded.trace.status == replayed.trace.status == "completed", replayed.trace.error_message
    replay.assert_all_used()
    assert replay.calls == recorder.recorded
    assert replayed.trace.trace_id != recorded.trace.trace_id  # a new tree, with new ids
    return (await tree_frames(recorded_store, recorded.trace.trace_id),
            await tree_frames(replayed_store, replayed.trace.trace_id), path)


def unordered(frames: dict) -> dict:
    """The frames with the events as a set: children that run in parallel finish in any order."""
    events = sorted(json.dumps({k: v for k, v in e.items() if k != "event_id"}, sort_keys=True) for e in frames["events"])
    return {**frames, "events": events}


async def test_a_legacy_run_with_sub_agents_replays_to_the_same_tree(tmp_path):
    recorded, replayed, path = await record_and_replay(tmp_path, _config("legacy"))
    assert len(recorded["traces"]) > 1  # sub-agents ran
    # The demo explores its regions in parallel: the parent's sub_trace_completed events may swap.
    assert unordered(replayed) == unordered(recorded)
    assert [e["type"] for e in replayed["events"]] == [e["type"] for e in recorded["events"]]
    sites = {e.site for e in load_exchanges(path)}
    assert "root" in sites and any(s and s.startswith("root/") for s in sites)


async def test_a_recursive_run_with_validators_replays_to_the_same_tree(tmp_path):
    recorded, replayed, path = await record_and_replay(
        tmp_path, _config("recursive"), store_factory=lambda: FileSystemTraceStore(tmp_path / f"s{len(list(tmp_path.iterdir()))}"))
    assert any(row["is_validator"] for row in recorded["traces"])
    assert replayed == recorded
    assert any("validator" in (e.site or "") for e in load_exchanges(path))


async def test_parallel_children_replay_by_position_whatever_order_they_finish_in(tmp_path):
    """Children of a parallel batch finish in any order, so the parent's events are compared as a set."""
    recorded, replayed, _ = await record_and_replay(
        tmp_path, _config("recursive", child_execution_mode="parallel", max_parallel_children=2))
    assert unordered(replayed) == unordered(recorded)


async def test_a_changed_run_diverges_naming_the_position(tmp_path):
    path = tmp_path / "run.jsonl"
    await AgentRunner(trace_store=InMemoryTraceStore(), llm_call=RecordingLLM(DemoModel(), path)).run_result(
        TASK, _config("recursive"))
    replay = ReplayLLM(path)
    anchor = {**DEMO_ANCHOR, "constraints": ["numbers come only from data/sales.csv", "round to cents"]}
    result = await AgentRunner(trace_store=InMemoryTraceStore(), llm_call=replay).run_result(
        TASK, _config("recursive").model_copy(update={"root_task_anchor": anchor}))
    assert result.trace.status == "failed"
    assert re.search(r"exchange 0 of .* \(call 0 at root\) diverges: message \d field 'content'",
                     result.trace.error_message or "")


async def test_a_version_1_recording_still_replays_in_recorded_order(tmp_path):
    path = tmp_path / "run.jsonl"
    await AgentRunner(trace_store=InMemoryTraceStore(), llm_call=RecordingLLM(DemoModel(), path)).run_result(
        TASK, _config("recursive"))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**{k: v for k, v in line.items() if k != "site"}, "version": 1}) + "\n"
                            for line in lines))
    replay = ReplayLLM(path)
    result = await AgentRunner(trace_store=InMemoryTraceStore(), llm_call=replay).run_result(TASK, _config("recursive"))
    assert result.trace.status == "completed" and replay.remaining == 0


async def test_replay_through_the_model_spec(tmp_path):
    path = tmp_path / "run.jsonl"
    await AgentRunner(trace_store=InMemoryTraceStore(), llm_call=RecordingLLM(DemoModel(), path)).run_result(
        TASK, _config("legacy"))
    result = await AgentRunner(trace_store=InMemoryTraceStore()).run_result(
        TASK, _config("legacy").model_copy(update={"model": f"replay:{path}"}))
    assert result.trace.status == "completed" and "Top region" in (result.answer or "")


def test_tree_position_drops_the_run_specific_parts():
    assert tree_position(ROOT) == "root"
    assert tree_position(f"{ROOT}@delegate-20261203101500-001@validator-20261203101502-000") == \
        "root/delegate-001/validator-000"
    assert tree_position("custom-slug") == "root"


def test_ids_are_normalised_and_a_recorded_answer_is_renamed_to_this_run():
    old = {"m": f"child {ROOT}@explore-20260101000000-002 of {ROOT}"}
    new = {"m": f"child {OTHER}@explore-20270202000000-002 of {OTHER}"}
    assert normalise_ids(old) == normalise_ids(new) == {"m": "child <id1>@explore-<t>-002 of <id1>"}
    mapping = id_mapping(old, new)
    answer = {"arguments": {"child_trace_id": f"{ROOT}@explore-20260101000000-002", "note": "no id here"}}
    assert rename_ids(answer, mapping) == {"arguments": {"child_trace_id": f"{OTHER}@explore-20270202000000-002",
                                                         "note": "no id here"}}


async def test_a_run_that_goes_further_than_its_recording_names_the_position(tmp_path):
    path = tmp_path / "run.jsonl"
    await AgentRunner(trace_store=InMemoryTraceStore(), llm_call=RecordingLLM(DemoModel(), path)).run_result(
        TASK, _config("legacy"))
    lines = path.read_text().splitlines()
    path.write_text("\n".join(line for line in lines if json.loads(line)["site"] == "root") + "\n")  # children dropped
    store = InMemoryTraceStore()
    result = await AgentRunner(trace_store=store, llm_call=ReplayLLM(path)).run_result(TASK, _config("legacy"))
    children = await store.list_traces(parent_trace_id=result.trace.trace_id, limit=None)
    errors = [child.error_message or "" for child in children]
    assert children and all(child.status == "failed" for child in children)
    assert any("call 0 at root/" in error and "holds only 0" in error for error in errors), errors
