"""Store commands of the `cyber-agent` command line: copy, export, import, stop.

    cyber-agent --store file:.trace copy --to sqlite:///runs.db [ROOT ...]
    cyber-agent --store sqlite:///runs.db export ROOT ... --out runs.jsonl.gz
    cyber-agent --store sqlite:///runs.db import runs.jsonl.gz
    cyber-agent import --from inspect|otel|redel PATH... [--store URL]   (other tools' runs: docs/importers.md)
    cyber-agent --store sqlite:///runs.db stop ROOT [--reason TEXT]

Every command takes the global `--store URL` (`cyber_agent/trace/store_url.py:open_store`).
The export format is the notebook's (`cyber_agent/notebook/export.py`); the CLI is an entry
point on top of the package like the server, so it may load that module (only when an export
command runs).
"""

from __future__ import annotations

import argparse
import sys

from cyber_agent.cli._options import Subparsers, add_store_option, set_async_handler

__all__ = ["add_copy", "add_export", "add_import", "add_report", "add_stop"]


def add_copy(sub: Subparsers) -> None:
    """Add `copy` to the command line."""
    copy = sub.add_parser("copy", help="copy trees from --store into another store (ids, sequences and events kept)")
    copy.add_argument("root_ids", nargs="*", help="roots to copy (default: every trace)")
    copy.add_argument("--to", required=True, help="destination store URL, e.g. sqlite:///runs.db")
    copy.add_argument("--skip-existing", action="store_true", help="leave traces the destination already has")
    add_store_option(copy)
    set_async_handler(copy, copy_command)


def add_export(sub: Subparsers) -> None:
    """Add `export` to the command line."""
    export = sub.add_parser("export", help="write trees of --store to one portable .jsonl(.gz) file")
    export.add_argument("root_ids", nargs="*", help="roots to export (default: every trace)")
    export.add_argument("--out", required=True, help="export file (.jsonl or .jsonl.gz)")
    add_store_option(export)
    set_async_handler(export, export_command)


def add_report(sub: Subparsers) -> None:
    """Add `report` to the command line."""
    report = sub.add_parser("report", help="write a run as one self-contained HTML file (tree view, pages, budget)")
    report.add_argument("root_id", help="root trace id of the run")
    report.add_argument("-o", "--out", required=True, help="HTML file to write, e.g. run.html")
    add_store_option(report)
    set_async_handler(report, report_command)


def add_import(sub: Subparsers) -> None:
    """Add `import` to the command line: export files, or other tools' runs with `--from`."""
    imported = sub.add_parser("import", help="load export files, or other tools' runs (--from), into --store")
    imported.add_argument("paths", nargs="+", metavar="PATH",
                          help="export file (`cyber-agent export`), or with --from: log files or folders of them")
    imported.add_argument("--from", dest="source", choices=["export", "inspect", "otel", "redel"], default="export",
                          help="export (default) | inspect (.eval/.json logs) | otel (OTLP/JSON) | redel (state.json runs)")
    imported.add_argument("--skip-existing", action="store_true", help="leave traces the store already has")
    add_store_option(imported)
    set_async_handler(imported, import_command)


def add_stop(sub: Subparsers) -> None:
    """Add `stop` to the command line."""
    stop = sub.add_parser("stop", help="persist a stop of a trace's subtree; every process running part of it halts")
    stop.add_argument("trace_id")
    stop.add_argument("--reason", default="stopped from the command line")
    add_store_option(stop)
    set_async_handler(stop, stop_command)


async def copy_command(args: argparse.Namespace) -> int:
    """Copy trees of `--store` into `--to`."""
    from cyber_agent.trace import open_store

    store, destination = open_store(args.store, create=False), open_store(args.to)  # a read never creates a database
    records = await store.read_records(args.root_ids or None, exchanges=True)  # so the copy can be forked
    written = await destination.import_records(records, skip_existing=args.skip_existing)
    print(f"copied {len(written)} of {len(records)} traces from {store!r} to {destination!r}")
    return 0


async def export_command(args: argparse.Namespace) -> int:
    """Write trees of `--store` to one export file."""
    from cyber_agent.notebook.export import aexport_traces
    from cyber_agent.trace import open_store

    path = await aexport_traces(open_store(args.store, create=False), args.root_ids or None, args.out)
    print(f"wrote {path}")
    return 0


async def report_command(args: argparse.Namespace) -> int:
    """Write the run `args.root_id` of `--store` as one HTML file."""
    from cyber_agent.notebook.tree_view import atree_view, write_document
    from cyber_agent.trace import open_store

    store = open_store(args.store)
    if await store.get_trace(args.root_id) is None:
        print(f"no trace {args.root_id!r} in {store!r}; pick the store with --store URL (file:.trace, sqlite:///runs.db)",
              file=sys.stderr)
        return 1
    view = await atree_view(store, args.root_id, page_limit=None)  # every page, with its last messages
    print(f"wrote {write_document(view, args.out)}")
    return 0


async def import_command(args: argparse.Namespace) -> int:
    """Load export files into `--store`, or other tools' runs (`--from inspect|otel|redel`, docs/importers.md)."""
    from cyber_agent.trace import open_store

    store = open_store(args.store)
    if args.source != "export":
        from cyber_agent.importers._command import import_command as import_runs_command

        return await import_runs_command(store, args.paths, args.source)
    from cyber_agent.notebook.export import load_export

    for path in args.paths:
        records = await load_export(path).read_records(None)
        written = await store.import_records(records, skip_existing=args.skip_existing)
        print(f"imported {len(written)} of {len(records)} traces into {store!r}")
    return 0


async def stop_command(args: argparse.Namespace) -> int:
    """Persist a stop of `args.trace_id`'s subtree."""
    from cyber_agent.core.stop import request_stop
    from cyber_agent.trace import open_store

    store = open_store(args.store)
    await request_stop(store, args.trace_id, args.reason)
    print(f"stop of {args.trace_id} and its subtree persisted in {store!r}; running parts halt at their next check",
          file=sys.stderr)
    return 0
