"""The `cyber-agent` command line."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile

__all__ = ["main"]


async def _demo_trace() -> int:
    from cyber_agent.trace import FileSystemTraceStore, Message, Trace

    with tempfile.TemporaryDirectory() as tmp:
        store = FileSystemTraceStore(tmp)
        trace = Trace.create(task="demo: write and read a trace")
        await store.create_trace(trace)
        first = Message.create(trace_id=trace.trace_id, role="user", content="What is 2 + 2?")
        await store.add_message(first)
        answer = Message.create(trace_id=trace.trace_id, role="assistant", content={"text": "4"},
                                parent_sequence=first.sequence)
        await store.add_message(answer)
        loaded = await store.get_trace(trace.trace_id)
        assert loaded is not None
        for message in await store.get_main_path_messages(trace.trace_id, loaded.head_sequence):
            print(f"{message.sequence} {message.role:9} {message.description}")
        print(f"trace {loaded.trace_id}: {loaded.total_messages} messages")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line."""
    parser = argparse.ArgumentParser(prog="cyber-agent", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the offline demo")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return asyncio.run(_demo_trace())
    return 2


if __name__ == "__main__":
    sys.exit(main())
