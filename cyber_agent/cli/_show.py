"""`cyber-agent show ID`: print a stored tree with its totals (`--json`: a `ShowDocument`)."""

from __future__ import annotations

import argparse
import sys

from cyber_agent.cli._options import Subparsers, add_json_option, add_store_option, set_async_handler
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # loaded by the commands, not by building the parser
    from cyber_agent.cli._documents import Totals
    from cyber_agent.trace.models import Trace
    from cyber_agent.trace.protocols import TraceStore

__all__ = ["add_show", "totals_line", "tree_totals", "tree_traces"]


def add_show(sub: Subparsers) -> None:
    """Add `show` to the command line."""
    show = sub.add_parser("show", help="print a trace tree with totals")
    show.add_argument("trace_id")
    add_store_option(show)
    add_json_option(show, "ShowDocument")
    set_async_handler(show, show_command)


async def tree_traces(store: TraceStore, trace_id: str) -> list[Trace]:
    """Every trace of the tree under `trace_id`, depth first, children oldest first."""
    out: list[Trace] = []
    stack = [trace_id]
    while stack:
        trace = await store.get_trace(stack.pop())
        if trace is None:
            continue
        out.append(trace)
        children = await store.list_traces(parent_trace_id=trace.trace_id, limit=None)  # newest first
        stack.extend(t.trace_id for t in children)
    return out


def tree_totals(traces: list[Trace]) -> Totals:
    """Sum traces, messages, tokens and cost over `traces`."""
    from cyber_agent.cli._documents import Totals

    return Totals(traces=len(traces), messages=sum(t.total_messages for t in traces),
                  tokens=sum(t.total_tokens for t in traces), cost_usd=sum(t.total_cost for t in traces))


def totals_line(totals: Totals) -> str:
    """Render `Totals` as the one line `run` and `show` print."""
    return (f"totals: {totals.traces} traces, {totals.messages} messages, {totals.tokens} tokens, "
            f"${totals.cost_usd:.4f}")


async def show_command(args: argparse.Namespace) -> int:
    """Print the tree under `args.trace_id` and its totals."""
    from cyber_agent.cli._documents import ShowDocument, print_document, trace_row
    from cyber_agent.trace import open_store
    from cyber_agent.trace.render import render_trace_tree
    from cyber_agent.trace.store_url import store_url_of

    store = open_store(args.store)
    if await store.get_trace(args.trace_id) is None:
        print(f"error: no trace {args.trace_id!r} in {store!r}; pick the store with --store URL "
              "(file:.trace, sqlite:///runs.db, postgresql://user@host/db) or see `cyber-agent list`", file=sys.stderr)
        return 1
    traces = await tree_traces(store, args.trace_id)
    if args.json:
        print_document(ShowDocument(trace_id=args.trace_id, store=store_url_of(store) or "memory:",
                                    totals=tree_totals(traces), traces=[trace_row(t) for t in traces]))
        return 0
    print(await render_trace_tree(store, args.trace_id))
    print(totals_line(tree_totals(traces)))
    return 0
