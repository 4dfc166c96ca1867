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


@pytest.fixture(scope="module")
def refused_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A recursive demo run with 20 LLM calls (8 kept for the root validator): the agents are refused at 12."""
    from cyber_agent.cli import DEMO_ANCHOR

    store = tmp_path_factory.mktemp("refused")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENT_MAX_LLM_CALLS", "20")
        handle = run_sync(launch(DEMO_TASK, mode="recursive", store=store, workspace=REPO, progress=False,
                                 root_task_anchor=DEMO_ANCHOR))
        handle.wait(timeout=120)
    assert handle.trace_id is not None
    return store, handle.trace_id


def test_budget_frame_displays_formatted_and_stays_data(refused_run: tuple[Path, str]) -> None:
    import pandas as pd

    from cyber_agent.notebook.budget_table import BudgetFrame

    frame = budget_frame(*refused_run)
    assert isinstance(frame, BudgetFrame) and frame["used"].dtype == "float64"  # data for arithmetic
    page = frame._repr_html_()
    assert "e+0" not in page and ".000000" not in page
    assert ">44<" in page and ">12.0%<" in page  # agents remaining 44 of 50, as an integer; percent used
    assert "⚠ refused: llm_calls: used 12 of 12" in page and "background-color" in page
    assert "8 of the LLM calls are kept for the root validator" in page
    assert page == frame._repr_html_()  # no random ids
    assert "4.400000e+01" not in repr(frame) and "llm calls" in repr(frame)
    part = frame.loc[["agents"], ["used"]]
    assert type(part) is pd.DataFrame  # what you derive is a plain frame


def test_the_budget_chart_draws_the_reserved_calls(refused_run: tuple[Path, str]) -> None:
    from cyber_agent.notebook import plot_budget

    fig = plot_budget(*refused_run)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert "8 reserved for\nthe root validator" in texts
    assert any(t.startswith("12 of 20 (60%)") and t.endswith("· refused") for t in texts)
    hatched = [p for p in ax.patches if p.get_hatch() == "xx"]
    assert len(hatched) == 1 and hatched[0].get_x() == pytest.approx(60.0) and hatched[0].get_width() == pytest.approx(40.0)
    llm = [p for p in ax.patches if p.get_hatch() is None and p.get_width() == pytest.approx(60.0)]
    assert llm and llm[0].get_facecolor()[:3] == pytest.approx((0.839, 0.153, 0.157), abs=0.01)  # red, not blue


def test_goal_trees_are_sized_for_the_page(tmp_path: Path) -> None:
    from cyber_agent.notebook import draw_goal_tree, draw_trace_tree
    from cyber_agent.notebook.sample_tree import write_sample_tree

    sample = write_sample_tree(tmp_path, traces=300)
    for fig in (draw_goal_tree(tmp_path, sample.root_trace_id), draw_trace_tree(tmp_path, sample.root_trace_id)):
        width = fig.get_size_inches()[0]
        assert width <= 10.0  # ~1,000 px at 100 dpi: shown at its size, not scaled down
        smallest = min(t.get_fontsize() for t in fig.axes[0].texts)
        assert smallest * 100 / 72 * min(1.0, 1000 / (width * 100)) >= 9  # labels of 9 px or more on the page


def test_a_finished_handle_displays_once_with_its_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython.display

    shown: list[dict[str, str]] = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False, **_: shown.append(obj))
    handle = run_sync(launch(DEMO_TASK, workspace=REPO, progress=False))
    handle.wait(timeout=120)
    handle._ipython_display_()
    assert len(shown) == 1 and "answer: Revenue per region" in shown[0]["text/plain"]


def test_a_running_handle_in_its_launch_cell_points_at_the_view_above(monkeypatch: pytest.MonkeyPatch) -> None:
    # Outside a kernel no widget view exists; the launch cell's view is simulated by the execution count it was made in.
    import IPython.display

    import importlib

    launch_module = importlib.import_module("cyber_agent.notebook.launch")  # the package exports the function by that name

    shown: list[object] = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False, **_: shown.append(obj))
    monkeypatch.setattr(launch_module, "_execution_count", lambda: 7)
    handle = run_sync(launch(DEMO_TASK, model="demo:latency=0.2", workspace=REPO, progress=False))
    handle._view_cell = 7
    handle._ipython_display_()
    assert len(shown) == 1 and isinstance(shown[0], dict)
    assert shown[0]["text/plain"].endswith(": live progress above") and "LLM calls" not in shown[0]["text/html"]
    handle.interrupt()
    handle.wait(timeout=120)
