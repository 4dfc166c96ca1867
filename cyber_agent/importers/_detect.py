"""Which format a file or folder holds, and the run files of a directory.

Detection looks at names and the first bytes only: `.eval` is an Inspect log (a zip), a folder
holding `state.json` (or `state.json` itself) a ReDel run, a `.json`/`.jsonl` file an
OTLP/JSON export when its text opens with `resourceSpans` and an Inspect log when it opens with
the log's `version` / `status` / `eval` keys. The readers check the rest.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cyber_agent.importers._redel import EVENTS_FILE, STATE_FILE
from cyber_agent.trace.provenance import ImportSource

__all__ = ["Candidate", "SkippedFile", "detect_format", "directory_candidates"]

_HEAD = 4096
_KEY = re.compile(r'"([A-Za-z_]+)"\s*:')


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A run file (or ReDel run folder) to import, with its format."""

    path: Path
    source: ImportSource


@dataclass(frozen=True, kw_only=True)
class SkippedFile:
    """A file that was not imported, and why."""

    path: Path
    reason: str


def _head_keys(path: Path) -> list[str]:
    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEAD).decode("utf-8", errors="replace")
    except OSError:
        return []
    return _KEY.findall(head)


def detect_format(path: Path) -> ImportSource | None:
    """The format `path` holds, or None when it is none of them."""
    if path.is_dir():
        return "redel" if (path / STATE_FILE).is_file() else None
    suffix = path.suffix.lower()
    if suffix == ".eval":
        return "inspect"
    if suffix not in (".json", ".jsonl"):
        return None
    keys = _head_keys(path)
    if "resourceSpans" in keys[:3] or "resource_spans" in keys[:3]:
        return "otel"
    if path.name == STATE_FILE and "state" in keys:
        return "redel"
    if {"version", "status", "eval"} & set(keys[:4]) and "eval" in keys:
        return "inspect"
    if {"state", "n_events"} <= set(keys) or ("id" in keys[:2] and "state" in keys and "chat_history" in keys):
        return "redel"
    return None


def directory_candidates(directory: Path, source: ImportSource | None) -> tuple[list[Candidate], list[SkippedFile]]:
    """Every run under `directory` (sorted), and every other file with the reason it is skipped."""
    found: list[Candidate] = []
    skipped: list[SkippedFile] = []
    for folder, dirs, files in os.walk(directory):
        dirs.sort()
        here = Path(folder)
        names = sorted(files)
        if STATE_FILE in names:
            found.append(Candidate(path=here, source="redel"))
            names = [n for n in names if n not in (STATE_FILE, EVENTS_FILE)]
        for name in names:
            path = here / name
            kind = detect_format(path)
            if kind is None:
                skipped.append(SkippedFile(path=path, reason="not an Inspect log, an OTLP/JSON file or a ReDel run"))
            else:
                found.append(Candidate(path=path, source=kind))
    if source is not None:
        for candidate in [c for c in found if c.source != source]:
            found.remove(candidate)
            skipped.append(SkippedFile(path=candidate.path, reason=f"holds {candidate.source}, not {source}"))
    return found, sorted(skipped, key=lambda s: str(s.path))
