"""`cyber-agent serve` (the local Trace API) and `cyber-agent extractions` (review reflected lessons)."""

from __future__ import annotations

import argparse
import sys

from cyber_agent.cli._options import Subparsers, add_store_option, set_handler

__all__ = ["add_extractions", "add_serve"]


def add_serve(sub: Subparsers) -> None:
    """Add `serve` to the command line."""
    serve = sub.add_parser("serve", help="run the local Trace API (REST + WebSocket) with uvicorn")
    serve.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    add_store_option(serve)
    serve.add_argument("--workspace", default=None, help="directory the default runner's tools work in")
    serve.add_argument("--runner-factory", default=None,
                       help="module:callable returning an AgentRunner for a store (or CYBER_AGENT_RUNNER_FACTORY)")
    serve.add_argument("--experiences", default=".cache/experiences.md", help="experiences file (approved lessons)")
    serve.add_argument("--allow-origin", action="append", default=None,
                       help="front-end origin allowed by CORS and WebSocket checks (repeat; default :3000 on localhost)")
    set_handler(serve, serve_command)


def add_extractions(sub: Subparsers) -> None:
    """Add `extractions list|approve|reject` to the command line."""
    extractions = sub.add_parser("extractions", help="review lessons extracted by reflections")
    extractions.add_argument("action", choices=["list", "approve", "reject"])
    extractions.add_argument("extraction_id", nargs="?")
    extractions.add_argument("--experiences", default=".cache/experiences.md", help="experiences file (approved lessons)")
    extractions.add_argument("--status", choices=["extraction_pending", "approved", "rejected"], default=None)
    extractions.add_argument("--note", default="", help="reviewer note")
    set_handler(extractions, extractions_command)


def serve_command(args: argparse.Namespace) -> int:
    """Serve the Trace API until interrupted."""
    from cyber_agent.server.serve import ServeSettings, parse_origins, serve

    serve(ServeSettings(host=args.host, port=args.port, store_path=args.store, workspace=args.workspace,
                        runner_factory=args.runner_factory, experiences_path=args.experiences,
                        allowed_origins=parse_origins(args.allow_origin)))
    return 0


def extractions_command(args: argparse.Namespace) -> int:
    """List, approve or reject extracted lessons."""
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
