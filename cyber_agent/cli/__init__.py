"""The `cyber-agent` command line: one private module per group of commands.

    _main.py      the parser, `--store`, `--version`, the error-to-exit-status mapping, `COMMANDS`
    _options.py   the pieces every command shares (`--store`, `--json`, the handler)
    _run.py       run, demo (and the demo's task)
    _provider.py  the provider flags of `run`
    _progress.py  the live status line of `run` on a terminal
    _show.py      show
    _list.py      list
    _documents.py the `--json` documents and their JSON Schema
    _schema.py    schema (prints that JSON Schema)
    _server.py    serve, extractions
    _otel.py      export-otel
    _store.py     copy, export, import, stop
    _sweep.py     sweep

A new command is one function `add_NAME(sub)` that adds its parser and sets its handler
(`cyber_agent/cli/_options.py:set_handler`), listed once in `cyber_agent/cli/_main.py:COMMANDS`.
Exit status: 0 success, 1 the run or command failed, 2 bad input (the message names the fix).
"""

from __future__ import annotations

from cyber_agent.cli._main import main
from cyber_agent.cli._run import DEMO_ANCHOR, DEMO_TASK

__all__ = ["DEMO_ANCHOR", "DEMO_TASK", "main"]
