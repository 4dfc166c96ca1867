"""`cyber-agent schema`: print the JSON Schema of every `--json` document (docs/cli-output.schema.json)."""

from __future__ import annotations

import argparse

from cyber_agent.cli._options import Subparsers, set_handler

__all__ = ["add_schema", "schema_command"]


def add_schema(sub: Subparsers) -> None:
    """Add `schema` to the command line."""
    schema = sub.add_parser("schema", help="print the JSON Schema of the --json documents (docs/cli-output.schema.json)")
    set_handler(schema, schema_command)


def schema_command(args: argparse.Namespace) -> int:
    """Print `cyber_agent/cli/_documents.py:schema_text`."""
    from cyber_agent.cli._documents import schema_text

    print(schema_text(), end="")
    return 0
