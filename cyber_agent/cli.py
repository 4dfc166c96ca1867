"""The `cyber-agent` command line: run, show, demo, serve, extractions, and the store commands
(copy, export, import, stop: `cyber_agent/cli_store.py`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from cyber_agent.cli_store import STORE_COMMANDS, add_store_commands, store_command
from cyber_agent.errors import CyberAgentError

__all__ = ["main"]

DEMO_TASK = "Report the revenue (units × unit_price) per region from data/sales.csv and name the top region."
DEMO_ANCHOR = {
    "objective": DEMO_TASK,
    "completion_criteria": [
        "the answer reports the revenue of every region in data/sales.csv as the sum of units × unit_price",
        "the answer names the top region, the one with the highest revenue",
    ],
    "constraints": ["numbers come only from data/sales.csv"],
}


def _store(url: str | None):  # noqa: ANN202 - returns a TraceStore
    from cyber_agent.trace import open_store

    return open_store(url)


async def _run(
    task: str, model: str, mode: str, store_path: str, workspace: str | None, max_iterations: int,
    anchor: dict | None = None,
) -> int:
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.trace.render import render_trace_tree

    store = _store(store_path)
    runner = AgentRunner(trace_store=store, workspace=workspace)
    config = RunConfig(model=model, max_iterations=max_iterations, workspace=workspace, agent_mode=mode,  # type: ignore[arg-type]
                       root_task_anchor=anchor if mode == "recursive" else None)
    result = await runner.run_result([{"role": "user", "content": task}], config)
    trace = result.trace
    print(await render_trace_tree(store, trace.trace_id))
    print()
    print(f"answer ({trace.status}):")
    print(result.answer if result.answer is not None else trace.error_message)
    totals = await _tree_totals(store, trace.trace_id)
    print()
    print(f"totals: {totals['traces']} traces, {totals['messages']} messages, {totals['tokens']} tokens, ${totals['cost']:.4f}")
    usage = await store.get_resource_usage(trace.trace_id) if mode == "recursive" else None
    if usage:
        print(f"tree budget used: {usage['agents']} agents, {usage['llm_calls']} LLM calls, "
              f"{usage['validation_tool_calls']} validation tool calls")
    print(f"trace id: {trace.trace_id}  (store: {store!r}; `cyber-agent show {trace.trace_id}`)")
    return 0 if trace.status == "completed" else 1


async def _tree_totals(store, trace_id: str) -> dict[str, float]:  # noqa: ANN001
    totals = {"traces": 0, "messages": 0, "tokens": 0, "cost": 0.0}
    stack = [trace_id]
    while stack:
        trace = await store.get_trace(stack.pop())
        if trace is None:
            continue
        totals["traces"] += 1
        totals["messages"] += trace.total_messages
        totals["tokens"] += trace.total_tokens
        totals["cost"] += trace.total_cost
        stack.extend(t.trace_id for t in await store.list_traces(parent_trace_id=trace.trace_id, limit=None))
    return totals


async def _show(trace_id: str, store_path: str) -> int:
    from cyber_agent.trace.render import render_trace_tree

    store = _store(store_path)
    if await store.get_trace(trace_id) is None:
        print(f"no trace {trace_id!r} in {store!r}; pick the store with --store URL (file:.trace, sqlite:///runs.db)",
              file=sys.stderr)
        return 1
    print(await render_trace_tree(store, trace_id))
    totals = await _tree_totals(store, trace_id)
    print(f"totals: {totals['traces']} traces, {totals['messages']} messages, {totals['tokens']} tokens, ${totals['cost']:.4f}")
    return 0


def _add_server_commands(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="run the local Trace API (REST + WebSocket) with uvicorn")
    serve.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    serve.add_argument("--store", default=argparse.SUPPRESS, help="store URL (default: $CYBER_AGENT_STORE, else file:.trace)")
    serve.add_argument("--workspace", default=None, help="directory the default runner's tools work in")
    serve.add_argument("--runner-factory", default=None,
                       help="module:callable returning an AgentRunner for a store (or CYBER_AGENT_RUNNER_FACTORY)")
    serve.add_argument("--experiences", default=".cache/experiences.md", help="experiences file (approved lessons)")
    serve.add_argument("--allow-origin", action="append", default=None,
                       help="front-end origin allowed by CORS and WebSocket checks (repeat; default :3000 on localhost)")
    extractions = sub.add_parser("extractions", help="review lessons extracted by reflections")
    extractions.add_argument("action", choices=["list", "approve", "reject"])
    extractions.add_argument("extraction_id", nargs="?")
    extractions.add_argument("--experiences", default=".cache/experiences.md", help="experiences file (approved lessons)")
    extractions.add_argument("--status", choices=["extraction_pending", "approved", "rejected"], default=None)
    extractions.add_argument("--note", default="", help="reviewer note")


def _server_command(args: argparse.Namespace) -> int:
    if args.command == "serve":
        from cyber_agent.server.serve import ServeSettings, parse_origins, serve

        serve(ServeSettings(host=args.host, port=args.port, store_path=args.store, workspace=args.workspace,
                            runner_factory=args.runner_factory, experiences_path=args.experiences,
                            allowed_origins=parse_origins(args.allow_origin)))
        return 0
    from cyber_agent.trace.reflection import CognitionLog

    log = CognitionLog(args.experiences)
    if args.action == "list":
        for entry in log.entries(status=args.status):
            print(f"{entry.extraction_id}  {entry.status:<18}  {entry.trace_id}  {entry.lesson}")
        return 0
    if not args.extraction_id:
        print(f"error: extractions {args.action} needs an extraction id (see `cyber-agent extractions list`)",
              file=sys.stderr)
        return 2
    entry = log.review(args.extraction_id, args.action, args.note)
    print(f"{entry.extraction_id}  {entry.status}  {entry.lesson}")
    if entry.status == "approved":
        print(f"appended to {log.experiences_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line."""
    parser = argparse.ArgumentParser(prog="cyber-agent", description="Run LLM agents and study what they did.")
    parser.add_argument("--store", default=None,
                        help="store URL: file:.trace | sqlite:///runs.db | postgresql://user@host/db | memory: (default: $CYBER_AGENT_STORE, else file:.trace)")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a task")
    run.add_argument("task")
    run.add_argument("--mode", choices=["legacy", "recursive"], default=os.environ.get("AGENT_MODE", "legacy"))
    run.add_argument("--model", default="demo", help="demo | openai:MODEL | anthropic:MODEL | replay:PATH")
    run.add_argument("--workspace", default=None, help="directory tools may read (default: current directory)")
    run.add_argument("--max-iterations", type=int, default=30)
    run.add_argument("--criterion", action="append", default=[], help="recursive: a completion criterion (repeat)")
    run.add_argument("--constraint", action="append", default=[], help="recursive: a hard constraint (repeat)")
    show = sub.add_parser("show", help="print a trace tree with totals")
    show.add_argument("trace_id")
    demo = sub.add_parser("demo", help="run the offline demo (no network)")
    demo.add_argument("--mode", choices=["legacy", "recursive"], default="recursive")
    _add_server_commands(sub)
    add_store_commands(sub)
    args = parser.parse_args(argv)
    try:
        if args.command in ("serve", "extractions"):
            return _server_command(args)
        if args.command in STORE_COMMANDS:
            return asyncio.run(store_command(args))
        if args.command == "run":
            anchor = None
            if args.mode == "recursive":
                if not args.criterion:
                    print("error: --mode recursive needs at least one --criterion (the root task's completion criteria)",
                          file=sys.stderr)
                    return 2
                anchor = {"objective": args.task, "completion_criteria": args.criterion, "constraints": args.constraint}
            return asyncio.run(_run(args.task, args.model, args.mode, args.store, args.workspace, args.max_iterations, anchor))
        if args.command == "show":
            return asyncio.run(_show(args.trace_id, args.store))
        workspace = str(Path(__file__).resolve().parent.parent) if Path("data/sales.csv").exists() is False else None
        return asyncio.run(_run(DEMO_TASK, "demo", args.mode, args.store, workspace, 30, DEMO_ANCHOR))
    except CyberAgentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
