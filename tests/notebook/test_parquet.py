"""Parquet: a whole export's frames written and read back equal (dtypes included); bad folders are named.

Skipped only when pyarrow is missing (it is in the `dev` extra, so the test run has it); the
error users get without it is tested apart, with pyarrow hidden.
"""

from __future__ import annotations

import builtins
import json

import pytest

from cyber_agent.errors import ConfigurationError, CorruptRecordError
from cyber_agent.notebook import SCHEMAS, TraceFrames, read_parquet, to_frames
from cyber_agent.notebook.frames import frames_from_records

from nb_helpers import REPO, assert_frames_equal

EXPORTS = sorted((REPO / "data" / "exports").glob("*.jsonl"))


@pytest.fixture
def pyarrow():
    return pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (pip install 'cyber-agent[parquet]')")


@pytest.mark.parametrize("export", EXPORTS, ids=lambda p: p.name)
def test_a_whole_export_round_trips(export, tmp_path, pyarrow):
    frames = to_frames(export)
    folder = frames.to_parquet(tmp_path / export.stem)
    assert sorted(p.name for p in folder.iterdir()) == sorted([*(f"{n}.parquet" for n in SCHEMAS), "frames.json"])
    again = read_parquet(folder)
    assert_frames_equal(again, frames)
    assert_frames_equal(TraceFrames.read_parquet(folder), frames)


def test_empty_frames_round_trip_and_a_folder_is_replaced(tmp_path, pyarrow, recursive_store):
    empty = frames_from_records([])
    folder = empty.to_parquet(tmp_path / "f")
    assert_frames_equal(read_parquet(folder), empty)
    store, _ = recursive_store
    full = to_frames(store)
    assert_frames_equal(read_parquet(full.to_parquet(tmp_path / "f")), full)


def test_bad_folders_are_refused_with_their_name(tmp_path, pyarrow):
    with pytest.raises(CorruptRecordError, match="no frames.json"):
        read_parquet(tmp_path)
    (tmp_path / "frames.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(CorruptRecordError, match="expected 'cyber_agent.frames'"):
        read_parquet(tmp_path)


def test_without_pyarrow_the_error_says_what_to_install(tmp_path, monkeypatch, demo_store, demo_root):
    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError("No module named 'pyarrow'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(ConfigurationError, match=r"pip install 'cyber-agent\[parquet\]'"):
        to_frames(demo_store, demo_root).to_parquet(tmp_path / "x")
    with pytest.raises(ConfigurationError, match="pyarrow"):
        read_parquet(tmp_path)
