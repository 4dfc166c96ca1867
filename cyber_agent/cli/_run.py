"""`cyber-agent run TASK` and `cyber-agent demo`: run a task and print its tree, answer and totals."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cyber_agent.cli._options import Subparsers, add_store_option, set_async_handler
from cyber_agent.cli._provider import add_provider_flags, provider_flags
from cyber_agent.cli._show import totals_line, tree_totals

__all__ = ["DEMO_ANCHOR", "DEMO_TASK", "add_demo", "add_run"]

DEMO_TASK = "Report the revenue (units × unit_price) per region from data/sales.csv and name the top region."
DEMO_ANCHOR = {
    "objective": DEMO_TASK,
    "completion_criteria": [
        "the answer reports the revenue of every region in data/sales.csv as the sum of units × unit_price",
        "the answer names the top region, the one with the highest revenue",
    ],
    "constraints": ["numbers come only from data/sales.csv"],
}


def add_run(sub: Subparsers) -> None:
    """Add `run` to the command line."""
    run = sub.add_parser("run", help="run a task")
    run.add_argument("task")
    run.add_argument("--mode", choices=["legacy", "recursive"], default=os.environ.get("AGENT_MODE", "legacy"))
    run.add_argument("--model", default="demo", help="demo | openai:MODEL | anthropic:MODEL | replay:PATH")
    run.add_argument("--workspace", default=None, help="directory tools may read (default: current directory)")
    run.add_argument("--max-iterations", type=int, default=30)
    run.add_argument("--criterion", action="append", default=[], help="recursive: a completion criterion (repeat)")
    run.add_argument("--constraint", action="append", default=[], help="recursive: a hard constraint (repeat)")
    add_store_option(run)
    add_provider_flags(run)
    set_async_handler(run, run_command)


def add_demo(sub: Subparsers) -> None:
    """Add `demo` to the command line."""
    demo = sub.add_parser("demo", help="run the offline demo (no network)")
    demo.add_argument("--mode", choices=["legacy", "recursive"], default="recursive")
    add_store_option(demo)
    set_async_handler(demo, demo_command)


async def run_command(args: argparse.Namespace) -> int:
    """Run `args.task` as `run`'s flags say."""
    anchor = None
    if args.mode == "recursive":
        if not args.criterion:
            print("error: --mode recursive needs at least one --criterion (the root task's completion criteria)",
                  file=sys.stderr)
            return 2
        anchor = {"objective": args.task, "completion_criteria": args.criterion, "constraints": args.constraint}
    return await _run(args.task, args.model, args.mode, args.store, args.workspace, args.max_iterations, anchor,
                      provider=provider_flags(args), dialect=args.dialect)


async def demo_command(args: argparse.Namespace) -> int:
    """Run the offline demo task (from the repository when `data/sales.csv` is not here)."""
    workspace = str(Path(__file__).resolve().parents[2]) if not Path("data/sales.csv").exists() else None
    return await _run(DEMO_TASK, "demo", args.mode, args.store, workspace, 30, DEMO_ANCHOR)


async def _run(
    task: str, model: str, mode: str, store_path: str | None, workspace: str | None, max_iterations: int,
    anchor: dict | None = None, provider: dict | None = None, dialect: str | None = None,
) -> int:
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.trace import open_store
    from cyber_agent.trace.render import render_trace_tree
    from cyber_agent.trace.store_url import store_url_of

    store = open_store(store_path)
    runner = AgentRunner(trace_store=store, workspace=workspace)
    fields = {"model": model, "max_iterations": max_iterations, "workspace": workspace, "agent_mode": mode,
              "root_task_anchor": anchor if mode == "recursive" else None, "provider": provider or {}}
    if dialect is not None:  # only when given: unset, CYBER_AGENT_DIALECT decides
        fields["tool_dialect"] = dialect
    config = RunConfig.model_validate(fields)
    result = await runner.run_result([{"role": "user", "content": task}], config)
    trace = result.trace
    print(await render_trace_tree(store, trace.trace_id))
    print()
    print(f"answer ({trace.status}):")
    print(result.answer if result.answer is not None else trace.error_message)
    print()
    print(totals_line(await tree_totals(store, trace.trace_id)))
    usage = await store.get_resource_usage(trace.trace_id) if mode == "recursive" else None
    if usage:
        print(f"tree budget used: {usage['agents']} agents, {usage['llm_calls']} LLM calls, "
              f"{usage['validation_tool_calls']} validation tool calls")
    url = store_url_of(store) or "memory:"
    print(f"trace id: {trace.trace_id}  (store: {url}; `cyber-agent --store {url} show {trace.trace_id}`)")
    return 0 if trace.status == "completed" else 1
