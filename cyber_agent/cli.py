"""The `cyber-agent` command line: run, show, demo, serve, extractions, export-otel, the store
commands (copy, export, import, stop: `cyber_agent/cli_store.py`), sweep (`cyber_agent/cli_sweep.py`) and fork (`cyber_agent/cli_fork.py`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from cyber_agent.cli_store import STORE_COMMANDS, add_store_commands, store_command
from cyber_agent.cli_sweep import add_sweep_command, sweep_command
from cyber_agent.cli_fork import add_fork_command, fork_command
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
    anchor: dict | None = None, provider: dict | None = None, dialect: str | None = None,
) -> int:
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.trace.render import render_trace_tree

    store = _store(store_path)
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
    totals = await _tree_totals(store, trace.trace_id)
    print()
    print(f"totals: {totals['traces']} traces, {totals['messages']} messages, {totals['tokens']} tokens, ${totals['cost']:.4f}")
    usage = await store.get_resource_usage(trace.trace_id) if mode == "recursive" else None
    if usage:
        print(f"tree budget used: {usage['agents']} agents, {usage['llm_calls']} LLM calls, "
              f"{usage['validation_tool_calls']} validation tool calls")
    from cyber_agent.trace.store_url import store_url_of

    url = store_url_of(store) or "memory:"
    print(f"trace id: {trace.trace_id}  (store: {url}; `cyber-agent --store {url} show {trace.trace_id}`)")
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


def _add_provider_flags(run: argparse.ArgumentParser) -> None:
    # Unset flags stay out of RunConfig.provider, so CYBER_AGENT_* variables and the defaults apply.
    group = run.add_argument_group("provider", "model-call settings (docs/llm.md, settings table)")
    group.add_argument("--timeout", type=float, default=None, metavar="S",
                       help="seconds per read of the provider's answer (CYBER_AGENT_TIMEOUT; default 120)")
    group.add_argument("--retries", type=int, default=None, metavar="N",
                       help="retries after the first attempt (CYBER_AGENT_RETRIES; default 2)")
    group.add_argument("--max-tokens", type=int, default=None, metavar="N",
                       help="output-token cap per call (CYBER_AGENT_MAX_TOKENS; default: the provider's)")
    group.add_argument("--dialect", choices=["auto", "native", "xml", "pformat"], default=None,
                       help="how tool calls travel (CYBER_AGENT_DIALECT; default auto)")
    group.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None,
                       help="always (--stream) or never (--no-stream) stream answers (CYBER_AGENT_STREAM)")


def _provider_flags(args: argparse.Namespace) -> dict:
    names = {"timeout": "timeout", "retries": "retries", "max_tokens": "max_tokens", "stream": "stream"}
    return {field: getattr(args, flag) for flag, field in names.items() if getattr(args, flag) is not None}


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
    otel = sub.add_parser("export-otel", help="send a stored tree to an OTLP/HTTP collector (the otel extra)")
    otel.add_argument("root_id", help="root trace id of the tree")
    otel.add_argument("--endpoint", required=True, help="collector URL, e.g. http://127.0.0.1:4318 (/v1/traces is added)")
    otel.add_argument("--store", default=argparse.SUPPRESS, help="store URL (default: $CYBER_AGENT_STORE, else file:.trace)")
    otel.add_argument("--capture-content", action="store_true", help="also send prompts, answers and tool I/O")
    otel.add_argument("--timeout", type=float, default=10.0, help="seconds the collector may take (default 10)")
    extractions = sub.add_parser("extractions", help="review lessons extracted by reflections")
    extractions.add_argument("action", choices=["list", "approve", "reject"])
    extractions.add_argument("extraction_id", nargs="?")
    extractions.add_argument("--experiences", default=".cache/experiences.md", help="experiences file (approved lessons)")
    extractions.add_argument("--status", choices=["extraction_pending", "approved", "rejected"], default=None)
    extractions.add_argument("--note", default="", help="reviewer note")


def _export_otel(args: argparse.Namespace) -> int:
    try:
        from cyber_agent.otel._command import export_command
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return export_command(_store(args.store), args.root_id, args.endpoint, capture_content=args.capture_content,
                          timeout=args.timeout)


def _server_command(args: argparse.Namespace) -> int:
    if args.command == "export-otel":
        return _export_otel(args)
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
    _add_provider_flags(run)
    show = sub.add_parser("show", help="print a trace tree with totals")
    show.add_argument("trace_id")
    demo = sub.add_parser("demo", help="run the offline demo (no network)")
    demo.add_argument("--mode", choices=["legacy", "recursive"], default="recursive")
    _add_server_commands(sub)
    add_store_commands(sub)
    add_sweep_command(sub)
    add_fork_command(sub)
    args = parser.parse_args(argv)
    try:
        if args.command in ("serve", "extractions", "export-otel"):
            return _server_command(args)
        if args.command in STORE_COMMANDS:
            return asyncio.run(store_command(args))
        if args.command == "sweep":
            return asyncio.run(sweep_command(args))
        if args.command == "fork":
            return asyncio.run(fork_command(args))
        if args.command == "run":
            anchor = None
            if args.mode == "recursive":
                if not args.criterion:
                    print("error: --mode recursive needs at least one --criterion (the root task's completion criteria)",
                          file=sys.stderr)
                    return 2
                anchor = {"objective": args.task, "completion_criteria": args.criterion, "constraints": args.constraint}
            return asyncio.run(_run(args.task, args.model, args.mode, args.store, args.workspace, args.max_iterations, anchor,
                                    provider=_provider_flags(args), dialect=args.dialect))
        if args.command == "show":
            return asyncio.run(_show(args.trace_id, args.store))
        workspace = str(Path(__file__).resolve().parent.parent) if Path("data/sales.csv").exists() is False else None
        return asyncio.run(_run(DEMO_TASK, "demo", args.mode, args.store, workspace, 30, DEMO_ANCHOR))
    except CyberAgentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # a RunConfig field out of range (e.g. --timeout 0) is a pydantic ValidationError
        from pydantic import ValidationError

        if not isinstance(exc, ValidationError):
            raise
        problems = "; ".join(str(error["msg"]).removeprefix("Value error, ") for error in exc.errors())
        print(f"error: {problems}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
