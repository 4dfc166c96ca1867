"""`cyber-agent show ID`: print a stored tree with its totals."""

from __future__ import annotations

import argparse
import sys

from cyber_agent.cli._options import Subparsers, add_store_option, set_async_handler

__all__ = ["add_show", "tree_totals"]


def add_show(sub: Subparsers) -> None:
    """Add `show` to the command line."""
    show = sub.add_parser("show", help="print a trace tree with totals")
    show.add_argument("trace_id")
    add_store_option(show)
    set_async_handler(show, show_command)


async def tree_totals(store, trace_id: str) -> dict[str, float]:  # noqa: ANN001 - a TraceStore
    """Sum traces, messages, tokens and cost over the tree under `trace_id`."""
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


def totals_line(totals: dict[str, float]) -> str:
    """Render `tree_totals` as the one line `run` and `show` print."""
    return (f"totals: {totals['traces']} traces, {totals['messages']} messages, {totals['tokens']} tokens, "
            f"${totals['cost']:.4f}")


async def show_command(args: argparse.Namespace) -> int:
    """Print the tree under `args.trace_id` and its totals."""
    from cyber_agent.trace import open_store
    from cyber_agent.trace.render import render_trace_tree

    store = open_store(args.store)
    if await store.get_trace(args.trace_id) is None:
        print(f"no trace {args.trace_id!r} in {store!r}; pick the store with --store URL (file:.trace, sqlite:///runs.db)",
              file=sys.stderr)
        return 1
    print(await render_trace_tree(store, args.trace_id))
    print(totals_line(await tree_totals(store, args.trace_id)))
    return 0
