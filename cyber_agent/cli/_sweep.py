"""`cyber-agent sweep FILE`: run the sweep a TOML file describes, resumably, and print its summary.

    cyber-agent --store sqlite:///sweep.db sweep data/tasks/sweep.toml
    cyber-agent sweep grid.toml --concurrency 16 --backend process --quiet

A progress bar goes to stderr (one rewritten line on a terminal); the summary per mode and
model (`cyber_agent/experiments/frame.py:summarize`) goes to stdout. Running it again does only
the work left. `--json` prints one `SweepDocument` (`cyber_agent/cli/_documents.py`) instead
of the table. Exit status: 0 when every cell finished, 1 when some errored past their retries.
"""

from __future__ import annotations

import argparse
import sys

from cyber_agent.cli._options import Subparsers, add_json_option, add_store_option, set_async_handler

__all__ = ["add_sweep", "sweep_command"]


def add_sweep(sub: Subparsers) -> None:
    """Add `sweep` to the command line."""
    sweep = sub.add_parser("sweep", help="run a sweep (tasks × models × modes × overrides × repeats) from a TOML file")
    sweep.add_argument("file", help="the sweep's TOML file (docs/experiments.md)")
    sweep.add_argument("--concurrency", type=int, default=None, help="cells in flight (default: the file's, else 8)")
    sweep.add_argument("--backend", choices=["asyncio", "process", "ray"], default=None,
                       help="where cells run (default: the file's, else asyncio)")
    sweep.add_argument("--workers", type=int, default=None, help="process or Ray worker processes (default: the cores; each runs its share of --concurrency)")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    add_store_option(sweep)
    add_json_option(sweep, "SweepDocument")
    set_async_handler(sweep, sweep_command)


async def sweep_command(args: argparse.Namespace) -> int:
    """Run the sweep of `args.file` on `--store` (or the file's store) and print the summary."""
    import pandas as pd

    from cyber_agent.cli._documents import SweepCells, SweepDocument, SweepGroup, finite_or_none, print_document
    from cyber_agent.experiments import TextProgressBar, run_sweep, summarize
    from cyber_agent.experiments.sweep_file import load_sweep_file
    from cyber_agent.trace import open_store
    from cyber_agent.trace.store_url import store_url_of

    plan = load_sweep_file(args.file)
    store = open_store(args.store or plan.store)
    url = store_url_of(store)
    report = await run_sweep(
        plan.sweep, store, concurrency=args.concurrency or plan.concurrency, limits=plan.limits,
        on_progress=None if args.quiet else TextProgressBar(sys.stderr), backend=args.backend or plan.backend,
        store_url=url, workers=args.workers or plan.workers,
    )
    frame = report.frame()
    columns = ["mode", "model", "score_mean", "score_std", "cost_mean", "cost_std", "llm_calls_mean", "cells", "unfinished"]
    progress = report.progress
    if args.json:
        groups = [SweepGroup(mode=str(row["mode"]), model=str(row["model"]), cells=int(row["cells"]),
                             unfinished=int(row["unfinished"]),
                             **{name: finite_or_none(row[name]) for name in columns[2:7]})
                  for row in summarize(frame)[columns].to_dict("records")]
        print_document(SweepDocument(store=url, summary=groups, cells=SweepCells(
            total=progress.total, done=progress.done, skipped=progress.skipped, failed=progress.failed)))
        return 1 if progress.failed else 0
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(summarize(frame)[columns].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"\n{progress.total} cells: {progress.done} run now, {progress.skipped} already finished, "
          f"{progress.failed} failed after retries; store {url or 'memory: (not kept)'}")
    return 1 if progress.failed else 0
