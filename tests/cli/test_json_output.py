"""`--json` on run, show, list and sweep: one document each, valid against the published schema; `list`, `--version`."""

from __future__ import annotations

import contextlib
import io
import json
from importlib.metadata import version

import pytest
from cli_procs import REPO, cli, validated

from cyber_agent.cli import DEMO_TASK, main


def _main_json(*args: str) -> dict:
    """`main(ARGS + --json)` in this process (quicker than a subprocess); its one document, validated."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main([*args, "--json"])
    assert out.getvalue().count("\n") == 1, out.getvalue()  # exactly one document
    return validated(out.getvalue())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A SQLite store with four runs, oldest first: legacy demo, a chat, a stopped run, a recursive demo.

    The chat runs in a subprocess (the command line as users run it); the others in this process.
    """
    url = f"sqlite:///{tmp_path_factory.mktemp('cli-json') / 'runs.db'}"
    legacy = _main_json("--store", url, "demo", "--mode", "legacy")
    done = cli("--store", url, "run", "say hi", "--json", cwd=REPO)
    assert done.returncode == 0 and done.stdout.count("\n") == 1, done.stdout
    chat = validated(done.stdout)
    cut = _main_json("--store", url, "run", DEMO_TASK, "--max-iterations", "1")
    return url, [legacy, chat, cut, _main_json("--store", url, "demo")]


def test_run_prints_one_valid_document_for_the_finished_run(store):
    url, runs = store
    legacy, chat, cut, recursive = runs
    assert legacy["status"] == "completed" and "North" in legacy["answer"] and legacy["totals"]["traces"] == 5
    assert legacy["agent_mode"] == "legacy" and legacy["budget_used"] is None and legacy["shell_tools"] == "off"
    assert recursive["agent_mode"] == "recursive" and recursive["budget_used"]["agents"] >= 1
    assert cut["status"] != "completed" and cut["error"] and cut["answer"] is None
    assert chat["store"] == url and chat["show_command"] == f"cyber-agent --store {url} show {chat['trace_id']}"


def test_a_failed_run_exits_1_with_its_document(capsys):
    assert main(["--store", "memory:", "run", DEMO_TASK, "--max-iterations", "1", "--json"]) == 1
    assert validated(capsys.readouterr().out)["status"] != "completed"


def test_show_json_lists_the_tree_depth_first_with_totals(store):
    url, runs = store
    legacy = runs[0]
    done = cli("--store", url, "show", legacy["trace_id"], "--json", cwd=REPO)
    assert done.returncode == 0
    document = validated(done.stdout)
    rows = document["traces"]
    assert document["kind"] == "show" and rows[0]["trace_id"] == legacy["trace_id"] and rows[0]["depth"] == 0
    assert [r["parent_trace_id"] for r in rows[1:]] == [legacy["trace_id"]] * 4
    assert [r["trace_id"] for r in rows[1:]] == sorted(r["trace_id"] for r in rows[1:])  # oldest child first
    assert document["totals"] == legacy["totals"]
    assert document["totals"]["tokens"] == sum(r["tokens"] for r in rows)


def _listed(url, *args):
    document = _main_json("--store", url, "list", *args)
    return [row["trace_id"] for row in document["traces"]], document


def test_list_prints_roots_newest_first(store):
    url, runs = store
    done = cli("--store", url, "list", "--mode", "legacy", "--json", cwd=REPO)
    assert done.returncode == 0, done.stderr
    document = validated(done.stdout)
    assert [row["trace_id"] for row in document["traces"]] == [r["trace_id"] for r in runs[2::-1]]
    assert document["filters"]["agent_mode"] == "legacy" and document["more"] is False


def test_list_applies_each_filter_before_the_limit(store):
    url, runs = store
    ids = [r["trace_id"] for r in runs]
    roots, document = _listed(url)
    assert roots == ids[::-1] and document["more"] is False and document["filters"]["all_traces"] is False
    everything, _ = _listed(url, "--all", "--limit", "0")
    assert len(everything) == sum(r["totals"]["traces"] for r in runs) and set(ids) < set(everything)
    assert _listed(url, "--limit", "2")[0] == ids[:1:-1] and _listed(url, "--limit", "2")[1]["more"] is True
    assert _listed(url, "--status", runs[2]["status"])[0] == [ids[2]]
    assert _listed(url, "--mode", "recursive")[0] == [ids[3]]
    assert _listed(url, "--mode", "legacy", "--limit", "1")[0] == [ids[2]]  # filtered first, then limited
    assert _listed(url, "--model", "demo")[0] == ids[::-1] and _listed(url, "--model", "openai:gpt-4o")[0] == []
    created = {row["trace_id"]: row["created_at"] for row in document["traces"]}
    assert _listed(url, "--since", created[ids[2]])[0] == [ids[3], ids[2]]
    assert _listed(url, "--since", "1d")[0] == ids[::-1] and _listed(url, "--since", "2999-01-01")[0] == []


def test_list_text_has_one_row_per_root_and_bad_filters_name_the_fix(store):
    url, runs = store
    done = cli("--store", url, "list", cwd=REPO)
    rows = done.stdout.splitlines()
    assert rows[0].startswith("created (UTC)") and len(rows) == 1 + len(runs)
    assert runs[-1]["trace_id"] in rows[1] and "recursive" in rows[1]


@pytest.mark.parametrize(("flag", "value", "named"), [("--since", "last tuesday", "2d"), ("--limit", "-3", "0: no limit")])
def test_bad_list_filters_exit_2_naming_the_value_and_the_fix(flag, value, named, capsys):
    with pytest.raises(SystemExit) as refused:
        main(["--store", "memory:", "list", flag, value])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and repr(value) in err and named in err


def test_sweep_json_summarises_the_cells(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(f'name = "json"\ntasks = "{REPO / "data" / "tasks" / "tasks.jsonl"}"\n'
                    f'task_ids = ["arithmetic-01"]\nmodels = ["demo"]\nmodes = ["legacy"]\nworkspace = "{REPO}"\n',
                    encoding="utf-8")
    done = cli("--store", f"sqlite:///{tmp_path / 's.db'}", "sweep", str(grid), "--quiet", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = validated(done.stdout)
    assert document["cells"] == {"total": 1, "done": 1, "skipped": 0, "failed": 0}
    assert [(g["mode"], g["model"], g["cells"]) for g in document["summary"]] == [("legacy", "demo", 1)]


def test_the_published_schema_is_the_one_the_code_builds(capsys):
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    assert printed == (REPO / "docs" / "cli-output.schema.json").read_text(encoding="utf-8"), (
        "docs/cli-output.schema.json is stale: run `cyber-agent schema > docs/cli-output.schema.json`")
    kinds = {d["properties"]["kind"]["const"] for d in json.loads(printed)["$defs"].values() if "kind" in d.get("properties", {})}
    assert kinds == {"run", "show", "list", "sweep"}


def test_version_names_the_installed_distribution():
    done = cli("--version", cwd=REPO)
    assert done.returncode == 0 and done.stdout.strip() == f"cyber-agent {version('cyber-agent')}"
