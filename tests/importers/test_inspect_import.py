"""Inspect AI logs made by a real offline eval (mockllm, a tool, an as_tool sub-agent), imported."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="the inspect extra (in dev) is not installed")

from inspect_eval import read_log, run_eval  # noqa: E402

from cyber_agent.errors import ImportFormatError  # noqa: E402
from cyber_agent.importers import import_runs  # noqa: E402
from cyber_agent.importers._plan import import_trace_id  # noqa: E402
from cyber_agent.trace import open_store  # noqa: E402


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return run_eval(tmp_path_factory.mktemp("inspect"))


@pytest.mark.parametrize("which", [0, 1], ids=["eval", "json"])
async def test_each_sample_epoch_is_a_tree_with_its_messages_usage_and_scores(logs, which):
    path = logs[which]
    log = read_log(path)
    store = open_store("memory:")
    summary = await import_runs([path], store, source="inspect")
    assert len(summary.roots) == len(log.samples) == 4
    for sample in log.samples:
        root_id = import_trace_id("inspect", f"{log.eval.eval_id}/{sample.id}/{sample.epoch}")
        records = await store.read_records([root_id])
        root, children = records[0], records[1:]
        assert root.trace_id == root_id
        assert [m["role"] for m in root.messages] == [m.role for m in sample.messages]
        usage = sample.model_usage["mockllm/model"]
        tree_in = sum(r.trace["total_prompt_tokens"] for r in records)
        tree_out = sum(r.trace["total_completion_tokens"] for r in records)
        assert (tree_in, tree_out) == (usage.input_tokens, usage.output_tokens)  # main and helper calls together
        [child] = children
        assert child.trace["parent_trace_id"] == root_id and child.trace["lineage"]["depth"] == 1
        assert child.trace["name"] == "helper"
        assert [m["role"] for m in child.messages].count("assistant") == 2  # add, then submit
        events = await store.get_events(root_id)
        [started] = [e for e in events if e.type == "sub_trace_started"]
        [call] = [e for e in events if e.type == "progress"]
        assert started.payload["trace_id"] == child.trace_id
        helper_call = next(c for m in sample.messages if m.role == "assistant" for c in m.tool_calls or ())
        assert call.payload["tool_call_id"] == helper_call.id == child.trace["provenance"]["started_by_call"]
        [validation] = root.trace["protocol"]["validations"]
        assert validation["verdict"] == {"C": "pass", "I": "fail"}[sample.scores["includes"].value]
        ids = root.trace["provenance"]["ids"]
        assert (ids["sample_id"], ids["epoch"]) == (str(sample.id), str(sample.epoch))
        assert "cost" in root.trace["provenance"]["missing"]  # mockllm records no cost


async def test_a_file_that_is_not_an_inspect_log_names_itself_and_the_first_misfit(tmp_path):
    fake = tmp_path / "log.json"
    fake.write_text('{"version": 2, "status": "success"}', encoding="utf-8")
    with pytest.raises(ImportFormatError) as caught:
        await import_runs([fake], open_store("memory:"), source="inspect")
    assert str(fake) in str(caught.value) and "eval" in str(caught.value)


async def test_a_folder_of_logs_imports_both_formats_and_detects_them(logs):
    summary = await import_runs([logs[0].parent], open_store("memory:"))  # formats detected
    assert [i.source for i in summary.imported] == ["inspect"] and len(summary.roots) == 4
    # the .json is the same eval written again: its ids meet the trees of the first file
    [again] = summary.skipped
    assert again.path.suffix in (".eval", ".json") and again.reason.startswith("already imported")


async def test_scores_step_through_the_stepper_as_validations(logs):
    from cyber_agent.notebook.frames import ato_frames
    from cyber_agent.notebook.stepper import protocol_items

    store = open_store("memory:")
    summary = await import_runs([logs[0]], store)
    frames = await ato_frames(store, summary.roots[0])
    items = protocol_items(frames)
    kinds = [item.kind for item in items]
    assert "validation" in kinds and items[kinds.index("validation")].verdict in ("pass", "fail")
    assert set(frames.verdicts["scope"]) == {"root"}
