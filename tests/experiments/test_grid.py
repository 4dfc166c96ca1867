"""The grid: cells in a fixed order, keys that depend on what changes a run and nothing else, clear errors."""

from __future__ import annotations

import pytest
from sweep_helpers import REPO, TASKS

from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments import ModelEntry, NumericScorer, Sweep, SweepTask, cell_key, load_tasks


def grid(**changes) -> Sweep:
    values = {"name": "g", "tasks": TASKS[:2], "models": ["fallible:0.1", "fallible:0.3"], "modes": ["legacy", "recursive"],
              "overrides": {"default": {}, "short": {"max_iterations": 5}}, "repeats": 2, "workspace": str(REPO)}
    return Sweep(**{**values, **changes})


def test_cells_cover_the_grid_in_order_with_seeds_per_repeat():
    cells = grid().cells()
    assert len(cells) == 2 * 2 * 2 * 2 * 2
    assert [c.index for c in cells] == list(range(len(cells)))
    first = cells[:3]
    assert [(c.task.id, c.model.name, c.mode, c.config, c.repeat) for c in first] == [
        ("arithmetic-01", "fallible:0.1", "legacy", "default", 0), ("arithmetic-01", "fallible:0.1", "legacy", "default", 1),
        ("arithmetic-01", "fallible:0.1", "legacy", "short", 0)]
    assert [c.seed for c in grid(seed=10).cells()[:2]] == [10, 11]
    assert len({c.key for c in cells}) == len(cells)


def test_keys_ignore_the_sweep_name_scorer_and_secrets_but_not_what_changes_a_run():
    base = grid().cells()
    assert [c.key for c in grid(name="other", scorer=NumericScorer()).cells()] == [c.key for c in base]
    task, model = TASKS[0], ModelEntry(spec="openai:m", options={"base_url": "http://x"})
    key = cell_key(task, model, "legacy", {}, 0, 0)
    assert cell_key(task, ModelEntry(spec="openai:m", options={"base_url": "http://x", "api_key": "sk-1"}), "legacy", {}, 0, 0) == key
    changed = [
        cell_key(task.model_copy(update={"prompt": task.prompt + " "}), model, "legacy", {}, 0, 0),
        cell_key(task, ModelEntry(spec="openai:m", options={"base_url": "http://y"}), "legacy", {}, 0, 0),
        cell_key(task, model, "recursive", {}, 0, 0),
        cell_key(task, model, "legacy", {"max_iterations": 5}, 0, 0),
        cell_key(task, model, "legacy", {}, 1, 0),
        cell_key(task, model, "legacy", {}, 0, 1),
    ]
    assert key not in changed and len(set(changed)) == len(changed)
    assert cell_key(task, model, "legacy", {}, 0, 0) == key  # stable across calls (and processes: no hash())


def test_attempt_ids_are_uuids_derived_from_the_key():
    cell = grid().cells()[0]
    assert cell.trace_id(0) == grid().cells()[0].trace_id(0) != cell.trace_id(1)
    assert len(cell.trace_id(0)) == 36


def test_a_list_of_overrides_is_labelled_by_its_contents():
    sweep = grid(overrides=[{}, {"max_iterations": 5, "temperature": 0.5}])
    assert list(sweep.configs) == ["default", "max_iterations=5,temperature=0.5"]


@pytest.mark.parametrize(("changes", "setting"), [
    ({"tasks": [TASKS[0], TASKS[0]]}, "sweep.tasks"),
    ({"models": []}, "sweep.models"),
    ({"models": ["demo", "demo"]}, "sweep.models"),
    ({"modes": ["turbo"]}, "sweep.modes"),
    ({"repeats": 0}, "sweep.repeats"),
    ({"overrides": {"x": {"model": "demo"}}}, "sweep.overrides.x.model"),
    ({"overrides": {"x": {"max_iterations": 0}}}, "sweep.overrides.x"),
    ({"overrides": {"x": {"max_iteration": 3}}}, "sweep.overrides.x"),
    ({"tasks": [SweepTask(id="t", prompt="p")]}, "task t.criteria"),
    ({"tasks": [SweepTask(id="t", prompt="p", expected="many")], "modes": ["legacy"], "scorer": NumericScorer()}, "task t.expected"),
])
def test_bad_grids_are_refused_naming_the_setting(changes, setting):
    with pytest.raises(ConfigurationError) as info:
        grid(**changes)
    assert info.value.setting == setting


def test_task_files_load_and_their_errors_name_the_line(tmp_path):
    assert [t.id for t in load_tasks(REPO / "data" / "tasks" / "tasks.jsonl")][:2] == ["arithmetic-01", "arithmetic-02"]
    toml = tmp_path / "tasks.toml"
    toml.write_text('[[tasks]]\nid = "a"\nprompt = "What is 2 + 2?"\nexpected = "4"\nscorer = {kind = "numeric"}\n')
    (task,) = load_tasks(toml)
    assert isinstance(task.scorer, NumericScorer)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "prompt": "p"}\n{"id": "b"}\n')
    with pytest.raises(ConfigurationError) as info:
        load_tasks(bad)
    assert info.value.setting == "tasks[2].prompt"
    with pytest.raises(ConfigurationError, match="use a .jsonl, .json or .toml"):
        load_tasks(tmp_path / "tasks.csv")
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_tasks(tmp_path / "missing.jsonl")
