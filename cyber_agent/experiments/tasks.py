"""Sweep tasks: a prompt with an optional expected answer, completion criteria and scorer; loading task files."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments.scorers import ScorerSpec

__all__ = ["SweepTask", "load_tasks"]


class SweepTask(BaseModel):
    """One task of a sweep grid."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    """Unique id within the sweep (a frame's `task` column)."""
    prompt: str = Field(min_length=1)
    """The task as the user states it."""
    expected: str | None = None
    """The expected answer; None when the task is only run, not scored."""
    type: str | None = None
    """Free-form kind (e.g. `arithmetic`, `lookup`), kept for grouping."""
    criteria: list[str] = Field(default_factory=list)
    """Completion criteria of the recursive root's anchor (recursive mode needs at least one)."""
    constraints: list[str] = Field(default_factory=list)
    """Hard constraints of the anchor."""
    scorer: ScorerSpec | None = None
    """This task's scorer; a sweep's own scorer wins over it."""

    def anchor(self) -> dict[str, object]:
        """The root task anchor of a recursive run of this task."""
        if not self.criteria:
            raise ConfigurationError(f"task {self.id}.criteria", "recursive mode needs at least one completion criterion")
        return {"objective": self.prompt, "completion_criteria": list(self.criteria), "constraints": list(self.constraints)}

    def identity(self) -> dict[str, object]:
        """What a cell key hashes: everything that changes the run (the scorer does not)."""
        return {"id": self.id, "prompt": self.prompt, "expected": self.expected, "criteria": self.criteria,
                "constraints": self.constraints}


def load_tasks(path: str | Path) -> list[SweepTask]:
    """Read tasks from a `.jsonl` file (one object a line), a `.json` list or a `.toml` file with `[[tasks]]`."""
    source = Path(path)
    if source.suffix not in (".jsonl", ".json", ".toml"):
        raise ConfigurationError("tasks", f"{str(source)!r}: use a .jsonl, .json or .toml file")
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError("tasks", f"cannot read {str(source)!r}: {exc.strerror or exc}") from None
    try:
        if source.suffix == ".jsonl":
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        elif source.suffix == ".json":
            rows = json.loads(text)
        else:
            rows = tomllib.loads(text).get("tasks", [])
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError("tasks", f"{str(source)!r} is not valid {source.suffix[1:]}: {exc}") from None
    if not isinstance(rows, list) or not rows:
        raise ConfigurationError("tasks", f"{str(source)!r} holds no tasks (expected a list of task objects)")
    tasks = []
    for number, row in enumerate(rows, start=1):
        try:
            tasks.append(SweepTask.model_validate(row))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "task"
            raise ConfigurationError(f"tasks[{number}].{where}", f"{first['msg']} (in {str(source)!r})") from None
    return tasks
