"""Runs made by other tools, imported into any TraceStore (docs/importers.md).

    from cyber_agent.importers import import_runs
    summary = await import_runs(["logs/"], store)            # formats detected; or source="redel"
    summary.roots                                             # root trace ids, one per tree

Readers: Inspect AI `.eval` / `.json` logs (through `inspect_ai`'s own reader, the `inspect`
extra), OpenTelemetry GenAI spans (OTLP/JSON files, or SDK spans in process:
`import_spans`), ReDel `state.json` (+ `events.jsonl`). Each imported trace keeps the source's
ids and what it lacks in `Trace.provenance` (`cyber_agent/trace/provenance.py`). The notebook's
`load_runs` is the same call with a progress bar; the CLI's `cyber-agent import --from FORMAT`.
"""

from cyber_agent.importers._detect import SkippedFile, detect_format
from cyber_agent.importers._otel_spans import import_spans
from cyber_agent.importers._run import ImportedFile, ImportProgress, ImportSummary, import_runs, read_file

__all__ = [
    "ImportProgress",
    "ImportSummary",
    "ImportedFile",
    "SkippedFile",
    "detect_format",
    "import_runs",
    "import_spans",
    "read_file",
]
