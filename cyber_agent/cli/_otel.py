"""`cyber-agent export-otel ROOT --endpoint URL`: send a stored tree to an OTLP/HTTP collector.

The only module outside `cyber_agent/otel/` that imports it (inside the command, never at import).
"""

from __future__ import annotations

import argparse
import sys

from cyber_agent.cli._options import Subparsers, add_store_option, set_handler

__all__ = ["add_export_otel"]


def add_export_otel(sub: Subparsers) -> None:
    """Add `export-otel` to the command line."""
    otel = sub.add_parser("export-otel", help="send a stored tree to an OTLP/HTTP collector (the otel extra)")
    otel.add_argument("root_id", help="root trace id of the tree")
    otel.add_argument("--endpoint", default=None,
                      help="collector URL, e.g. http://127.0.0.1:4318 (/v1/traces is added; else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)")
    add_store_option(otel)
    otel.add_argument("--capture-content", action="store_true", help="also send prompts, answers and tool I/O")
    otel.add_argument("--timeout", type=float, default=10.0, help="seconds the collector may take (default 10)")
    otel.add_argument("--header", action="append", default=[], metavar="K=V",
                      help="request header, e.g. 'Authorization=Bearer ...' (repeat; over OTEL_EXPORTER_OTLP_TRACES_HEADERS)")
    set_handler(otel, export_otel_command)


def export_otel_command(args: argparse.Namespace) -> int:
    """Export the tree under `args.root_id` (exit 2 when the otel extra is missing)."""
    try:
        from cyber_agent.otel._command import export_command
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from cyber_agent.trace import open_store

    return export_command(open_store(args.store), args.root_id, args.endpoint, capture_content=args.capture_content,
                          timeout=args.timeout, headers=args.header)
