"""read_file / list_files: workspace confinement and output caps."""

from __future__ import annotations

import asyncio
import io
import os
import tracemalloc
from pathlib import Path

import pytest

from cyber_agent.errors import ToolError
from cyber_agent.tools.builtin import builtin_registry
from cyber_agent.tools.builtin import files
from cyber_agent.tools.builtin.files import MAX_LIST_ENTRIES, MAX_READ_CHARS, list_files, read_file
from cyber_agent.tools.context import ToolContext


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    return secret


def test_read_file_returns_the_text(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("one\ntwo\nthree\n")
    result = read_file(ctx, "notes.txt")
    assert result.content == "one\ntwo\nthree\n"
    assert result.metadata["truncated"] is False


def test_read_file_offset_and_limit_mark_the_cut(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = read_file(ctx, "n.txt", offset=2, limit=3)
    assert result.content.startswith("line 3\nline 4\nline 5\n")
    assert "[... truncated at the limit of 3 lines: showed lines 3-5; call read_file with offset=5 to continue]" in result.content
    assert result.metadata["truncated"] is True
    assert read_file(ctx, "n.txt", offset=8).content == "line 9\nline 10\n"
    assert "shorter" in read_file(ctx, "n.txt", offset=50).content


def test_read_file_caps_characters(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "big.txt").write_text(("x" * 999 + "\n") * 200)
    result = read_file(ctx, "big.txt")
    assert result.metadata["truncated"] is True
    assert f"{MAX_READ_CHARS} character cap" in result.content
    assert len(result.content) < MAX_READ_CHARS + 200


@pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt"])
def test_read_file_refuses_parent_escapes(ctx: ToolContext, workspace: Path, outside: Path, path: str) -> None:
    (workspace / "sub").mkdir()
    with pytest.raises(ToolError, match="outside the workspace") as info:
        read_file(ctx, path)
    assert repr(path) in str(info.value) and str(workspace.resolve()) in str(info.value)


def test_read_file_refuses_absolute_paths_outside_but_not_inside(ctx: ToolContext, workspace: Path, outside: Path) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        read_file(ctx, str(outside))
    with pytest.raises(ToolError, match="outside the workspace"):
        read_file(ctx, "/etc/passwd")
    (workspace / "in.txt").write_text("inside")
    assert read_file(ctx, str(workspace / "in.txt")).content == "inside"


def test_symlinks_pointing_outside_are_refused(ctx: ToolContext, workspace: Path, outside: Path) -> None:
    (workspace / "link.txt").symlink_to(outside)
    (workspace / "linkdir").symlink_to(outside.parent, target_is_directory=True)
    with pytest.raises(ToolError, match="outside the workspace"):
        read_file(ctx, "link.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        read_file(ctx, "linkdir/secret.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        list_files(ctx, "linkdir")
    (workspace / "real.txt").write_text("ok")
    listing = list_files(ctx).content.splitlines()
    assert listing == ["real.txt"]  # the links leading out are not even shown


def test_read_file_explains_missing_directory_and_binary(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolError, match="does not exist.*list_files"):
        read_file(ctx, "nope.txt")
    with pytest.raises(ToolError, match="is a directory"):
        read_file(ctx, "d")
    with pytest.raises(ToolError, match="binary"):
        read_file(ctx, "blob.bin")


def test_list_files_entries_and_patterns(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "src" / "pkg").mkdir(parents=True)
    (workspace / "src" / "a.py").write_text("")
    (workspace / "src" / "pkg" / "b.py").write_text("")
    (workspace / "README.md").write_text("")
    assert list_files(ctx).content.splitlines() == ["README.md", "src/"]
    assert list_files(ctx, "src").content.splitlines() == ["src/a.py", "src/pkg/"]
    assert list_files(ctx, "src", "**/*.py").content.splitlines() == ["src/a.py", "src/pkg/b.py"]
    assert "no entries" in list_files(ctx, pattern="*.rs").content
    with pytest.raises(ToolError, match="relative glob"):
        list_files(ctx, pattern="/etc/*")
    with pytest.raises(ToolError, match="outside the workspace"):
        list_files(ctx, "..")


def test_list_files_refuses_patterns_leading_out_before_walking(ctx: ToolContext, workspace: Path, outside: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "kept.txt").write_text("")
    for pattern in ("../../*", "../../../../**/*", "sub/../../*", "*/../../x"):
        with pytest.raises(ToolError, match="pattern") as info:
            list_files(ctx, "sub", pattern=pattern)
        assert repr(pattern) in str(info.value)
    # A leading '..' that stays inside the workspace is folded into the base.
    assert list_files(ctx, "sub", pattern="../*.txt").content == "kept.txt"
    with pytest.raises(ToolError, match="relative glob"):
        list_files(ctx, pattern="~/*")


def test_list_files_caps_entries(ctx: ToolContext, workspace: Path) -> None:
    for i in range(MAX_LIST_ENTRIES + 5):
        (workspace / f"f{i:04d}.txt").write_text("")
    result = list_files(ctx)
    assert result.metadata == {"truncated": True, "count": MAX_LIST_ENTRIES}
    assert result.content.endswith("narrow the search with a subdirectory path or a more specific pattern]")


async def test_refusals_reach_the_model_as_error_results(ctx: ToolContext, outside: Path) -> None:
    registry = builtin_registry(["read_file"])
    result = await registry.execute("read_file", {"path": "../secret.txt"}, allowed={"read_file"}, context=ctx)
    assert result.is_error and "outside the workspace" in result.content
    bad_limit = await registry.execute("read_file", {"path": "x", "limit": 0}, allowed={"read_file"}, context=ctx)
    assert bad_limit.is_error and "- limit:" in bad_limit.content


def test_the_walk_limit_counts_visited_entries_not_kept_ones(
        ctx: ToolContext, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "MAX_WALK_ENTRIES", 50)
    for d in range(10):
        (workspace / f"d{d}").mkdir()
        for i in range(10):
            (workspace / f"d{d}" / f"f{i}.txt").write_text("")
    (workspace / "d9" / "wanted.md").write_text("")
    result = list_files(ctx, pattern="**/*.md")  # matches almost nothing, so the kept cap never bites
    assert result.metadata["truncated"] is True
    assert "stopped after visiting 50 entries" in result.content
    monkeypatch.setattr(files, "MAX_WALK_ENTRIES", 10_000)
    assert list_files(ctx, pattern="**/*.md").content == "d9/wanted.md"


async def test_read_file_refuses_a_fifo_without_blocking(ctx: ToolContext, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    with pytest.raises(ToolError, match=r"'pipe' is a FIFO \(named pipe\), not a regular file"):
        await asyncio.wait_for(asyncio.to_thread(read_file, ctx, "pipe"), 10)
    # Swapped in after the stat: the O_NONBLOCK open returns at once and fstat refuses it.
    real_stat = os.stat
    monkey = pytest.MonkeyPatch()
    monkey.setattr(files.os, "stat", lambda p, *a, **k: real_stat(workspace / "regular"))
    (workspace / "regular").write_text("x\n")
    try:
        with pytest.raises(ToolError, match="FIFO"):
            await asyncio.wait_for(asyncio.to_thread(read_file, ctx, "pipe"), 10)
    finally:
        monkey.undo()


def test_a_huge_single_line_is_read_in_bounded_chunks(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "one.txt").write_text("x" * 8_000_000)
    tracemalloc.start()
    try:
        result = read_file(ctx, "one.txt", limit=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.content.startswith("x" * MAX_READ_CHARS + "\n[... truncated at the 50000 character cap")
    assert peak < 2_000_000, f"peak {peak} bytes to return {MAX_READ_CHARS} characters"


@pytest.mark.parametrize("text", [
    "a\r\nbb\rccc\n\ndddd", "x" * 23 + "\r\n" + "y" * 7, "\r\r\n\n\r", "z" * 40 + "\n" + "w" * 3 + "\n", "",
    "é" * 30 + "\r\n" + "ü\n" * 5,
])
def test_the_streamed_window_matches_reading_the_whole_file(
        ctx: ToolContext, workspace: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    # Tiny chunk and cap sizes put '\r\n' pairs and the cap on every chunk boundary.
    monkeypatch.setattr(files, "_LINE_CHUNK", 4)
    monkeypatch.setattr(files, "MAX_READ_CHARS", 20)
    (workspace / "t.txt").write_bytes(text.encode())
    lines = list(io.StringIO(text, newline=""))
    for offset in range(len(lines) + 2):
        for limit in (1, 2, 3, 50):
            window, chars, cut = [], 0, False
            for line in lines[offset:offset + limit]:
                if chars + len(line) > 20:
                    window += [] if window else [line[:20]]
                    cut = True
                    break
                window.append(line)
                chars += len(line)
            got = read_file(ctx, "t.txt", offset=offset, limit=limit)
            if window:
                assert got.data.startswith("".join(window)) and got.metadata["lines"] == len(window), (offset, limit)
                more = not cut and offset + limit < len(lines)
                assert got.metadata["truncated"] is (cut or more), (offset, limit)
