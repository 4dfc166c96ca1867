"""Reflection lessons and their review (SPEC T9 reflect): the cognition log and the experiences file.

A reflection runs on the trace's `reflection` side branch (see
`cyber_agent/server/run_api.py:reflect`). Its answer is cut into lessons (`extract_lessons`),
and each lesson waits in the cognition log until a person reviews it; only an approved lesson
reaches the experiences file that future runs read.

    reflect ──▶ extraction_pending ──approve──▶ approved  (appended to experiences.md)
                                   └──reject───▶ rejected

The cognition log (`cognition_log.jsonl`, next to the experiences file) is append-only JSON
lines: one `extraction` line per lesson, one `review` line per decision; the latest line of an
id wins. Reviews take a file lock, so the server and the `cyber-agent extractions` command can
review the same log. Approving is idempotent on the experiences file: each lesson carries its
extraction id, and a lesson already present is not written twice (a crash between the two
writes leaves it pending, and approving again completes it).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from cyber_agent.errors import ConflictError, CorruptRecordError, NotFoundError
from cyber_agent.trace.models import utc_now

try:  # POSIX; elsewhere the in-process lock alone guards reviews
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "REFLECTION_PROMPT_HEADER",
    "CognitionLog",
    "Extraction",
    "ExtractionStatus",
    "extract_lessons",
    "read_experiences",
    "reflection_prompt",
]

ExtractionStatus = Literal["extraction_pending", "approved", "rejected"]
REFLECTION_PROMPT_HEADER = "# Reflection"
"""First line of every reflection prompt (models and tests recognise the side branch by it)."""

_MAX_LESSONS = 50
_MAX_LESSON_CHARS = 2000
_PROCESS_LOCK = threading.Lock()


class Extraction(BaseModel):
    """One lesson taken from a reflection, with its review state."""

    extraction_id: str
    """Id used by the review API and CLI."""
    trace_id: str
    """Trace whose reflection produced the lesson."""
    reflection_id: str
    """The reflection run that produced it (one run yields several lessons)."""
    lesson: str
    """The lesson text, without the leading '- '."""
    focus: str | None = None
    """Focus the reviewer asked the reflection to take, if any."""
    status: ExtractionStatus = "extraction_pending"
    """Review state; only `approved` lessons reach the experiences file."""
    created_at: datetime = Field(default_factory=utc_now)
    """When the lesson was extracted (UTC)."""
    reviewed_at: datetime | None = None
    """When it was approved or rejected."""
    note: str = ""
    """The reviewer's note."""


def reflection_prompt(focus: str | None = None) -> str:
    """Return the user message that starts a reflection side branch."""
    lines = [REFLECTION_PROMPT_HEADER, "Reflect on the run above: what should be remembered for future tasks?"]
    if focus and focus.strip():
        lines.append(f"Focus: {focus.strip()}")
    lines.append("Answer with the lessons only, one per line, each line starting with '- '. "
                 "Make each lesson concrete and reusable; do not restate the answer.")
    return "\n".join(lines)


def extract_lessons(answer: str | None) -> list[str]:
    """Return the lines of `answer` that start with '- ' (stripped, deduplicated, at most 50)."""
    lessons: list[str] = []
    for line in (answer or "").splitlines():
        line = line.strip()
        if not line.startswith("- "):
            continue
        lesson = " ".join(line[2:].split())[:_MAX_LESSON_CHARS]
        if lesson and lesson not in lessons:
            lessons.append(lesson)
        if len(lessons) == _MAX_LESSONS:
            break
    return lessons


def read_experiences(path: str | os.PathLike[str]) -> str:
    """Return the experiences file's text ('' when it does not exist yet)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


class CognitionLog:
    """The review queue of extracted lessons, next to the experiences file it feeds."""

    def __init__(self, experiences_path: str | os.PathLike[str]) -> None:
        self.experiences_path = Path(experiences_path)
        self.path = self.experiences_path.parent / "cognition_log.jsonl"

    def add(self, *, trace_id: str, reflection_id: str, lessons: list[str], focus: str | None = None) -> list[Extraction]:
        """Record lessons as `extraction_pending` and return them."""
        entries = [Extraction(extraction_id=uuid.uuid4().hex[:12], trace_id=trace_id, reflection_id=reflection_id,
                              lesson=lesson, focus=focus) for lesson in lessons]
        with self._locked():
            for entry in entries:
                self._append({"kind": "extraction", **entry.model_dump(mode="json")})
        return entries

    def entries(self, *, status: ExtractionStatus | None = None, trace_id: str | None = None) -> list[Extraction]:
        """Every extraction in creation order, optionally filtered by status and trace."""
        return [e for e in self._read().values()
                if (status is None or e.status == status) and (trace_id is None or e.trace_id == trace_id)]

    def get(self, extraction_id: str) -> Extraction:
        """Return one extraction or raise NotFoundError."""
        entry = self._read().get(extraction_id)
        if entry is None:
            raise NotFoundError(f"extraction {extraction_id!r} not found in {self.path}; list them with GET /api/extractions")
        return entry

    def review(self, extraction_id: str, decision: Literal["approve", "reject"], note: str = "") -> Extraction:
        """Approve (append the lesson to the experiences file) or reject a pending extraction."""
        with self._locked():
            entry = self.get(extraction_id)
            if entry.status != "extraction_pending":
                raise ConflictError(f"extraction {extraction_id!r} is already {entry.status}; it was reviewed before")
            if decision == "approve":
                self._add_experience(entry)
            entry = entry.model_copy(update={
                "status": "approved" if decision == "approve" else "rejected", "reviewed_at": utc_now(), "note": note,
            })
            self._append({"kind": "review", "extraction_id": extraction_id, "status": entry.status,
                          "reviewed_at": entry.reviewed_at.isoformat() if entry.reviewed_at else None, "note": note})
        return entry

    # ---- files --------------------------------------------------------------------------
    def _add_experience(self, entry: Extraction) -> None:
        marker = f"<!-- extraction {entry.extraction_id} -->"
        current = read_experiences(self.experiences_path)
        if marker in current:
            return
        self.experiences_path.parent.mkdir(parents=True, exist_ok=True)
        prefix = "" if current else "# Experiences\n\nLessons approved from reflections (`cyber-agent extractions`).\n\n"
        if current and not current.endswith("\n"):
            prefix = "\n"
        line = f"- {entry.lesson} (trace {entry.trace_id}) {marker}\n"
        with open(self.experiences_path, "a", encoding="utf-8") as handle:
            handle.write(prefix + line)

    def _append(self, record: dict[str, object]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")

    def _read(self) -> dict[str, Extraction]:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        entries: dict[str, Extraction] = {}
        lines = raw.split("\n")
        for number, line in enumerate(lines[:-1], start=1):  # a torn last line (kill mid-write) is ignored
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if record.get("kind") == "extraction":
                    entry = Extraction.model_validate({k: v for k, v in record.items() if k != "kind"})
                    entries[entry.extraction_id] = entry
                elif record.get("kind") == "review" and record.get("extraction_id") in entries:
                    old = entries[record["extraction_id"]]
                    entries[old.extraction_id] = Extraction.model_validate({
                        **old.model_dump(), "status": record["status"], "reviewed_at": record.get("reviewed_at"),
                        "note": record.get("note", ""),
                    })
            except (ValueError, AttributeError, KeyError, ValidationError) as exc:
                raise CorruptRecordError(self.path, f"line {number} is not a cognition-log record ({exc})") from None
        return entries

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with _PROCESS_LOCK:
            if fcntl is None:
                yield
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path.parent / ".cognition_log.lock", "a") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
