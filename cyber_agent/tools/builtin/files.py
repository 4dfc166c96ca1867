"""read_file and list_files: read-only file tools confined to the calling agent's workspace.

Every path is resolved (symlinks followed) and must stay inside `ToolContext.workspace`, so
`../x`, absolute paths elsewhere and symlinks pointing out are refused with a ToolError. A glob
pattern is checked before anything is walked (no absolute patterns, no `..` leading out) and
the walk stops after `MAX_WALK_ENTRIES` visited entries. Only regular files are read, opened
with O_NONBLOCK so a FIFO cannot block, and a read holds at most the requested window in memory.
Output is capped; a cut is always announced with a marker that says how to read on.
"""

from __future__ import annotations

import fnmatch
import io
import os
import stat
from collections.abc import Iterator
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
    "MAX_WALK_ENTRIES",
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
MAX_WALK_ENTRIES = 20_000
"""Most directory entries list_files visits (kept or not) in one call."""
_BINARY_PROBE = 8192
_LINE_CHUNK = 65_536
_WILDCARD = frozenset("*?[")
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


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
    _require_regular(path, os.stat(target).st_mode)
    # O_NONBLOCK: a FIFO swapped in after the check opens at once instead of waiting for a writer.
    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as raw:
        _require_regular(path, os.fstat(raw.fileno()).st_mode)
        if b"\x00" in raw.read(_BINARY_PROBE):
            raise ToolError(f"file {path!r} looks binary (it contains NUL bytes); read_file reads text only")
        raw.seek(0)
        with io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="") as fh:
            lines, cut_by_chars, more_lines = _read_window(fh, offset, limit)
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


def _require_regular(path: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise ToolError(f"{path!r} is {kind}, not a regular file; read_file reads regular files only")


def _read_window(fh: io.TextIOWrapper, offset: int, limit: int) -> tuple[list[str], bool, bool]:
    """Return (lines, cut by the character cap, more lines follow), holding only the window in memory."""
    for _ in range(offset):
        if not _skip_line(fh):
            return [], False, False
    lines: list[str] = []
    chars = 0
    while len(lines) < limit:
        room = MAX_READ_CHARS - chars
        # One character past the room tells "fits exactly" from "too long" without reading on.
        line, complete = _read_line(fh, room + 1)
        if not line:
            return lines, False, False
        if not complete or len(line) > room:
            if not lines:
                lines.append(line[:MAX_READ_CHARS])
            return lines, True, False
        lines.append(line)
        chars += len(line)
    return lines, False, bool(fh.read(1))


def _read_line(fh: io.TextIOWrapper, cap: int) -> tuple[str, bool]:
    """Read at most `cap` characters of the next line; return them and whether the line ended."""
    pieces: list[str] = []
    size = 0
    while size < cap:
        asked = min(_LINE_CHUNK, cap - size)
        piece = fh.readline(asked)
        if not piece:
            return "".join(pieces), True
        pieces.append(piece)
        size += len(piece)
        if _ends_line(piece, asked):
            return "".join(pieces), True
    return "".join(pieces), False


def _skip_line(fh: io.TextIOWrapper) -> bool:
    """Consume the next line in bounded pieces; False at the end of the file."""
    while piece := fh.readline(_LINE_CHUNK):
        if _ends_line(piece, _LINE_CHUNK):
            return True
    return False


def _ends_line(piece: str, asked: int) -> bool:
    # A piece cut at the size asked for may end in the '\r' of a '\r\n' split across reads.
    return piece.endswith("\n") or (piece.endswith("\r") and len(piece) < asked)


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
    walk = _Walk()
    if pattern is not None:
        base, parts = _confine_pattern(root, base, pattern)
        candidates = _dedup(_glob(base, parts, walk))
    else:
        candidates = (Path(e.path) for e in walk.scan(base))
    entries: list[str] = []
    more = False
    for entry in candidates:
        try:
            resolved = entry.resolve()
        except OSError:
            continue
        # Matches reached through a symlink that leave the workspace are not shown.
        if resolved != root and not resolved.is_relative_to(root):
            continue
        if len(entries) == MAX_LIST_ENTRIES:
            more = True
            break
        shown = entry.relative_to(root).as_posix()
        entries.append(f"{shown}/" if _path_is_dir(entry) else shown)
    entries.sort()
    if not entries and not walk.stopped:
        where = f"matching {pattern!r} " if pattern else ""
        return ToolResult(content=f"(no entries {where}in {path!r})", metadata={"truncated": False, "count": 0}, data=[])
    text = "\n".join(entries)
    if more:
        text += (f"\n[... truncated at {MAX_LIST_ENTRIES} entries; "
                 "narrow the search with a subdirectory path or a more specific pattern]")
    elif walk.stopped:
        text += (f"{chr(10) if text else ''}[... stopped after visiting {MAX_WALK_ENTRIES} entries; the list may be "
                 "incomplete: narrow the search with a subdirectory path or a more specific pattern]")
    truncated = more or walk.stopped
    return ToolResult(content=text, metadata={"truncated": truncated, "count": len(entries)}, data=entries)


def _confine_pattern(root: Path, base: Path, pattern: str) -> tuple[Path, tuple[str, ...]]:
    """Check a glob before any walk; fold its leading `..` into the base and return (base, parts)."""
    if not pattern.strip() or Path(pattern).is_absolute() or pattern.startswith("~") or "\x00" in pattern:
        raise ToolError(f"pattern {pattern!r} must be a relative glob such as '*.py' or '**/*.md'")
    parts = Path(pattern).parts
    for index, part in enumerate(parts):
        if part == "..":
            if index and parts[index - 1] != "..":
                raise ToolError(f"pattern {pattern!r} has '..' after a name or wildcard; "
                                "put the directory in `path` and keep the pattern below it")
            base = base.parent
            if base != root and not base.is_relative_to(root):
                raise ToolError(f"pattern {pattern!r} leads out of the workspace {root}; "
                                "patterns match below the listed directory only")
        elif "**" in part and part != "**":
            raise ToolError(f"pattern {pattern!r} is not a valid glob: '**' can only be an entire path component")
    return base, tuple(p for p in parts if p != "..")


class _Walk:
    """Count every directory entry visited, kept or not, and stop at `MAX_WALK_ENTRIES`."""

    def __init__(self) -> None:
        self.visited = 0
        self.stopped = False

    def scan(self, directory: Path) -> Iterator[os.DirEntry[str]]:
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    if self.visited >= MAX_WALK_ENTRIES:
                        self.stopped = True
                        return
                    self.visited += 1
                    yield entry
        except OSError:
            return  # unreadable directories are skipped, as pathlib's glob does


def _glob(base: Path, parts: tuple[str, ...], walk: _Walk) -> Iterator[Path]:
    """pathlib's glob semantics (3.11) over `_Walk`: `**` is zero or more directories, no symlinks followed."""
    if not parts:
        yield base
        return
    part, rest = parts[0], parts[1:]
    if part == "**":
        stack = [base]
        while stack and not walk.stopped:
            directory = stack.pop()
            yield from _glob(directory, rest, walk)
            subdirs = [Path(e.path) for e in walk.scan(directory) if _is_dir(e, follow_symlinks=False)]
            stack.extend(reversed(subdirs))
    elif _WILDCARD.intersection(part):
        for entry in walk.scan(base):
            if fnmatch.fnmatchcase(entry.name, part) and (not rest or _is_dir(entry)):
                yield from _glob(Path(entry.path), rest, walk)
    else:
        child = base / part
        try:
            found = child.is_dir() if rest else child.exists()
        except OSError:
            found = False
        if found:
            yield from _glob(child, rest, walk)


def _path_is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str], *, follow_symlinks: bool = True) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow_symlinks)
    except OSError:
        return False


def _dedup(paths: Iterator[Path]) -> Iterator[Path]:
    seen: set[Path] = set()
    for found in paths:
        if found not in seen:
            seen.add(found)
            yield found
