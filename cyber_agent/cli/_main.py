"""The `cyber-agent` parser and dispatch: each command registers itself through one function."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

from cyber_agent.cli._list import add_list
from cyber_agent.cli._options import Subparsers
from cyber_agent.cli._otel import add_export_otel
from cyber_agent.cli._run import add_demo, add_run
from cyber_agent.cli._schema import add_schema
from cyber_agent.cli._server import add_extractions, add_serve
from cyber_agent.cli._show import add_show
from cyber_agent.cli._store import add_copy, add_export, add_import, add_stop
from cyber_agent.cli._sweep import add_sweep
from cyber_agent.errors import CyberAgentError

__all__ = ["COMMANDS", "build_parser", "main"]

COMMANDS: tuple[Callable[[Subparsers], None], ...] = (
    add_run,
    add_show,
    add_list,
    add_demo,
    add_serve,
    add_export_otel,
    add_extractions,
    add_copy,
    add_export,
    add_import,
    add_stop,
    add_sweep,
    add_schema,
)
"""One registration per command, in `--help` order: each adds its parser and sets its handler."""


def build_parser() -> argparse.ArgumentParser:
    """Build the whole command line from `COMMANDS`."""
    parser = argparse.ArgumentParser(prog="cyber-agent", description="Run LLM agents and study what they did.")
    parser.add_argument("--version", action="version", version=f"cyber-agent {package_version()}")
    parser.add_argument("--store", default=None,
                        help="store URL: file:.trace | sqlite:///runs.db | postgresql://user@host/db | memory: "
                             "(default: $CYBER_AGENT_STORE, else file:.trace)")
    sub = parser.add_subparsers(dest="command", required=True)
    for register in COMMANDS:
        register(sub)
    return parser


def package_version() -> str:
    """The installed distribution's version (`unknown` when run from a tree that was never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cyber-agent")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _reader_went_away() -> int:
    """stdout's reader closed the pipe (`cyber-agent show ID | head`): stop quietly.

    Python's documented recipe: point stdout at /dev/null so the interpreter's final flush
    does not raise again. Status 0: the reader asked for no more, nothing failed.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line."""
    level = os.environ.get("CYBER_AGENT_LOG", "").strip().upper()  # INFO: retries, waits and stops (docs/runner.md)
    if level:
        logging.basicConfig(level=level if level in logging.getLevelNamesMapping() else "INFO",
                            format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        status: int = args.handler(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler's reach, not at exit
        return status
    except BrokenPipeError:
        return _reader_went_away()
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
