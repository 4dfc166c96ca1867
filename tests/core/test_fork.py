"""Fork and exact replay of stored trees (cyber_agent/core/fork.py), counting the calls that reach a model.

Every tree is recorded by default in its store; a fork answers recorded requests from there, and
the counting wrapper below sees only the calls that go live.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.core.config import RunConfig
from cyber_agent.core.fork import At, Brief, MessageChange, ModelChange, ToolResultChange, fork, fork_origin, replay
from cyber_agent.core.fork_diff import DIFF_COLUMNS, fork_diff
from cyber_agent.core.runner import AgentRunner, default_registry
from cyber_agent.errors import ConfigurationError, ReplayDivergenceError
from cyber_agent.llm import ScriptedModel
from cyber_agent.llm.call_site import tree_position
from cyber_agent.llm.cassette import CassetteLLM, expand_records
from cyber_agent.llm.demo import DemoModel
from cyber_agent.llm.types import LLMResponse
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.sqlite_store import SQLiteTraceStore
from cyber_agent.trace.store_base import BaseTraceStore
from tests.llm.test_replay_trees import tree_frames, unordered
from tests.trace.conftest import STORE_FACTORIES

REPO = Path(__file__).resolve().parents[2]
TASK = [{"role": "user", "content": DEMO_TASK}]


class Counting:
    """An LLMCall that counts the calls it forwards, per tree position."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    async def __call__(self, messages: list[dict[str, Any]], model: str, tools: Any = None, temperature: Any = None,
                       *, on_delta: Any = None) -> LLMResponse:
        self.calls += 1
        response: LLMResponse = await self.inner(messages, model, tools, temperature, on_delta=on_delta)
        return response


def _config(mode: str, **extra: Any) -> RunConfig:
    anchor = DEMO_ANCHOR if mode == "recursive" else None
    return RunConfig(model="demo", workspace=str(REPO), agent_mode=mode, root_task_anchor=anchor, **extra)  # type: ignore[arg-type]


async def _record(store: BaseTraceStore, config: RunConfig, task: list[dict[str, Any]] = TASK) -> tuple[str, int]:
    model = Counting(DemoModel())
    result = await AgentRunner(trace_store=store, llm_call=model).run_result(task, config)
    assert result.trace.status == "completed", result.trace.error_message
    return result.trace.trace_id, model.calls


def _without_lineage(frames: dict[str, Any]) -> dict[str, Any]:
    """The frames with the fork root's `context.forked_from` dropped: the one intended difference of a replay."""
    traces = [{**row, "context": {k: v for k, v in (row.get("context") or {}).items() if k != "forked_from"}}
              for row in frames["traces"]]
    return {**frames, "traces": traces}


async def _position(store: BaseTraceStore, root_id: str, position: str) -> str:
    for record in await store.read_records([root_id], messages=False, events=False):
        if tree_position(record.trace["trace_id"]) == position:
            return str(record.trace["trace_id"])
    raise AssertionError(f"no {position} under {root_id}")


async def _calls_by_site(store: BaseTraceStore, root_id: str) -> dict[str, int]:
    out = {}
    for record in await store.read_records([root_id], messages=False, events=False):
        out[tree_position(record.trace["trace_id"])] = len(await store.get_exchanges(record.trace["trace_id"]))
    return out


# ---- exact replay: zero calls, an equal tree ---------------------------------------------------

@pytest.mark.parametrize("mode, extra", [
    ("recursive", {}),
    ("recursive", {"child_execution_mode": "parallel", "max_parallel_children": 2}),
    ("legacy", {}),  # the legacy demo explores its regions in parallel
])
async def test_an_exact_replay_makes_no_call_and_rebuilds_an_equal_tree(mode: str, extra: dict[str, Any]) -> None:
    store = InMemoryTraceStore()
    root, calls = await _record(store, _config(mode, **extra))
    result = await replay(store, root)
    assert result.trace.status == "completed", result.trace.error_message
    assert (result.live, result.replayed) == (0, calls)
    original, again = await tree_frames(store, root), await tree_frames(store, result.trace.trace_id)
    assert len(original["traces"]) > 1
    if mode == "recursive" and not extra:
        assert any(row["is_validator"] for row in original["traces"])
        assert _without_lineage(again) == original
    else:  # children that run in parallel finish in any order: the parent's events as a set
        assert unordered(_without_lineage(again)) == unordered(original)
    origin = fork_origin(result.trace)
    assert origin is not None and origin.trace_id == root and origin.change is None and origin.generation == 1


# ---- forks: only what diverges calls a model -------------------------------------------------

async def test_a_fork_at_a_leaf_calls_the_leaf_and_only_the_ancestor_turns_that_changed() -> None:
    store = InMemoryTraceStore()
    root, _ = await _record(store, _config("legacy"))
    leaf = await _position(store, root, "root/explore-003")
    live = Counting(DemoModel())
    result = await fork(store, root, at=leaf, change=Brief(task="Compute the revenue (units × unit_price) of region "
                                                               "West in data/sales.csv, in cents."), llm=live)
    assert result.trace.status == "completed", result.trace.error_message
    assert live.calls == result.live > 0
    calls = await _calls_by_site(store, result.trace.trace_id)
    assert result.live_by_site["root/explore-003"] == calls["root/explore-003"]  # the whole leaf ran live
    assert set(result.live_by_site) <= {"root/explore-003", "root"}  # no sibling went live
    rows = (await fork_diff(store, result.trace.trace_id)).set_index("position")
    assert list(rows.reset_index().columns) == list(DIFF_COLUMNS)
    assert rows.loc["root", "live_calls"] == result.live_by_site.get("root", 0)  # the root's changed requests only
    assert rows.loc["root", "replayed_calls"] >= 1  # its turns before the delegation were not re-run
    assert {rows.loc[f"root/explore-00{i}", "state"] for i in (1, 2, 4)} == {"replayed"}
    assert rows.loc["root/explore-003", "state"] == "live"


async def test_a_fork_at_depth_2_with_parallel_children_never_reruns_an_unaffected_sibling() -> None:
    store = InMemoryTraceStore()
    root, _ = await _record(store, _config("recursive", child_execution_mode="parallel", max_parallel_children=2))
    child = await _position(store, root, "root/delegate-001/explore-002")
    live = Counting(DemoModel())
    result = await fork(store, root, at=child, change=Brief(fields={"constraints": ["round to whole units"]}), llm=live)
    assert result.trace.status == "completed", result.trace.error_message
    assert result.live == live.calls > 0
    touched = {site for site in result.live_by_site}
    assert any(site.startswith("root/delegate-001/explore-002") for site in touched)
    for sibling in ("explore-001", "explore-003", "explore-004"):
        assert not any(site.startswith(f"root/delegate-001/{sibling}") for site in touched), touched
        assert result.replayed_by_site[f"root/delegate-001/{sibling}"] > 0


async def test_forking_a_depth_3_node_never_reruns_its_parents_earlier_children() -> None:
    store = InMemoryTraceStore()
    root, _ = await _record(store, _config("recursive"))
    node = await _position(store, root, "root/delegate-001/explore-003")  # root, delegate, explore: the third level
    result = await fork(store, root, at=node, change=ModelChange(model="fallible:rate=1,seed=3"))
    assert result.trace.status == "completed", result.trace.error_message
    assert result.live_by_site.get("root/delegate-001/explore-003", 0) > 0
    for earlier in ("explore-001", "explore-002"):
        assert not any(site.startswith(f"root/delegate-001/{earlier}") for site in result.live_by_site)
        assert result.replayed_by_site[f"root/delegate-001/{earlier}"] > 0
    rows = (await fork_diff(store, result.trace.trace_id)).set_index("position")
    assert rows.loc["root/delegate-001/explore-001", "state"] == "replayed"
    assert rows.loc["root/delegate-001/explore-003", "live_calls"] > 0


async def test_a_fork_of_a_fork_replays_the_first_fork_and_records_its_lineage() -> None:
    store = InMemoryTraceStore()
    root, _ = await _record(store, _config("legacy"))
    first = await fork(store, root, at=await _position(store, root, "root/explore-002"),
                       change=Brief(task="Compute the revenue (units × unit_price) of region North in data/sales.csv."
                                         " Show the rows."))
    again = await replay(store, first.trace.trace_id)
    assert (again.live, again.trace.status) == (0, "completed")  # the fork recorded its own exchanges
    live = Counting(DemoModel())
    second = await fork(store, first.trace.trace_id, at=await _position(store, first.trace.trace_id, "root/explore-004"),
                        change=Brief(task="Compute the revenue (units × unit_price) of region South in data/sales.csv. "
                                          "Show the rows."), llm=live)
    assert second.trace.status == "completed", second.trace.error_message
    assert not any(site.startswith("root/explore-002") for site in second.live_by_site)  # the first change, replayed
    assert second.live_by_site["root/explore-004"] > 0
    origin = fork_origin(second.trace)
    assert origin is not None and (origin.trace_id, origin.root_of_lineage, origin.generation) == \
        (first.trace.trace_id, root, 2)
    assert origin.change == {"kind": "brief", "fields": {}, "task": "Compute the revenue (units × unit_price) of "
                             "region South in data/sales.csv. Show the rows."}


async def test_a_changed_final_reply_costs_no_call_and_a_changed_tool_result_reruns_what_read_it() -> None:
    store = InMemoryTraceStore()
    root, _ = await _record(store, _config("legacy"))
    messages = await store.get_trace_messages(root)
    final = [m for m in messages if m.role == "assistant"][-1]
    changed = await fork(store, root, at=At(root, final.sequence), change=MessageChange(content="North, by far."),
                         exact=True)
    assert (changed.live, changed.answer) == (0, "North, by far.")
    read = next(m for m in messages if m.role == "tool" and m.tool_name == "read_file")
    live = Counting(DemoModel())
    result = await fork(store, root, at=(root, read.sequence), change=ToolResultChange(content="region,units,unit_price\n"
                                                                                              "East,1,2.00\n"), llm=live)
    forked = await store.get_trace_messages(result.trace.trace_id)
    assert next(m for m in forked if m.role == "tool" and m.tool_name == "read_file").text.startswith("region,units")
    assert result.live_by_site["root"] > 0 and result.replayed_by_site["root"] == 2  # the turns before the read


async def test_a_request_that_matches_nothing_is_never_answered_from_another_recording() -> None:
    store = InMemoryTraceStore()
    other_task = [{"role": "user", "content": "Compute 17 * 23 with evaluate."}]
    root, _ = await _record(store, _config("legacy"))
    await _record(store, _config("legacy"), task=other_task)  # a second recording in the same store
    task_message = next(m for m in await store.get_trace_messages(root) if m.role == "user")
    exact = await fork(store, root, at=(root, task_message.sequence), change=MessageChange(content=other_task[0]["content"]),
                       exact=True)
    assert exact.trace.status == "failed" and "matches no exchange" in (exact.trace.error_message or "")
    live = Counting(DemoModel())
    result = await fork(store, root, at=(root, task_message.sequence), change=MessageChange(content=other_task[0]["content"]),
                        llm=live)
    assert result.replayed == 0 and result.live == live.calls > 0


async def test_the_cassette_names_the_first_difference_of_a_miss() -> None:
    store = InMemoryTraceStore()
    model = ScriptedModel(["hello"])
    result = await AgentRunner(trace_store=store, llm_call=model).run_result(
        [{"role": "user", "content": "hi"}], RunConfig(model="scripted", agent_mode="legacy"))
    exchanges = expand_records(result.trace.trace_id, await store.get_exchanges(result.trace.trace_id))
    assert [e.response.content for e in exchanges] == ["hello"]
    cassette = CassetteLLM(exchanges)
    with pytest.raises(ReplayDivergenceError, match=r"at root matches no exchange .*nearest is exchange 0.*message"):
        await cassette([{"role": "user", "content": "bye"}], "scripted")


async def test_side_effect_tools_of_replayed_turns_are_not_run_again_unless_asked() -> None:
    store = InMemoryTraceStore()
    runs: list[str] = []

    def launch(target: str) -> str:
        runs.append(target)
        return f"launched {target} (#{len(runs)})"

    registry = default_registry()
    registry.register(launch, name="launch", description="Launch a target.", side_effects=True)
    script = [ScriptedModel.tool_call("launch", {"target": "probe"}), "done"]
    result = await AgentRunner(trace_store=store, llm_call=ScriptedModel(script), tool_registry=registry).run_result(
        [{"role": "user", "content": "launch the probe"}], RunConfig(model="scripted", agent_mode="legacy"))
    assert runs == ["probe"]
    again = await replay(store, result.trace.trace_id, tool_registry=registry)
    assert (again.live, again.trace.status, runs) == (0, "completed", ["probe"])
    tool = next(m for m in await store.get_trace_messages(again.trace.trace_id) if m.role == "tool")
    assert tool.text == "launched probe (#1)"  # the recorded result
    rerun = await fork(store, result.trace.trace_id, exact=True, rerun_side_effects=True, tool_registry=registry)
    assert runs == ["probe", "probe"] and rerun.trace.status == "failed"  # a new result: the next request differs
    launched = next(m for m in await store.get_trace_messages(result.trace.trace_id) if m.role == "tool")
    changed = await fork(store, result.trace.trace_id, at=(result.trace.trace_id, launched.sequence),
                         change=ToolResultChange(content="refused"), tool_registry=registry)
    assert changed.trace.status == "failed" and "original model 'scripted' cannot be resolved" in \
        (changed.trace.error_message or "")  # the reply to the new result would need a live model


async def test_recording_can_be_turned_off_and_a_bad_fork_point_is_named() -> None:
    store = InMemoryTraceStore()
    unrecorded, _ = await _record(store, _config("recursive", record_exchanges=False))
    calls = await _calls_by_site(store, unrecorded)
    assert len(calls) > 3 and set(calls.values()) == {0}  # children and validators follow their root
    with pytest.raises(ConfigurationError, match="recorded no model exchanges"):
        await replay(store, unrecorded)
    root, _ = await _record(store, _config("legacy"))
    with pytest.raises(ConfigurationError, match="give both at= and change="):
        await fork(store, root, change=MessageChange(content="x"))
    with pytest.raises(ConfigurationError, match="legacy child .*Brief\\(task="):
        await fork(store, root, at=await _position(store, root, "root/explore-001"), change=Brief(fields={"x": 1}))


def test_the_fork_command_replays_then_forks_a_stored_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    from cyber_agent.cli import main

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    root, calls = asyncio.run(_record(SQLiteTraceStore(tmp_path / "runs.db"), _config("legacy")))
    assert main(["--store", url, "fork", root]) == 0
    out = capsys.readouterr().out
    assert f"{calls} model calls replayed, 0 live" in out and "root/explore-004" in out
    child = asyncio.run(_position(SQLiteTraceStore(tmp_path / "runs.db"), root, "root/explore-001"))
    assert main(["--store", url, "fork", root, "--at", child, "--task", "Compute the revenue (units × unit_price) of "
                 "region East in data/sales.csv, twice."]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:2] == ["root/explore-001", "live"] for line in lines), lines
    assert main(["--store", url, "fork", root, "--at", child, "--brief", "[1]"]) == 2
    assert "--brief: must be a JSON object" in capsys.readouterr().err


async def test_an_exact_replay_includes_tool_result_summaries() -> None:
    from cyber_agent.llm import FunctionModel

    store = InMemoryTraceStore()
    registry = default_registry()
    registry.register(lambda: "row " * 600, name="dump", description="Dump the table.")
    calls = {"summary": 0}

    def reply(messages: list[dict[str, Any]], tools: Any) -> Any:
        if not tools:  # the payload summarizer asks without tools
            calls["summary"] += 1
            return "a table of 600 rows"
        if not any(m.get("role") == "tool" for m in messages):
            return ScriptedModel.tool_call("dump", {}, call_id="c1")
        return "done"

    result = await AgentRunner(trace_store=store, llm_call=FunctionModel(reply), tool_registry=registry).run_result(
        [{"role": "user", "content": "dump it"}], RunConfig(model="fn", agent_mode="legacy", tool_result_max_bytes=500))
    assert result.trace.status == "completed" and calls["summary"] == 1
    again = await replay(store, result.trace.trace_id, tool_registry=registry)
    assert (again.live, again.replayed, again.trace.status) == (0, 3, "completed")
    tool = next(m for m in await store.get_trace_messages(again.trace.trace_id) if m.role == "tool")
    assert "a table of 600 rows" in tool.text
    original, rebuilt = await tree_frames(store, result.trace.trace_id), await tree_frames(store, again.trace.trace_id)
    assert _without_lineage(rebuilt) == original


def test_a_tree_copied_to_another_store_replays_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    from cyber_agent.cli import main
    from cyber_agent.trace import FileSystemTraceStore

    root, calls = asyncio.run(_record(FileSystemTraceStore(tmp_path / "files"), _config("recursive")))
    assert main(["--store", f"file:{tmp_path / 'files'}", "copy", "--to", f"sqlite:///{tmp_path / 'copy.db'}", root]) == 0
    copied = SQLiteTraceStore(tmp_path / "copy.db")
    result = asyncio.run(replay(copied, root))
    assert (result.live, result.replayed, result.trace.status) == (0, calls, "completed")


@pytest.mark.parametrize("kind", sorted(STORE_FACTORIES))
async def test_every_store_records_a_tree_that_replays_exactly(kind: str, tmp_path: Path) -> None:
    open_store = STORE_FACTORIES[kind](tmp_path / "traces")
    root, calls = await _record(open_store(), _config("legacy"))
    result = await replay(open_store(), root)  # a fresh instance where the store can be reopened
    assert (result.live, result.replayed, result.trace.status) == (0, calls, "completed")


def test_the_fork_keeps_the_provider_an_auto_dialect_was_chosen_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from cyber_agent.core.fork import _provider_of

    assert _provider_of(RunConfig(model="demo")) == "demo"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # resolving builds a client; nothing is sent
    assert _provider_of(RunConfig(model="openai:qwen2.5:7b")) == "openai"
    assert _provider_of(RunConfig(model="scripted")) is None  # an injected model: "native unless set", as it ran
