"""Run `sweep_helpers.small_sweep` on a FileSystemTraceStore, to be killed mid-run by a test.

    python tests/experiments/sweep_driver.py STORE_DIR LATENCY CONCURRENCY TASKS REPEATS
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sweep_helpers import small_sweep  # noqa: E402

from cyber_agent.experiments import run_sweep  # noqa: E402
from cyber_agent.trace import FileSystemTraceStore  # noqa: E402


def main() -> int:
    store_dir, latency, concurrency, tasks, repeats = sys.argv[1], float(sys.argv[2]), *map(int, sys.argv[3:6])
    grid = small_sweep(latency, tasks=tasks, repeats=repeats)
    report = asyncio.run(run_sweep(grid, FileSystemTraceStore(store_dir), concurrency=concurrency))
    print(report.progress.to_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
