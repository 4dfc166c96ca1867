"""Trees move between stores unchanged (issue 16): file store -> SQLite -> file store, through
`import_records` and the CLI's copy / export / import, give identical frames."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from nb_helpers import same_data
from cyber_agent.cli import main
from cyber_agent.errors import ConflictError
from cyber_agent.notebook import to_frames
from cyber_agent.notebook.records import open_source
from cyber_agent.trace import SQLiteTraceStore, open_store

FRAMES = ("traces", "messages", "tool_calls", "goals", "events", "usage", "reports", "validations")


def _assert_same_frames(a: object, b: object) -> None:
    for name in FRAMES:
        left, right = getattr(a, name), getattr(b, name)
        pd.testing.assert_frame_equal(same_data(left.reset_index(drop=True)), same_data(right.reset_index(drop=True)),
                                      obj=name)


@pytest.fixture
def demo_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # the demo reads data/sales.csv
    url = f"file:{tmp_path}/files"
    assert main(["--store", url, "demo"]) == 0
    capsys.readouterr()
    return url


def test_a_file_tree_copied_into_sqlite_and_back_has_identical_frames(demo_tree: str, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    db, back = f"sqlite:///{tmp_path}/runs.db", f"file:{tmp_path}/back"
    assert main(["--store", demo_tree, "copy", "--to", db]) == 0
    assert main(["--store", db, "copy", "--to", back]) == 0
    assert "copied" in capsys.readouterr().out
    original = to_frames(open_store(demo_tree))
    assert len(original.traces) > 3 and len(original.validations) > 0  # a real recursive tree
    _assert_same_frames(original, to_frames(open_store(db)))
    _assert_same_frames(original, to_frames(open_store(back)))


def test_export_then_import_into_sqlite_keeps_the_tree(demo_tree: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out, db = tmp_path / "tree.jsonl.gz", f"sqlite:///{tmp_path}/imported.db"
    assert main(["--store", demo_tree, "export", "--out", str(out)]) == 0
    assert main(["--store", db, "import", str(out)]) == 0
    _assert_same_frames(to_frames(open_store(demo_tree)), to_frames(open_store(db)))
    # A second import refuses the traces it already has, unless told to skip them.
    assert main(["--store", db, "import", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["--store", db, "import", str(out), "--skip-existing"]) == 0
    assert "imported 0 of" in capsys.readouterr().out


async def test_import_refuses_an_existing_trace_and_writes_nothing_of_it(demo_tree: str, tmp_path: Path) -> None:
    records = await open_store(demo_tree).read_records(None)
    target = SQLiteTraceStore(tmp_path / "t.db")
    await target.import_records(records[:1])
    with pytest.raises(ConflictError, match="already exists"):
        await target.import_records(records[:2])
    assert len(await target.list_traces(limit=None)) == 1


def test_the_notebook_readers_take_store_urls_and_database_files(demo_tree: str, tmp_path: Path) -> None:
    assert main(["--store", demo_tree, "copy", "--to", f"sqlite:///{tmp_path}/nb.db"]) == 0
    for source in (f"sqlite:///{tmp_path}/nb.db", str(tmp_path / "nb.db"), demo_tree):
        assert len(to_frames(source).traces) == len(to_frames(open_store(demo_tree)).traces)
    assert isinstance(open_source(str(tmp_path / "nb.db")), SQLiteTraceStore)


def test_stop_from_the_command_line_is_persisted(demo_tree: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = open_store(demo_tree)
    root = to_frames(store).traces.query("depth == 0").trace_id.iloc[0]
    assert main(["--store", demo_tree, "stop", root, "--reason", "enough"]) == 0
    requests = open_store(demo_tree)
    import asyncio

    assert asyncio.run(requests.get_stop_requests([root]))[root].reason == "enough"
    assert main(["--store", demo_tree, "stop", "nope-1"]) == 2
