"""Experiments: sweeps of runs over tasks × models × modes × config overrides × repeats.

A `Sweep` is the grid; `run_sweep` (or `sweep(...)`) runs what the store does not hold
finished yet — resumable after a crash, retrying cells whose run raised, under a global limit
and an adaptive limit per provider — on asyncio, a process pool or Ray. `sweep_frame` reads the
results as one pandas row per cell; `summarize`, `plot_score_vs_cost` and `plot_metric` compare
groups with error bars across repeats. `delegation_report` asks whether delegation pays: per
mode × model (or any column, imported runs included via `runs_frame`), success with a Wilson
interval, cost, work and delegation shape; `plot_success_vs_cost` draws it. See docs/experiments.md.
"""

from cyber_agent.experiments.delegation import (
    REPORT_COLUMNS,
    RUN_COLUMNS,
    delegation_report,
    plot_success_vs_cost,
    runs_frame,
    wilson_interval,
)
from cyber_agent.experiments.engine import Backend, SweepReport, run_sweep, sweep
from cyber_agent.experiments.frame import (
    FRAME_COLUMNS,
    SHAPE_FRAME_COLUMNS,
    plot_metric,
    plot_score_vs_cost,
    shape_dtypes,
    summarize,
    sweep_frame,
    sweep_roots,
    with_shape,
)
from cyber_agent.experiments.grid import Mode, ModelEntry, Sweep, SweepCell, cell_key
from cyber_agent.experiments.ledger import CellStatus, read_ledger
from cyber_agent.experiments.limiter import AdaptiveLimiter, LimiterState, LimitPolicy, ProviderLimits
from cyber_agent.experiments.progress import SweepProgress, TextProgressBar
from cyber_agent.experiments.scorers import (
    CallableScorer,
    ExactScorer,
    ModelGradedScorer,
    NumericScorer,
    RegexScorer,
    Score,
    ScoreContext,
    Scorer,
    ScorerSpec,
)
from cyber_agent.experiments.sweep_file import SweepPlan, load_sweep_file
from cyber_agent.experiments.tasks import SweepTask, load_tasks

__all__ = [
    "AdaptiveLimiter",
    "Backend",
    "CallableScorer",
    "CellStatus",
    "ExactScorer",
    "FRAME_COLUMNS",
    "LimitPolicy",
    "LimiterState",
    "Mode",
    "ModelEntry",
    "ModelGradedScorer",
    "NumericScorer",
    "ProviderLimits",
    "REPORT_COLUMNS",
    "RUN_COLUMNS",
    "RegexScorer",
    "SHAPE_FRAME_COLUMNS",
    "Score",
    "ScoreContext",
    "Scorer",
    "ScorerSpec",
    "Sweep",
    "SweepCell",
    "SweepPlan",
    "SweepProgress",
    "SweepReport",
    "SweepTask",
    "TextProgressBar",
    "cell_key",
    "delegation_report",
    "load_sweep_file",
    "load_tasks",
    "plot_metric",
    "plot_score_vs_cost",
    "plot_success_vs_cost",
    "read_ledger",
    "run_sweep",
    "runs_frame",
    "shape_dtypes",
    "summarize",
    "sweep",
    "sweep_frame",
    "sweep_roots",
    "wilson_interval",
    "with_shape",
]
