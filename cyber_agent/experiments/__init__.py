"""Experiments: sweeps of runs over tasks × models × modes × config overrides × repeats.

A `Sweep` is the grid; `run_sweep` (or `sweep(...)`) runs what the store does not hold
finished yet — resumable after a crash, retrying cells whose run raised, under a global limit
and an adaptive limit per provider — on asyncio, a process pool or Ray. `sweep_frame` reads the
results as one pandas row per cell; `summarize`, `plot_score_vs_cost` and `plot_metric` compare
groups with error bars across repeats. See docs/experiments.md.
"""

from cyber_agent.experiments.engine import Backend, SweepReport, run_sweep, sweep
from cyber_agent.experiments.frame import FRAME_COLUMNS, plot_metric, plot_score_vs_cost, summarize, sweep_frame, sweep_roots
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
    "RegexScorer",
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
    "load_sweep_file",
    "load_tasks",
    "plot_metric",
    "plot_score_vs_cost",
    "read_ledger",
    "run_sweep",
    "summarize",
    "sweep",
    "sweep_frame",
    "sweep_roots",
]
