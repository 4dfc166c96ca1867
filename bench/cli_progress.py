"""What the CLI's live progress line costs a run, and how long `cyber-agent` takes to start.

    python bench/cli_progress.py            # 7 rounds
    python bench/cli_progress.py --quick    # 3 rounds
    python bench/cli_progress.py --json out.json

Progress: the legacy demo task (5 agents, 17 LLM calls, ~45 tool calls) on the offline demo model
in an in-memory store, once with no observer and once with `LiveProgress` drawing every event
into a pseudo-terminal's other end (as `cyber-agent run` does on a terminal; a thread drains it).
Rounds alternate the two (and which goes first), so a change in machine load hits both; the table shows medians and
the ratio. Start-up: `cyber-agent --version` and `cyber-agent --store memory: list` as
subprocesses (interpreter start and imports, the floor of every command).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pty
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cyber_agent.cli import DEMO_TASK  # noqa: E402
from cyber_agent.cli._progress import LiveProgress  # noqa: E402
from cyber_agent.core.config import RunConfig  # noqa: E402
from cyber_agent.core.runner import AgentRunner  # noqa: E402
from cyber_agent.trace import InMemoryTraceStore  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


async def _run(observer: LiveProgress | None) -> float:
    runner = AgentRunner(trace_store=InMemoryTraceStore(), workspace=REPO, on_progress=observer)
    started = time.perf_counter()
    result = await runner.run_result([{"role": "user", "content": DEMO_TASK}], RunConfig(agent_mode="legacy"))
    elapsed = time.perf_counter() - started
    assert result.trace.status == "completed" and "North" in (result.answer or "")
    if observer is not None:
        observer.close(result.trace.status)
        assert observer.agents and sum(a.calls for a in observer.agents.values()) >= 17
    return elapsed


def _drain(fd: int) -> None:
    """Read the terminal's other end so drawing never blocks on a full buffer."""
    try:
        while os.read(fd, 65536):
            pass
    except OSError:  # EIO once the terminal side closes
        pass


def _startup(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cyber_agent.cli", *args], check=True, capture_output=True, cwd=REPO)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    options = parser.parse_args()
    rounds = 3 if options.quick else 7
    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w", encoding="utf-8")
    threading.Thread(target=_drain, args=(master,), daemon=True).start()
    asyncio.run(_run(None))  # warm-up: imports, the demo's file reads
    plain, drawn = [], []
    for index in range(rounds):  # the order alternates too: the first run of a pair pays for the pair's GC
        for observed in ((False, True) if index % 2 == 0 else (True, False)):
            if observed:
                drawn.append(asyncio.run(_run(LiveProgress(terminal, width=160))))
            else:
                plain.append(asyncio.run(_run(None)))
    version = [_startup(["--version"]) for _ in range(rounds)]
    listing = [_startup(["--store", "memory:", "list"]) for _ in range(rounds)]
    rows = {
        "run_without_progress_s": statistics.median(plain),
        "run_with_progress_s": statistics.median(drawn),
        "progress_ratio": statistics.median(drawn) / statistics.median(plain),
        "startup_version_s": statistics.median(version),
        "startup_list_s": statistics.median(listing),
    }
    for key, value in rows.items():
        print(f"{key:<26} {value:8.3f}")
    terminal.close()
    if options.json:
        Path(options.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
