"""What every command shares: the subparsers type, the handler each parser carries, `--store`."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

__all__ = ["Handler", "Subparsers", "add_json_option", "add_store_option", "set_async_handler", "set_handler"]

Subparsers = argparse._SubParsersAction  # the object `add_subparsers()` returns
Handler = Callable[[argparse.Namespace], int]
"""Run one parsed command and return its exit status."""


def set_handler(parser: argparse.ArgumentParser, handler: Handler) -> None:
    """Make `handler` run when `parser`'s command is chosen."""
    parser.set_defaults(handler=handler)


def set_async_handler(parser: argparse.ArgumentParser,
                      handler: Callable[[argparse.Namespace], Awaitable[int]]) -> None:
    """Make the coroutine function `handler` run (in a fresh event loop) when `parser`'s command is chosen."""

    def run(args: argparse.Namespace) -> int:
        import asyncio  # here, not at import: `--help` and `--version` need no event loop

        async def awaited() -> int:
            return await handler(args)

        return asyncio.run(awaited())

    parser.set_defaults(handler=run)


def add_store_option(parser: argparse.ArgumentParser) -> None:
    """Accept `--store URL` after the command too (`cyber-agent show ID --store sqlite:///runs.db`)."""
    parser.add_argument("--store", default=argparse.SUPPRESS,
                        help="store URL (default: $CYBER_AGENT_STORE, else file:.trace)")


def add_json_option(parser: argparse.ArgumentParser, document: str) -> None:
    """Add `--json`: print one `document` (`cyber_agent/cli/_documents.py`) instead of text."""
    parser.add_argument("--json", action="store_true",
                        help=f"print one JSON document ({document}; schema: docs/cli-output.schema.json) instead of text")
