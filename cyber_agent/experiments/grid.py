"""The sweep grid: tasks × models × modes × config overrides × repeats, and each cell's stable key.

A cell's key is the SHA-256 of the canonical JSON of what changes its run — the task (prompt,
expected answer, criteria, constraints), the model (spec and options, secrets and transports
left out), the mode, the config override and the repeat with its seed — so the same cell has
the same key in every sweep and every process. The root trace of attempt `n` of a cell has the
id `uuid5(key/n)`: a re-run finds what ran before by id, in any store, without a listing.
The sweep's name, its scorer and its concurrency are not part of the key.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import ValidationError

from cyber_agent.errors import ConfigurationError
from cyber_agent.experiments.scorers import NumericScorer, Scorer
from cyber_agent.experiments.tasks import SweepTask
from cyber_agent.llm.types import LLMCall

__all__ = ["Mode", "ModelEntry", "Sweep", "SweepCell", "cell_key"]

Mode = Literal["legacy", "recursive"]
"""Agent mode of a cell."""

_MODES: tuple[str, ...] = get_args(Mode)
_NAMESPACE = uuid.UUID("0e3f9a52-7c1d-4b8e-a6f2-3d95c1b7e408")
# Secrets and plumbing: they change how a call travels, not what the model answers.
_NOT_IDENTITY = frozenset({"api_key", "transport", "client", "env", "sleep", "prices", "retry", "timeout"})
# Set by the sweep for every cell; an override may not change them.
_RESERVED = frozenset({"model", "agent_mode", "root_task_anchor", "trace_id", "new_trace_id", "parent_trace_id",
                       "parent_goal_id", "after_sequence", "side_branch", "workspace"})


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except TypeError as exc:
        raise ConfigurationError("sweep", f"a task, model option or override is not JSON data: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class ModelEntry:
    """One model of the grid: a `resolve_llm` spec, constructor options and a label."""

    spec: str
    """Model spec: `fallible:0.3`, `demo`, `openai:gpt-4o-mini`, ..."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Options for `resolve_llm` (base_url, stream, ...); api_key, transport, client, env, sleep, prices, retry and
    timeout are not part of the cell key, every other option must be JSON data."""
    label: str | None = None
    """Name in frames and charts; default: the spec."""
    provider: str | None = None
    """Key of the adaptive rate limiter; default: the spec's prefix, plus base_url when one is given."""
    factory: Callable[..., LLMCall] | None = None
    """Builds the model from `options` instead of `resolve_llm(spec)` (your own `LLMCall`); the spec then only
    names it. Define it at module level when the sweep runs on processes or Ray (it is pickled)."""

    @property
    def name(self) -> str:
        """The label, or the spec."""
        return self.label or self.spec

    @property
    def limiter_key(self) -> str:
        """Which adaptive limiter this model's calls share."""
        if self.provider:
            return self.provider
        prefix = self.spec.partition(":")[0].strip().lower()
        base_url = self.options.get("base_url")
        return f"{prefix}@{base_url}" if base_url else prefix

    def identity(self) -> dict[str, Any]:
        """What a cell key hashes of the model."""
        return {"spec": self.spec, "options": {k: v for k, v in sorted(self.options.items()) if k not in _NOT_IDENTITY}}


def cell_key(task: SweepTask, model: ModelEntry, mode: str, overrides: Mapping[str, Any], repeat: int, seed: int) -> str:
    """The stable key of one cell (32 hex digits of a SHA-256)."""
    data = {"task": task.identity(), "model": model.identity(), "mode": mode, "config": dict(overrides),
            "repeat": repeat, "seed": seed}
    return hashlib.sha256(_canonical(data).encode()).hexdigest()[:32]


@dataclass(frozen=True, kw_only=True)
class SweepCell:
    """One (task, model, mode, config, repeat) of a grid."""

    index: int
    """Position in the grid's order (tasks, then models, modes, configs, repeats)."""
    key: str
    """Stable key (`cell_key`)."""
    task: SweepTask
    model: ModelEntry
    mode: Mode
    config: str
    """Label of the config override."""
    overrides: Mapping[str, Any]
    """RunConfig fields the override sets."""
    repeat: int
    seed: int
    """Seed of the repeat: the sweep's seed plus the repeat index."""

    def trace_id(self, attempt: int) -> str:
        """Root trace id of attempt `attempt` (0-based) of this cell."""
        return str(uuid.uuid5(_NAMESPACE, f"{self.key}/{attempt}"))


def _labelled(overrides: Mapping[str, Mapping[str, Any]] | Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    if isinstance(overrides, Mapping):
        return {str(label): dict(values) for label, values in overrides.items()}
    labelled: dict[str, dict[str, Any]] = {}
    for values in overrides:
        label = ",".join(f"{k}={v}" for k, v in sorted(values.items())) or "default"
        labelled[label] = dict(values)
    return labelled


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """A grid of runs and how to score them; `cells()` lists it in a fixed order."""

    name: str
    """Recorded on every cell; names the sweep in frames and progress."""
    tasks: Sequence[SweepTask]
    models: Sequence[ModelEntry | str]
    """Specs or entries; a string is `ModelEntry(spec=...)`."""
    modes: Sequence[Mode] = ("legacy",)
    overrides: Mapping[str, Mapping[str, Any]] | Sequence[Mapping[str, Any]] = field(default_factory=lambda: {"default": {}})
    """Config variants: label → RunConfig fields, or a list of field dicts (labelled by their contents)."""
    repeats: int = 1
    seed: int = 0
    """Seed of repeat 0; repeat r gets seed + r (models with `with_seed` draw from it)."""
    scorer: Scorer | None = None
    """Scores every cell; None uses each task's own scorer, else `exact` when the task has an expected answer."""
    max_retries: int = 2
    """Re-runs of a cell whose run raised (an interrupted attempt does not count)."""
    workspace: str | None = None
    """Directory the runs' tools work in (task paths are relative to it)."""
    max_iterations: int = 30
    """Model turns per run, unless an override sets `max_iterations`."""
    entries: tuple[ModelEntry, ...] = field(init=False)
    """The models as entries, in order."""
    configs: dict[str, dict[str, Any]] = field(init=False)
    """The overrides by label, in order."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", tuple(m if isinstance(m, ModelEntry) else ModelEntry(spec=m) for m in self.models))
        object.__setattr__(self, "configs", _labelled(self.overrides))
        object.__setattr__(self, "tasks", tuple(self.tasks))
        object.__setattr__(self, "modes", tuple(self.modes))
        self._check()

    def _check(self) -> None:
        from cyber_agent.core.config import RunConfig

        if not self.name.strip():
            raise ConfigurationError("sweep.name", "must not be empty")
        for setting, values in (("tasks", self.tasks), ("models", self.entries), ("modes", self.modes), ("overrides", self.configs)):
            if not values:
                raise ConfigurationError(f"sweep.{setting}", "must not be empty")
        ids = [t.id for t in self.tasks]
        duplicate = next((i for i in ids if ids.count(i) > 1), None)
        if duplicate is not None:
            raise ConfigurationError("sweep.tasks", f"task id {duplicate!r} appears more than once; ids must be unique")
        names = [m.name for m in self.entries]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice is not None:
            raise ConfigurationError("sweep.models", f"model {twice!r} appears more than once; give entries distinct labels")
        bad_mode = next((m for m in self.modes if m not in _MODES), None)
        if bad_mode is not None:
            raise ConfigurationError("sweep.modes", f"unknown mode {bad_mode!r}; use legacy or recursive")
        if self.repeats < 1 or self.max_retries < 0:
            raise ConfigurationError("sweep.repeats" if self.repeats < 1 else "sweep.max_retries", "repeats must be >= 1, max_retries >= 0")
        for label, values in self.configs.items():
            reserved = sorted(set(values) & _RESERVED)
            if reserved:
                raise ConfigurationError(f"sweep.overrides.{label}.{reserved[0]}", "is set by the sweep for every cell; it cannot be overridden")
            try:
                RunConfig.model_validate({"max_iterations": self.max_iterations, **values})
            except (ValidationError, ConfigurationError) as exc:
                raise ConfigurationError(f"sweep.overrides.{label}", f"is not a valid RunConfig: {exc}") from None
        if "recursive" in self.modes:
            for task in self.tasks:
                task.anchor()  # raises for a task without criteria
        for task in self.tasks:
            scorer = self.scorer_for(task)
            if isinstance(scorer, NumericScorer):
                try:
                    float(task.expected or "")
                except ValueError:
                    raise ConfigurationError(f"task {task.id}.expected", f"{task.expected!r} is not a number; its scorer is numeric") from None

    def scorer_for(self, task: SweepTask) -> Scorer | None:
        """The scorer of a task: the sweep's, else the task's own, else `exact` when it has an expected answer."""
        from cyber_agent.experiments.scorers import ExactScorer

        if self.scorer is not None:
            return self.scorer
        if task.scorer is not None:
            return task.scorer
        return ExactScorer() if task.expected is not None else None

    def cells(self) -> list[SweepCell]:
        """Every cell, in grid order."""
        cells: list[SweepCell] = []
        for task in self.tasks:
            for model in self.entries:
                for mode in self.modes:
                    for label, values in self.configs.items():
                        for repeat in range(self.repeats):
                            seed = self.seed + repeat
                            cells.append(SweepCell(
                                index=len(cells), key=cell_key(task, model, mode, values, repeat, seed), task=task,
                                model=model, mode=mode, config=label, overrides=values, repeat=repeat, seed=seed,
                            ))
        return cells
