"""`cyber-agent run TASK` and `cyber-agent demo`: run a task and print its tree, answer and totals.

On a terminal (stderr is a TTY) a status line shows the tree's progress while it runs
(`cyber_agent/cli/_progress.py:LiveProgress`), with the streamed answer text under `--stream`;
`--quiet`, or stderr not being a terminal, turns it off. `--json` prints one `RunDocument`
instead of the text report. Shell tools are off unless `--allow-shell` (the choice is the run
config's `shell_tools`, so the trace records it; docs/decisions.md says why).
"""

from __future__ import annotations

import argparse
from typing import Any
import os
import shlex
import sys
from pathlib import Path

from cyber_agent.cli._options import Subparsers, add_json_option, add_store_option, set_async_handler
from cyber_agent.cli._provider import add_provider_flags, provider_flags
from cyber_agent.cli._show import totals_line, tree_totals, tree_traces

__all__ = ["DEMO_ANCHOR", "DEMO_TASK", "add_demo", "add_run", "show_hint"]

DEMO_TASK = "Report the revenue (units × unit_price) per region from data/sales.csv and name the top region."
DEMO_ANCHOR = {
    "objective": DEMO_TASK,
    "completion_criteria": [
        "the answer reports the revenue of every region in data/sales.csv as the sum of units × unit_price",
        "the answer names the top region, the one with the highest revenue",
    ],
    "constraints": ["numbers come only from data/sales.csv"],
}

SHELL_HELP = ("let the agent run shell commands (bash_command) without asking; by default shell tools are off "
              "in `run`, and the trace's run config records shell_tools=off|allow")


def _add_output_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no live progress line on the terminal")
    add_json_option(parser, "RunDocument")


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
    run.add_argument("--allow-shell", action="store_true", help=SHELL_HELP)
    _add_output_flags(run)
    add_store_option(run)
    add_provider_flags(run)
    set_async_handler(run, run_command)


def add_demo(sub: Subparsers) -> None:
    """Add `demo` to the command line."""
    demo = sub.add_parser("demo", help="run the offline demo (no network)")
    demo.add_argument("--mode", choices=["legacy", "recursive"], default="recursive")
    _add_output_flags(demo)
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
    fields = {"model": args.model, "max_iterations": args.max_iterations, "workspace": args.workspace,
              "provider": provider_flags(args), "shell_tools": "allow" if args.allow_shell else "off"}
    if args.dialect is not None:  # only when given: unset, CYBER_AGENT_DIALECT decides
        fields["tool_dialect"] = args.dialect
    return await _run(args, args.task, args.mode, anchor, fields)


async def demo_command(args: argparse.Namespace) -> int:
    """Run the offline demo task (from the repository when `data/sales.csv` is not here)."""
    workspace = str(Path(__file__).resolve().parents[2]) if not Path("data/sales.csv").exists() else None
    fields = {"model": "demo", "max_iterations": 30, "workspace": workspace, "shell_tools": "off"}
    return await _run(args, DEMO_TASK, args.mode, DEMO_ANCHOR, fields)


def show_hint(url: str, trace_id: str) -> str:
    """The command that shows the trace again, quoted for a POSIX shell (a URL may hold `?`, `&`, spaces)."""
    return f"cyber-agent --store {shlex.quote(url)} show {shlex.quote(trace_id)}"


async def _run(args: argparse.Namespace, task: str, mode: str, anchor: dict[str, Any] | None, fields: dict[str, Any]) -> int:
    from cyber_agent.cli._documents import RunDocument, print_document
    from cyber_agent.cli._progress import LiveProgress
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.trace import open_store
    from cyber_agent.trace.render import render_trace_tree
    from cyber_agent.trace.store_url import store_url_of

    store = open_store(args.store)
    config = RunConfig.model_validate({**fields, "agent_mode": mode,
                                       "root_task_anchor": anchor if mode == "recursive" else None})
    live = None
    if not args.quiet and sys.stderr.isatty():
        live = LiveProgress(sys.stderr, show_text=getattr(args, "stream", None) is True)
    runner = AgentRunner(trace_store=store, workspace=config.workspace, on_progress=live)
    try:
        result = await runner.run_result([{"role": "user", "content": task}], config)
    except BaseException:
        if live is not None:
            live.close("interrupted")
        raise
    if live is not None:
        live.close(result.trace.status)
    trace = result.trace
    traces = await tree_traces(store, trace.trace_id)
    totals = tree_totals(traces)
    usage = await store.get_resource_usage(trace.trace_id) if mode == "recursive" else None
    url = store_url_of(store) or "memory:"
    if args.json:
        budget = {k: v for k, v in (usage.model_dump() if usage else {}).items()
                  if isinstance(v, int) and not isinstance(v, bool)}
        print_document(RunDocument(
            trace_id=trace.trace_id, status=trace.status, answer=result.answer,
            error=trace.error_message if trace.status != "completed" else None, agent_mode=trace.lineage.mode,
            model=config.model, shell_tools=config.shell_tools, store=url, show_command=show_hint(url, trace.trace_id),
            totals=totals, budget_used=budget if usage else None,
        ))
        return 0 if trace.status == "completed" else 1
    print(await render_trace_tree(store, trace.trace_id))
    print()
    print(f"answer ({trace.status}):")
    print(result.answer if result.answer is not None else trace.error_message)
    print()
    print(totals_line(totals))
    if usage:
        print(f"tree budget used: {usage.agents} agents, {usage.llm_calls} LLM calls, "
              f"{usage.validation_tool_calls} validation tool calls")
    print(f"trace id: {trace.trace_id}  (store: {url}; `{show_hint(url, trace.trace_id)}`)")
    return 0 if trace.status == "completed" else 1
