"""launch / RunHandle: a demo run from sync and async code, live progress, stop, errors."""

from __future__ import annotations

import asyncio
import time

import pytest

from cyber_agent.cli import DEMO_TASK
from cyber_agent.core.config import RunConfig
from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.types import LLMResponse, ToolCall, Usage
from cyber_agent.notebook import RunHandle, launch, run_config, run_sync, to_frames
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore

from nb_helpers import REPO


def test_launch_from_sync_code_runs_the_demo_and_counts_the_whole_tree(tmp_path):
    handle = run_sync(launch(DEMO_TASK, store=tmp_path / "store", workspace=REPO, progress=False))
    assert isinstance(handle, RunHandle) and handle.trace_id
    result = handle.wait(timeout=120)
    assert handle.done
    assert result.status == "completed"
    assert "Top region: North with revenue 951.75" in result.answer
    frames = to_frames(tmp_path / "store", handle.trace_id)
    progress = handle.snapshot
    assert progress.status == "completed"
    assert progress.agents == len(frames.traces) == 5
    assert progress.depth == 1
    assert progress.llm_calls == int((frames.messages["message_role"] == "assistant").sum())
    assert progress.tokens == int(frames.traces["total_tokens"].sum())
    assert progress.running == 0 and progress.current == ()


async def test_launch_inside_a_running_loop_returns_at_once_and_result_awaits():
    handle = await launch(DEMO_TASK, workspace=REPO, progress=False)
    assert isinstance(handle.store, InMemoryTraceStore)
    result = await handle.result()
    assert result.status == "completed"
    assert result.trace.trace_id == handle.trace_id
    assert (await handle.store.get_trace(handle.trace_id)).status == "completed"


def test_text_progress_outside_a_notebook(tmp_path, capsys):
    run_sync(launch(DEMO_TASK, workspace=REPO)).wait(timeout=120)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("[completed] 5 agents (0 running, depth 1)")
    assert "tokens" in lines[-1] and "LLM calls" in lines[-1]


def _endless_model_and_tools() -> tuple[object, ToolRegistry]:
    registry = ToolRegistry()

    def tick() -> str:
        """Do one small step."""
        return "tick"

    registry.register(tick)
    turns = 0

    async def model(messages, model, tools=None, temperature=None, *, on_delta=None) -> LLMResponse:
        nonlocal turns
        turns += 1
        await asyncio.sleep(0.01)
        return LLMResponse(content="", tool_calls=[ToolCall(id=f"t{turns}", name="tick")],
                           usage=Usage(prompt_tokens=3, completion_tokens=1))

    return model, registry


def test_stop_ends_a_running_run_with_its_reason():
    model, registry = _endless_model_and_tools()
    handle = run_sync(launch("tick forever", llm_call=model, tool_registry=registry, max_iterations=10_000,
                             progress=False, poll_interval=0.05))
    deadline = time.monotonic() + 30
    while handle.snapshot.llm_calls < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not handle.done
    flagged = handle.stop("enough ticks")
    assert flagged == [handle.trace_id]
    result = handle.wait(timeout=30)
    assert result.status == "stopped"
    assert "enough ticks" in result.trace.error_message
    assert handle.status == "stopped"


def test_mode_is_validated_before_anything_runs():
    with pytest.raises(ConfigurationError, match="mode"):
        run_sync(launch(DEMO_TASK, mode="sideways", progress=False))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="agent_mode"):
        run_config(agent_mode="legacy")


def test_mode_goes_to_run_config_when_the_field_exists():
    config = run_config(mode="legacy", model="demo", max_iterations=5, name="probe")
    assert config.max_iterations == 5 and config.name == "probe"
    if "agent_mode" in RunConfig.model_fields:
        assert config.agent_mode == "legacy"


def test_errors_before_the_trace_exists_are_raised_by_launch():
    with pytest.raises(ConfigurationError):
        run_sync(launch(DEMO_TASK, model="nosuchprovider:model-x", progress=False))


def test_launch_takes_provider_settings_and_records_them(tmp_path):
    handle = run_sync(launch(DEMO_TASK, store=tmp_path / "store", workspace=REPO, progress=False,
                             provider={"timeout": 5, "retries": 1}, tool_dialect="native"))
    result = handle.wait(timeout=120)
    assert handle.config.provider.timeout == 5
    snapshot = result.trace.run_config
    assert snapshot is not None
    assert (snapshot.config["provider"]["timeout"], snapshot.config["provider"]["retries"]) == (5.0, 1)
    assert snapshot.config["tool_dialect"] == "native"
    with pytest.raises(Exception, match="retries"):
        run_sync(launch(DEMO_TASK, progress=False, provider={"retries": -1}))


@pytest.mark.parametrize("anchor, problem", [
    (None, "recursive mode needs one"),
    ("report the revenue", "must be a dict, got str"),
    ({"objective": "x"}, "completion_criteria: Field required"),
    ({"objective": "x", "completion_criteria": []}, "completion_criteria: List should have at least 1 item"),
])
def test_a_bad_anchor_is_refused_by_launch_before_anything_starts(anchor, problem, capsys):
    store = InMemoryTraceStore()
    with pytest.raises(ConfigurationError) as error:
        run_sync(launch(DEMO_TASK, mode="recursive", store=store, root_task_anchor=anchor))
    assert error.value.setting == "root_task_anchor"
    assert problem in str(error.value) and "'completion_criteria': ['a checkable statement', ...]" in str(error.value)
    assert run_sync(store.list_traces(limit=None)) == [] and capsys.readouterr().out == ""
