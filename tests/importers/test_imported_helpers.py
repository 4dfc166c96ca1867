"""The notebook helpers on imported trees: frames with source and provenance, budgets, graphs, explorer, stepper."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from redel_fixture import write_run

from cyber_agent.cli import main
from cyber_agent.notebook import (
    ReportStepper,
    TraceExplorer,
    TraceFrames,
    budget_frame,
    budget_table,
    load_runs,
    to_frames,
    trace_graph,
    usage_by_agent,
)
from cyber_agent.notebook.stepper import protocol_items
from cyber_agent.trace import open_store

REAL = Path(__file__).resolve().parents[1] / "data" / "redel"


def test_frames_name_the_source_and_native_traces_their_store(demo_store, tmp_path):
    native_store, native_root = demo_store
    imported = load_runs(REAL / "06d8809127b9e72d", store=f"sqlite:///{tmp_path / 'runs.db'}", progress=False)
    both = TraceFrames.concat([to_frames(native_store, native_root), to_frames(imported.store)])
    traces = both.traces
    assert set(traces["source"]) == {"native", "redel"}
    native = traces[traces["source"] == "native"]
    assert set(native["provenance"]) == {"memory:"} and native["source_ids"].isna().all()
    redel = traces[traces["source"] == "redel"]
    assert set(redel["provenance"]) == {str((REAL / "06d8809127b9e72d" / "state.json").resolve())}
    assert redel["source_ids"].map(lambda ids: "node_id" in ids).all()
    assert (redel["missing"] == "usage,cost,timestamps,model").all()
    assert sorted(redel["depth"]) == [0, 1, 1, 1, 1, 1, 2, 2, 2]
    sqlite_native = to_frames(open_store(f"sqlite:///{tmp_path / 'runs.db'}")).traces  # read back from the file
    assert set(sqlite_native["source"]) == {"redel"}


def test_budget_of_an_imported_tree_shows_unknown_usage_and_limits():
    runs = load_runs(REAL / "06d8809127b9e72d", progress=False)
    frame = budget_frame(runs.store, runs.roots[0])
    assert frame.attrs["limits_source"] == "unknown" and frame.attrs["source"] == "redel"
    assert math.isnan(frame.loc["tokens", "used"]) and math.isnan(frame.loc["duration_seconds", "used"])
    assert frame.loc["agents", "used"] == 9 and frame.loc["children", "used"] == 5
    text = budget_table(frame).to_text()
    assert "limits unknown (redel records none)" in text and "not recorded by the source" in text


def test_trees_usage_explorer_and_stepper_open_imported_trees(tmp_path):
    runs = load_runs(write_run(tmp_path / "run"), progress=False)
    [root] = runs.roots
    graph = trace_graph(runs.store, root)
    assert graph.number_of_nodes() == 4 and graph.number_of_edges() == 3
    usage = usage_by_agent(runs.store, root)
    assert usage["total_tokens"].sum() == to_frames(runs.store).traces["total_tokens"].sum() > 0
    explorer = TraceExplorer(runs.store, root)
    assert "traces=4" in repr(explorer)
    assert protocol_items(to_frames(runs.store, root)) == []  # ReDel records no reports or verdicts
    stepper = ReportStepper(runs.store, root)
    assert stepper.items == []


def test_cli_imports_a_folder_and_names_a_bad_file(tmp_path, capsys):
    write_run(tmp_path / "runs" / "a")
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert main(["import", "--from", "redel", str(tmp_path / "runs"), "--store", url]) == 0
    out = capsys.readouterr().out
    assert "imported 1 file(s) (redel): 1 tree(s), 4 traces" in out
    assert main(["--store", url, "import", "--from", "redel", str(tmp_path / "runs")]) == 0  # again: all there
    assert "already imported" in capsys.readouterr().out
    bad = tmp_path / "notes.json"
    bad.write_text("[1, 2]", encoding="utf-8")
    assert main(["import", "--from", "otel", str(bad), "--store", "memory:"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "resourceSpans" in err
    frames = to_frames(open_store(url))
    assert isinstance(frames.traces, pd.DataFrame) and len(frames.traces) == 4
