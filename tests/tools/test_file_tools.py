"""read_file / list_files: workspace confinement and output caps."""

from __future__ import annotations

from pathlib import Path

import pytest

from cyber_agent.errors import ToolError
from cyber_agent.tools.builtin import builtin_registry
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


def test_list_files_hides_matches_outside_through_dotdot(ctx: ToolContext, workspace: Path, outside: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "kept.txt").write_text("")
    shown = list_files(ctx, "sub", pattern="../../*").content
    assert "secret" not in shown


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
