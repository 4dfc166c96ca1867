"""`cyber-agent sweep FILE`: a TOML grid runs, resumes, and its mistakes are named."""

from __future__ import annotations

import pytest
from sweep_helpers import REPO

from cyber_agent.cli import main
from cyber_agent.experiments.sweep_file import load_sweep_file

GRID = f"""
name = "cli"
tasks = "{REPO / 'data' / 'tasks' / 'tasks.jsonl'}"
task_ids = ["arithmetic-01", "lookup-01"]
models = ["fallible:0.5", {{ spec = "fallible", label = "perfect" }}]
modes = ["legacy", "recursive"]
workspace = "{REPO}"
concurrency = 4
[limits]
initial = 2
[limits.providers.fallible]
initial = 3
"""


def test_a_toml_grid_runs_and_a_second_run_does_only_the_work_left(tmp_path, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID, encoding="utf-8")
    store = f"sqlite:///{tmp_path / 'sweep.db'}"
    assert main(["--store", store, "sweep", str(grid), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "perfect" in out and "fallible:0.5" in out and "recursive" in out
    assert "8 cells: 8 run now, 0 already finished, 0 failed after retries" in out
    assert main(["--store", store, "sweep", str(grid)]) == 0
    captured = capsys.readouterr()
    assert "8 cells: 0 run now, 8 already finished" in captured.out
    assert "cli [########################] 8/8" in captured.err  # the progress bar


def test_the_file_sets_limits_and_relative_paths(tmp_path):
    (tmp_path / "tasks.toml").write_text('[[tasks]]\nid = "a"\nprompt = "What is 2 + 3?"\nexpected = "5"\n', encoding="utf-8")
    grid = tmp_path / "grid.toml"
    grid.write_text('name = "rel"\ntasks = "tasks.toml"\nmodels = ["demo"]\n[limits]\ninitial = 3\n', encoding="utf-8")
    plan = load_sweep_file(grid)
    assert plan.sweep.workspace == str(tmp_path) and [t.id for t in plan.sweep.tasks] == ["a"]
    assert plan.limits.limiter("demo").limit == 3 and plan.backend == "asyncio" and plan.store is None


@pytest.mark.parametrize(("text", "message"), [
    ('name = "x"\ntasks = "t.jsonl"\nmodels = ["demo"]\nmodez = ["legacy"]\n', "sweep file modez"),
    ('name = "x"\ntasks = "missing.jsonl"\nmodels = ["demo"]\n', "cannot read"),
    ('name = "x"\ntasks = []\nmodels = ["demo"]\nmodes = ["fast"]\n', "sweep file modes.0"),
    ('name = "x\n', "is not valid TOML"),
])
def test_bad_files_exit_2_naming_the_key(tmp_path, capsys, text, message):
    grid = tmp_path / "grid.toml"
    grid.write_text(text, encoding="utf-8")
    assert main(["--store", "memory:", "sweep", str(grid)]) == 2
    assert message in capsys.readouterr().err
