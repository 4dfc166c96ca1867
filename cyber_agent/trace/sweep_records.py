"""The typed record a sweep keeps on each cell's root trace (`Trace.sweep_cell`).

A sweep (`cyber_agent/experiments/`) runs one root trace per cell attempt, with an id derived
from the cell's key and the attempt number. The record below is what makes the store the
sweep's ledger: which cell the trace is, whether it finished, its score and its numbers. A
re-run reads these records and runs only what is missing.

    running ──► scored        the run ended (completed, failed or stopped) and was scored
       │
       ├──────► error         the run raised (provider down, a crash); retried up to a limit
       └──────► interrupted   found `running` by a later sweep: its process died mid-run
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["CellState", "SweepCellRecord"]

CellState = Literal["running", "scored", "error", "interrupted"]
"""Where one attempt of a sweep cell stands."""


class SweepCellRecord(BaseModel):
    """One attempt of one sweep cell, recorded on its root trace."""

    model_config = ConfigDict(extra="ignore")

    sweep: str
    """Name of the sweep that started the attempt."""
    key: str
    """The cell's stable key: a hash of task, model, mode, config and repeat."""
    task_id: str
    """Id of the task."""
    model: str
    """Label of the model entry (its spec unless labelled)."""
    mode: Literal["legacy", "recursive"]
    """Agent mode of the run."""
    config: str
    """Label of the config override."""
    repeat: int
    """Repeat index, 0-based."""
    seed: int
    """Seed the model was given for this repeat."""
    attempt: int
    """Attempt number, 0-based; the root trace id is derived from (key, attempt)."""
    state: CellState = "running"
    """running, scored, error or interrupted."""
    run_status: str | None = None
    """The root trace's status when the run ended (completed, failed, stopped, ...)."""
    answer: str | None = None
    """The run's final answer (None when it gave none)."""
    score: float | None = None
    """Score in 0..1; None when the task has no expected answer and no scorer."""
    passed: bool | None = None
    """Whether the scorer counted the answer as correct."""
    scorer: str | None = None
    """Name of the scorer that scored it (a changed scorer re-scores without re-running)."""
    explanation: str = ""
    """The scorer's reason."""
    grader_trace_id: str | None = None
    """Root trace of the model-graded scorer's grading run, if any."""
    error: str | None = None
    """Why the attempt errored or was interrupted."""
    tokens: int = 0
    """Input plus output tokens of every model call of the cell's tree."""
    cost: float = 0.0
    """USD cost of those calls."""
    llm_calls: int = 0
    """Model calls made by the cell's tree (validators included)."""
    agents: int = 0
    """Traces of the tree that are not validators (the root and its sub-agents)."""
    duration_s: float | None = None
    """Wall time of the attempt, in seconds."""
    finished_at: datetime | None = None
    """When the attempt was scored, errored or found interrupted (UTC)."""
