"""First-contact frictions (#36 item 5): short errors before any view, "did you mean", a forgotten await, a bad id."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from cyber_agent.cli import DEMO_TASK
from cyber_agent.errors import ConfigurationError, TraceNotFoundError
from cyber_agent.llm.resolve import resolve_llm, suggest_spec
from cyber_agent.notebook import RunHandle, TraceExplorer, budget_frame, launch, run_sync, to_frames
from cyber_agent.notebook.launch import PendingLaunch
from cyber_agent.notebook.task_inputs import check_task_inputs, task_inputs

from nb_helpers import REPO


@pytest.mark.parametrize(("spec", "meant"), [
    ("dmeo", "demo"), ("gpt-4o", "openai:gpt-4o"), ("claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"),
    ("opnai:gpt-4o-mini", "openai:gpt-4o-mini"), ("replya:run.jsonl", "replay:run.jsonl"), ("zzz", None),
])
def test_a_mistyped_model_spec_gets_a_did_you_mean(spec: str, meant: str | None) -> None:
    assert suggest_spec(spec) == meant
    with pytest.raises(ConfigurationError) as caught:
        resolve_llm(spec)
    assert (f"did you mean {meant!r}?" in str(caught.value)) is (meant is not None), caught.value


def test_a_mistyped_demo_option_gets_a_did_you_mean() -> None:
    with pytest.raises(ConfigurationError, match="did you mean 'latency'"):
        resolve_llm("demo:latncy=1")


def test_a_bad_model_fails_before_any_view_is_shown(capsys: pytest.CaptureFixture[str]) -> None:
    # progress=None outside a kernel prints text lines: none may appear before the error.
    with pytest.raises(ConfigurationError, match="did you mean 'demo'"):
        run_sync(launch(DEMO_TASK, model="dmeo", workspace=REPO))
    assert capsys.readouterr().out == ""


def test_a_workspace_without_the_demo_input_is_named_up_front(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sales.csv").write_text("region,units,unit_price\n")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    monkeypatch.chdir(notebooks)  # a notebook under notebooks/ with workspace="."
    with pytest.raises(ConfigurationError) as caught:
        run_sync(launch(DEMO_TASK, workspace="."))
    message = str(caught.value)
    assert "the task reads data/sales.csv, which is not in the workspace" in message
    assert "pass workspace='..'" in message
    assert capsys.readouterr().out == ""
    check_task_inputs([{"role": "user", "content": DEMO_TASK}], "..")  # the suggested workspace passes


def test_only_paths_under_data_count_as_inputs() -> None:
    messages = [{"role": "user", "content": "Read data/tasks/shop_a.csv and data/sales.csv, write out/summary.md."},
                {"role": "assistant", "content": "data/other.csv"}]
    assert task_inputs(messages) == ["data/tasks/shop_a.csv", "data/sales.csv"]
    check_task_inputs([{"role": "user", "content": "write report.md"}], "/nonexistent")  # nothing to read: no error


def test_a_forgotten_await_says_so() -> None:
    pending = launch(DEMO_TASK, workspace=REPO, progress=False)
    assert isinstance(pending, PendingLaunch)
    with pytest.raises(AttributeError, match=r"did you forget `await`\? Write `handle = await launch\("):
        pending.result()  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="did you forget `await`"):
        _ = pending.trace_id  # type: ignore[attr-defined]
    assert "did you forget `await`" in repr(pending)
    assert "did you forget `await`" in pending._repr_mimebundle_()["text/html"]
    handle = run_sync(pending)  # still a coroutine: awaiting it afterwards starts the run
    assert isinstance(handle, RunHandle)
    assert handle.wait(timeout=120).status == "completed"


def _only_the_callers_frames(error: BaseException) -> str:
    text = "".join(traceback.format_exception(error))
    assert "During handling of the above exception" not in text, text
    assert "store_base.py" not in text and "asyncio/" not in text and "concurrent/" not in text, text
    return text


def test_a_bad_trace_id_is_one_short_error_naming_it(demo_dir: tuple[Path, str]) -> None:
    store, _ = demo_dir
    for call in (lambda: TraceExplorer(store, "nope"), lambda: to_frames(store, ["nope"]),
                 lambda: budget_frame(store, "nope")):
        with pytest.raises(TraceNotFoundError) as caught:
            call()
        assert "trace 'nope' not found; list traces with store.list_traces()" in str(caught.value)
        _only_the_callers_frames(caught.value)


async def test_a_bad_trace_id_from_a_running_loop_is_short_too(demo_dir: tuple[Path, str]) -> None:
    # In a kernel the read runs on the background loop: its frames are not the caller's either.
    store, _ = demo_dir
    with pytest.raises(TraceNotFoundError) as caught:
        to_frames(store, ["nope"])
    _only_the_callers_frames(caught.value)
