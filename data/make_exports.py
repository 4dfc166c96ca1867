"""Regenerate the sample trace exports in data/exports/ (offline, on the `demo` model).

    .venv/bin/python data/make_exports.py            # writes data/exports/*.jsonl
    .venv/bin/python data/make_exports.py --out DIR  # somewhere else

Each run goes into a fresh temporary FileSystemTraceStore and is exported with
`cyber_agent.notebook.export_traces`:

- `legacy_demo.jsonl`: the legacy demo (revenue per region of data/sales.csv: a main agent and
  four explore sub-agents) and a one-agent arithmetic task, two trees in one file;
- `recursive_demo.jsonl`: the same demo task in recursive mode (briefs, reports, validators,
  reviews, tree budget), written only when this build has recursive mode.

The demo model is deterministic, so a re-run yields the same trees, messages, tool calls,
token counts, costs and answers. Costs are simulated (`MODEL`: the demo's estimated tokens at
gpt-4o-mini's list price, each message flagged `cost_estimated`), so cost charts are not flat. Trace ids (UUIDs and sub-trace timestamps), timestamps and
durations differ from run to run, and so do the files' bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cyber_agent.cli import DEMO_TASK  # noqa: E402
from cyber_agent.core.config import RunConfig  # noqa: E402
from cyber_agent.core.runner import AgentRunner  # noqa: E402
from cyber_agent.errors import CyberAgentError  # noqa: E402
from cyber_agent.notebook import export_traces, to_frames  # noqa: E402
from cyber_agent.trace import FileSystemTraceStore  # noqa: E402

ARITHMETIC_TASK = "What is 17 * 23 + 4?"
MODEL = "demo:price_as=gpt-4o-mini"
"""The demo model with simulated costs: its estimated tokens at gpt-4o-mini's list price (`cost_estimated`)."""


async def _run(store: FileSystemTraceStore, task: str, **config: object) -> str:
    runner = AgentRunner(trace_store=store)
    result = await runner.run_result([{"role": "user", "content": task}],
                                     RunConfig(model=MODEL, workspace=str(REPO), **config))  # type: ignore[arg-type]
    if result.status != "completed":
        raise SystemExit(f"{task!r} ended {result.status}: {result.trace.error_message}")
    return result.trace.trace_id


def _legacy(out: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="cyber-agent-exports-") as tmp:
        store = FileSystemTraceStore(tmp)
        mode = {"agent_mode": "legacy"} if "agent_mode" in RunConfig.model_fields else {}
        roots = [asyncio.run(_run(store, DEMO_TASK, **mode)), asyncio.run(_run(store, ARITHMETIC_TASK, **mode))]
        return export_traces(store, roots, out / "legacy_demo.jsonl")


def _recursive(out: Path) -> Path | None:
    if "agent_mode" not in RunConfig.model_fields:
        print("recursive mode is not in this build: recursive_demo.jsonl not written")
        return None
    from cyber_agent.cli import DEMO_ANCHOR

    with tempfile.TemporaryDirectory(prefix="cyber-agent-exports-") as tmp:
        store = FileSystemTraceStore(tmp)
        try:
            root = asyncio.run(_run(store, DEMO_TASK, agent_mode="recursive", root_task_anchor=DEMO_ANCHOR))
        except CyberAgentError as exc:
            print(f"recursive demo failed ({exc}): recursive_demo.jsonl not written")
            return None
        return export_traces(store, [root], out / "recursive_demo.jsonl")


def main(argv: list[str] | None = None) -> int:
    """Write the sample exports and print what each holds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "data" / "exports", help="directory to write (default: data/exports)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in (_legacy(args.out), _recursive(args.out)):
        if path is not None:
            frames = to_frames(path)
            print(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}: {frames!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
