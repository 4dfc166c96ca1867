"""What every command shares: the subparsers type, the handler each parser carries, `--store`."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable

__all__ = ["Handler", "Subparsers", "add_store_option", "set_handler", "set_async_handler"]

Subparsers = argparse._SubParsersAction  # the object `add_subparsers()` returns
Handler = Callable[[argparse.Namespace], int]
"""Run one parsed command and return its exit status."""


def set_handler(parser: argparse.ArgumentParser, handler: Handler) -> None:
    """Make `handler` run when `parser`'s command is chosen."""
    parser.set_defaults(handler=handler)


def set_async_handler(parser: argparse.ArgumentParser,
                      handler: Callable[[argparse.Namespace], Awaitable[int]]) -> None:
    """Make the coroutine function `handler` run (in a fresh event loop) when `parser`'s command is chosen."""

    async def awaited(args: argparse.Namespace) -> int:
        return await handler(args)

    parser.set_defaults(handler=lambda args: asyncio.run(awaited(args)))


def add_store_option(parser: argparse.ArgumentParser) -> None:
    """Accept `--store URL` after the command too (`cyber-agent show ID --store sqlite:///runs.db`)."""
    parser.add_argument("--store", default=argparse.SUPPRESS,
                        help="store URL (default: $CYBER_AGENT_STORE, else file:.trace)")
