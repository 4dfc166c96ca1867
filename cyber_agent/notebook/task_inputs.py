"""Check, before a run starts, that its workspace holds the input files its task names.

The demo tasks (`cyber_agent/cli/_run.py:DEMO_TASK`, `data/tasks/tasks.jsonl`) read files under
`data/` by relative path. A notebook under `notebooks/` (where JupyterLab's Launcher puts a new
one) that passes `workspace="."` runs them in a folder without `data/`: the agents then flail
through "unknown" verdicts without saying why. `check_task_inputs` names the missing file and
the workspace that has it, before anything is displayed or started.

Only paths under `data/` with a file suffix count as inputs: a task may well name a file it is
asked to write (`write summary.md`), and guessing which is which from free text would refuse
good tasks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cyber_agent.errors import ConfigurationError

__all__ = ["INPUT_PATTERN", "check_task_inputs", "task_inputs"]

INPUT_PATTERN = re.compile(r"(?<![\w./-])(data/[\w./-]*\w\.[A-Za-z0-9]{1,8})(?![\w/-])")
"""A relative path under data/ with a suffix (how the demo tasks name what they read)."""


def task_inputs(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The input paths the user messages of a task name, in order, once each."""
    found: dict[str, None] = {}
    for message in messages:
        content = message.get("content")
        if message.get("role", "user") == "user" and isinstance(content, str):
            found.update(dict.fromkeys(INPUT_PATTERN.findall(content)))
    return list(found)


def check_task_inputs(messages: Sequence[dict[str, Any]], workspace: str | os.PathLike[str] | None) -> None:
    """Raise ConfigurationError naming an input file of the task that the workspace lacks (and where it is)."""
    root = Path(workspace) if workspace is not None else Path.cwd()
    missing = [path for path in task_inputs(messages) if not (root / path).is_file()]
    if not missing:
        return
    first = missing[0]
    holder = next((parent for parent in root.resolve().parents if (parent / first).is_file()), None)
    if holder is not None:
        fix = f"pass workspace={os.path.relpath(holder, Path.cwd())!r} (the folder holding {first})"
    else:
        fix = f"pass the folder holding {first} as workspace=..."
    more = f" (and {len(missing) - 1} more: {', '.join(missing[1:])})" if len(missing) > 1 else ""
    raise ConfigurationError("workspace", f"the task reads {first}{more}, which is not in the workspace "
                             f"{str(root.resolve())!r}; {fix}")
