"""A sweep as a TOML file: the grid, how to run it and where to keep it (`cyber-agent sweep FILE`).

    name = "legacy-vs-recursive"
    tasks = "tasks.jsonl"                  # a task file, or inline [[tasks]] tables
    models = ["fallible:0.1", "fallible:0.3"]
    modes = ["legacy", "recursive"]
    repeats = 3
    workspace = "../.."                    # where the runs' tools work
    [scorer]                               # optional: overrides every task's own scorer
    kind = "numeric"
    [overrides.short]                      # config variants (default: one, `default` = {})
    max_iterations = 10
    [limits]                               # the adaptive limiter's default policy
    initial = 8
    [limits.providers."openai"]            # and per provider key
    initial = 2

Relative paths (`tasks`, `workspace`) are relative to the file's folder; `store` is a store
URL as everywhere (relative to the working directory). Unknown keys are refused.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments.engine import Backend
from cyber_agent.experiments.grid import Mode, ModelEntry, Sweep
from cyber_agent.experiments.limiter import LimitPolicy, ProviderLimits
from cyber_agent.experiments.scorers import ScorerSpec
from cyber_agent.experiments.tasks import SweepTask, load_tasks

__all__ = ["SweepPlan", "load_sweep_file"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")
    spec: str
    label: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    provider: str | None = None


class _Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")
    initial: int | None = None
    minimum: int = 1
    maximum: int | None = None
    decrease: float = 0.5
    max_retry_after: float = 60.0
    default_retry_after: float = 1.0

    def policy(self) -> LimitPolicy:
        return LimitPolicy(**self.model_dump(exclude={"providers"}))


class _Limits(_Policy):
    providers: dict[str, _Policy] = Field(default_factory=dict)


def _legacy_only() -> list[Mode]:
    return ["legacy"]


def _no_override() -> dict[str, dict[str, Any]]:
    return {"default": {}}


class _SweepFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    tasks: str | list[SweepTask]
    task_ids: list[str] | None = None
    models: list[str | _Model]
    modes: list[Mode] = Field(default_factory=_legacy_only)
    overrides: dict[str, dict[str, Any]] = Field(default_factory=_no_override)
    repeats: int = 1
    seed: int = 0
    max_retries: int = 2
    workspace: str | None = None
    max_iterations: int = 30
    scorer: ScorerSpec | None = None
    concurrency: int = 8
    backend: Backend = "asyncio"
    workers: int | None = None
    store: str | None = None
    limits: _Limits | None = None


@dataclass(frozen=True, kw_only=True)
class SweepPlan:
    """A sweep file read: the grid and how to run it."""

    sweep: Sweep
    store: str | None
    """Store URL named by the file (the CLI's `--store` wins)."""
    concurrency: int
    backend: Backend
    workers: int | None
    limits: ProviderLimits


def load_sweep_file(path: str | Path) -> SweepPlan:
    """Read a TOML sweep file; every error names the key and the file."""
    source = Path(path)
    if source.suffix != ".toml":
        raise ConfigurationError("sweep file", f"{str(source)!r}: write the grid as TOML (a .toml file)")
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError("sweep file", f"cannot read {str(source)!r}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError("sweep file", f"{str(source)!r} is not valid TOML: {exc}") from None
    try:
        parsed = _SweepFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise ConfigurationError(f"sweep file {where}", f"{first['msg']} (in {str(source)!r})") from None
    base = source.resolve().parent
    tasks = load_tasks(base / parsed.tasks) if isinstance(parsed.tasks, str) else parsed.tasks
    if parsed.task_ids is not None:
        known = {t.id: t for t in tasks}
        missing = [i for i in parsed.task_ids if i not in known]
        if missing:
            raise ConfigurationError("sweep file task_ids", f"no task {missing[0]!r} in {parsed.tasks!r}")
        tasks = [known[i] for i in parsed.task_ids]
    models = [m if isinstance(m, str) else ModelEntry(spec=m.spec, label=m.label, options=m.options, provider=m.provider)
              for m in parsed.models]
    workspace = str((base / parsed.workspace).resolve()) if parsed.workspace is not None else str(base)
    sweep = Sweep(name=parsed.name, tasks=tasks, models=models, modes=parsed.modes, overrides=parsed.overrides,
                  repeats=parsed.repeats, seed=parsed.seed, scorer=parsed.scorer, max_retries=parsed.max_retries,
                  workspace=workspace, max_iterations=parsed.max_iterations)
    limits_file = parsed.limits or _Limits()
    limits = ProviderLimits(default=limits_file.policy(),
                            per_provider={key: policy.policy() for key, policy in limits_file.providers.items()})
    return SweepPlan(sweep=sweep, store=parsed.store, concurrency=parsed.concurrency, backend=parsed.backend,
                     workers=parsed.workers, limits=limits)
