"""read_file and list_files: read-only file tools confined to the calling agent's workspace.

Every path is resolved (symlinks followed) and must stay inside `ToolContext.workspace`, so
`../x`, absolute paths elsewhere and symlinks pointing out are refused with a ToolError.
Output is capped; a cut is always announced with a marker that says how to read on.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated

from pydantic import Field

from cyber_agent.errors import ToolError
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolResult

__all__ = [
    "MAX_LIST_ENTRIES",
    "MAX_READ_CHARS",
    "MAX_READ_LINES",
    "list_files",
    "read_file",
    "resolve_in_workspace",
]

MAX_READ_LINES = 2000
"""Default and largest `limit` of read_file, in lines."""
MAX_READ_CHARS = 50_000
"""Most characters read_file returns in one call."""
MAX_LIST_ENTRIES = 500
"""Most entries list_files returns in one call."""
_BINARY_PROBE = 8192


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """Resolve `path` (relative to `workspace`, or absolute) and refuse it if it leaves the workspace."""
    root = workspace.resolve()
    if "\x00" in path:
        raise ToolError(f"path {path!r} contains a NUL byte")
    candidate = Path(path).expanduser() if path.startswith("~") else Path(path)
    resolved = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if resolved != root and not resolved.is_relative_to(root):
        raise ToolError(
            f"path {path!r} resolves to {resolved}, outside the workspace {root}; "
            "use a path inside the workspace (relative paths start there)"
        )
    return resolved


def read_file(
    ctx: ToolContext, path: str, offset: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[int, Field(ge=1, le=MAX_READ_LINES)] = MAX_READ_LINES,
) -> ToolResult:
    """Read a text file from the workspace.
    Returns up to `limit` lines starting at line `offset`; a marker at the end says when the
    output was cut and which offset continues it.

    Args:
        path: File path relative to the workspace.
        offset: Number of lines to skip from the start of the file (0 reads from the beginning).
        limit: Maximum number of lines to return (at most 2000).
    """
    if offset < 0:
        raise ToolError(f"offset must be >= 0, got {offset}")
    if not 1 <= limit <= MAX_READ_LINES:
        raise ToolError(f"limit must be between 1 and {MAX_READ_LINES}, got {limit}")
    target = resolve_in_workspace(ctx.workspace, path)
    if not target.exists():
        raise ToolError(f"file {path!r} does not exist in the workspace {ctx.workspace}; try list_files")
    if target.is_dir():
        raise ToolError(f"{path!r} is a directory; use list_files to see its contents")
    with target.open("rb") as fh:
        if b"\x00" in fh.read(_BINARY_PROBE):
            raise ToolError(f"file {path!r} looks binary (it contains NUL bytes); read_file reads text only")
    lines: list[str] = []
    chars = 0
    cut_by_chars = False
    more_lines = False
    # Read lazily so a huge file costs only what is returned.
    with target.open("r", encoding="utf-8", errors="replace", newline="") as fh:
        for line in itertools.islice(fh, offset, None):
            if len(lines) == limit:
                more_lines = True
                break
            if chars + len(line) > MAX_READ_CHARS:
                if not lines:
                    lines.append(line[: MAX_READ_CHARS])
                cut_by_chars = True
                break
            lines.append(line)
            chars += len(line)
    text = "".join(lines)
    if not lines and offset > 0:
        return ToolResult(content=f"(no lines at offset {offset}: the file is shorter)", metadata={"truncated": False})
    truncated = more_lines or cut_by_chars
    if truncated:
        end = offset + len(lines)
        reason = f"{MAX_READ_CHARS} character cap" if cut_by_chars else f"limit of {limit} lines"
        text = (f"{text}{'' if text.endswith(chr(10)) else chr(10)}"
                f"[... truncated at the {reason}: showed lines {offset + 1}-{end}; "
                f"call read_file with offset={end} to continue]")
    return ToolResult(content=text or "(empty file)", metadata={"truncated": truncated, "lines": len(lines)}, data=text)


def list_files(ctx: ToolContext, path: str = ".", pattern: str | None = None) -> ToolResult:
    """List files in a workspace directory.
    Without a pattern, lists the directory's direct entries (directories end with '/').
    With a glob pattern such as '*.py' or '**/*.md', lists matching paths below the directory.
    Paths are shown relative to the workspace.

    Args:
        path: Directory relative to the workspace ('.' is the workspace itself).
        pattern: Optional glob pattern, e.g. '*.py' or '**/*.json'.
    """
    root = ctx.workspace.resolve()
    base = resolve_in_workspace(ctx.workspace, path)
    if not base.is_dir():
        what = "does not exist" if not base.exists() else "is not a directory"
        raise ToolError(f"{path!r} {what} in the workspace {root}; use list_files('.') to start")
    if pattern is not None:
        if not pattern.strip() or Path(pattern).is_absolute():
            raise ToolError(f"pattern {pattern!r} must be a relative glob such as '*.py' or '**/*.md'")
        candidates = base.glob(pattern)
    else:
        candidates = base.iterdir()
    entries: list[str] = []
    more = False
    try:
        for entry in candidates:
            try:
                resolved = entry.resolve()
            except OSError:
                continue
            # Matches reached through a symlink or `..` that leave the workspace are not shown.
            if resolved != root and not resolved.is_relative_to(root):
                continue
            if len(entries) == MAX_LIST_ENTRIES:
                more = True
                break
            shown = resolved.relative_to(root) if ".." in entry.parts else entry.relative_to(root)
            entries.append(f"{shown.as_posix()}/" if entry.is_dir() else shown.as_posix())
    except (ValueError, NotImplementedError) as exc:
        raise ToolError(f"pattern {pattern!r} is not a valid glob: {exc}") from None
    entries.sort()
    if not entries:
        where = f"matching {pattern!r} " if pattern else ""
        return ToolResult(content=f"(no entries {where}in {path!r})", metadata={"truncated": False, "count": 0}, data=[])
    text = "\n".join(entries)
    if more:
        text += (f"\n[... truncated at {MAX_LIST_ENTRIES} entries; "
                 "narrow the search with a subdirectory path or a more specific pattern]")
    return ToolResult(content=text, metadata={"truncated": more, "count": len(entries)}, data=entries)
