"""`cyber-agent list`: which traces does this store hold? Newest first, roots only unless `--all`.

    cyber-agent --store sqlite:///runs.db list --status failed --since 2d --limit 5
    cyber-agent list --mode recursive --model openai:gpt-4o-mini --json

Filters apply before `--limit`. `--since` takes an ISO date or time (`2026-12-01`,
`2026-12-01T09:30`, UTC unless it names a zone) or an age (`90m`, `12h`, `2d`, `1w`).
Damaged store entries the listing skipped are named on stderr (in `damaged` with `--json`).
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta

from cyber_agent.cli._options import Subparsers, add_json_option, add_store_option, set_async_handler
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cyber_agent.trace.models import Trace

__all__ = ["add_list", "parse_since"]

_AGE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_STATUSES = ("running", "completed", "failed", "stopped", "waiting_confirmation")


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """An aware UTC datetime from an ISO date/time or an age like `12h`; ArgumentTypeError otherwise."""
    age = _AGE.match(text.strip().lower())
    if age:
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[age.group(2)]: int(age.group(1))})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--since {text!r} is neither an ISO date/time (2026-12-01, 2026-12-01T09:30) nor an age (90m, 12h, 2d, 1w)"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"--limit {text!r} must be a whole number >= 0 (0: no limit)")
    return value


def add_list(sub: Subparsers) -> None:
    """Add `list` to the command line."""
    listing = sub.add_parser("list", help="list the store's traces, newest first (roots only unless --all)")
    listing.add_argument("--all", action="store_true", dest="all_traces", help="sub-traces and validators too")
    listing.add_argument("--status", choices=_STATUSES, default=None, help="only traces with this status")
    listing.add_argument("--mode", choices=["legacy", "recursive"], default=None, help="only trees of this mode")
    listing.add_argument("--model", default=None, help="only traces run with this model spec (e.g. demo, openai:gpt-4o)")
    listing.add_argument("--since", type=parse_since, default=None, metavar="WHEN",
                         help="only traces created since: an ISO date/time (UTC) or an age (90m, 12h, 2d, 1w)")
    listing.add_argument("--limit", type=_limit, default=20, metavar="N", help="at most N rows (default 20; 0: all)")
    add_store_option(listing)
    add_json_option(listing, "ListDocument")
    set_async_handler(listing, list_command)


def _row_text(trace: Trace) -> str:
    task = " ".join((trace.task or "").split())
    task = task if len(task) <= 60 else task[:59] + "…"
    created = trace.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    return (f"{created}  {trace.status:<20} {trace.lineage.mode:<9} {trace.model or '-':<20} "
            f"{trace.total_tokens:>8} {'$' + format(trace.total_cost, '.4f'):>9}  {trace.trace_id}  {task}")


async def list_command(args: argparse.Namespace) -> int:
    """Print the traces of `--store` that match the filters, newest first."""
    from cyber_agent.cli._documents import ListDocument, ListFilters, print_document, trace_row
    from cyber_agent.trace import open_store
    from cyber_agent.trace.store_listing import list_traces_report
    from cyber_agent.trace.trace_filter import TraceFilter
    from cyber_agent.trace.store_url import store_url_of

    store = open_store(args.store, create=False)  # a read never creates a database
    where = TraceFilter(roots_only=not args.all_traces, status=args.status, agent_mode=args.mode, model=args.model,
                        since=args.since, limit=None)  # the limit is applied here: `more` counts what it cut
    listing = await list_traces_report(store, where)
    matched = listing.traces
    limit = args.limit or None
    shown = matched if limit is None else matched[:limit]
    damaged = [f"{e.path} ({e.kind}): {e.detail}" for e in listing.errors]
    if args.json:
        filters = ListFilters(all_traces=args.all_traces, status=args.status, agent_mode=args.mode, model=args.model,
                              since=args.since, limit=limit)
        print_document(ListDocument(store=store_url_of(store) or "memory:", filters=filters,
                                    traces=[trace_row(t) for t in shown], more=len(matched) > len(shown),
                                    damaged=damaged))
        return 0
    for entry in damaged:
        print(f"warning: skipped damaged store entry {entry}", file=sys.stderr)
    if not shown:
        print(f"no traces match in {store!r}", file=sys.stderr)
        return 0
    print(f"{'created (UTC)':<19}  {'status':<20} {'mode':<9} {'model':<20} {'tokens':>8} {'cost':>9}  trace id  task")
    for trace in shown:
        print(_row_text(trace))
    if len(matched) > len(shown):
        print(f"… {len(matched) - len(shown)} more; raise --limit (0: all)", file=sys.stderr)
    return 0
