"""`cyber-agent fork ROOT_ID`: replay a stored tree from its recording, or fork it at a point with one change.

    cyber-agent --store sqlite:///runs.db fork ROOT_ID                      # exact replay: zero model calls
    cyber-agent fork ROOT_ID --at CHILD_ID --brief '{"constraints": ["in cents"]}'
    cyber-agent fork ROOT_ID --at CHILD_ID --node-model openai:gpt-4.1-mini
    cyber-agent fork ROOT_ID --at TRACE_ID:12 --message "a different reply"  # or --tool-result TEXT

Prints the fork's id, how many model calls were replayed and how many went live, and the diff
against the original node by node (`cyber_agent/core/fork_diff.py:fork_diff`).
"""

from __future__ import annotations

import argparse
import json

from cyber_agent.cli._options import Subparsers, add_store_option, set_async_handler

__all__ = ["add_fork", "fork_command"]


def add_fork(sub: Subparsers) -> None:
    """Add `fork` to the command line."""
    fork = sub.add_parser("fork", help="replay a stored tree from its recording, or fork it with one change")
    fork.add_argument("trace_id", help="the root of the tree to fork")
    fork.add_argument("--at", default=None, help="TRACE_ID (a child, a node) or TRACE_ID:SEQUENCE (a message)")
    change = fork.add_mutually_exclusive_group()
    change.add_argument("--brief", default=None, help="a recursive child's brief fields, as a JSON object")
    change.add_argument("--task", default=None, help="a legacy child's new task")
    change.add_argument("--node-model", default=None, help="the model spec the node at --at runs on")
    change.add_argument("--message", default=None, help="the new text of the message at --at")
    change.add_argument("--tool-result", default=None, help="the new result of the tool message at --at")
    fork.add_argument("--live-model", default=None, help="model spec for calls that go live (default: the original's)")
    fork.add_argument("--rerun-side-effects", action="store_true", help="run side-effect tools of replayed turns again")
    add_store_option(fork)
    set_async_handler(fork, fork_command)


def _point(text: str | None) -> str | tuple[str, int] | None:
    if text is None:
        return None
    trace_id, _, sequence = text.rpartition(":")
    if trace_id and sequence.isdigit():
        return (trace_id, int(sequence))
    return text


async def fork_command(args: argparse.Namespace) -> int:
    """Run the fork (or replay) on `--store` and print what it cost and what differs."""
    import pandas as pd

    from cyber_agent.core.fork import Brief, Change, MessageChange, ModelChange, ToolResultChange, fork
    from cyber_agent.core.fork_diff import fork_diff
    from cyber_agent.errors import ConfigurationError
    from cyber_agent.trace import open_store

    change: Change | None = None
    if args.brief is not None:
        try:
            fields = json.loads(args.brief)
        except ValueError as exc:
            raise ConfigurationError("--brief", f"must be a JSON object of TaskBrief fields ({exc})") from None
        if not isinstance(fields, dict):
            raise ConfigurationError("--brief", f"must be a JSON object of TaskBrief fields, got {args.brief!r}")
        change = Brief(fields=fields)
    elif args.task is not None:
        change = Brief(task=args.task)
    elif args.node_model is not None:
        change = ModelChange(model=args.node_model)
    elif args.message is not None:
        change = MessageChange(content=args.message)
    elif args.tool_result is not None:
        change = ToolResultChange(content=args.tool_result)
    store = open_store(args.store)
    result = await fork(store, args.trace_id, at=_point(args.at), change=change, model=args.live_model,
                        exact=change is None and args.live_model is None, rerun_side_effects=args.rerun_side_effects)
    print(f"fork {result.trace.trace_id} [{result.trace.status}]: {result.replayed} model calls replayed, "
          f"{result.live} live")
    if result.trace.error_message:
        print(f"error: {result.trace.error_message}")
    frame = await fork_diff(store, result.trace.trace_id)
    columns = ["position", "state", "replayed_calls", "live_calls", "report_differs", "answer_differs", "cost_paid"]
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_colwidth", 60):
        print(frame[columns].to_string(index=False))
    return 0 if result.trace.status == "completed" else 1
