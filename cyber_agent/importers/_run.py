"""Import files and folders into a store: one entry point for the CLI and the notebook.

`import_runs(paths, store, source=...)` reads each file (or each run found in a folder) with
its format's reader, writes every tree through the store's API, and returns an `ImportSummary`:
what was imported (roots, traces, messages) and what was skipped, each with its reason. A file
named explicitly that is not its format raises `ImportFormatError` naming it and the first thing
that did not fit; inside a folder such a file is skipped with that reason, so one bad log does
not stop a thousand good ones. Re-importing finds the trees it made (ids derive from the
source's ids) and skips them.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cyber_agent.errors import ConfigurationError, ImportFormatError
from cyber_agent.importers._detect import Candidate, SkippedFile, detect_format, directory_candidates
from cyber_agent.importers._plan import TracePlan
from cyber_agent.importers._write import write_plan
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.provenance import IMPORT_SOURCES, ImportSource

__all__ = ["ImportProgress", "ImportSummary", "ImportedFile", "import_runs", "read_file"]


@dataclass(frozen=True, kw_only=True)
class ImportedFile:
    """One file (or ReDel run folder) that was imported."""

    path: Path
    source: ImportSource
    roots: list[str]
    """Root trace ids written (one per tree)."""
    traces: int
    messages: int


@dataclass(frozen=True, kw_only=True)
class ImportProgress:
    """Where an import stands, given to a progress callback after each file."""

    done: int
    total: int
    path: Path
    imported: bool


@dataclass(kw_only=True)
class ImportSummary:
    """What an import wrote and what it skipped, with reasons."""

    store: TraceStore
    """The store the trees were written to."""
    imported: list[ImportedFile] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)

    @property
    def roots(self) -> list[str]:
        """Root trace ids of every tree imported, in file order."""
        return [root for item in self.imported for root in item.roots]

    @property
    def traces(self) -> int:
        """Traces written."""
        return sum(item.traces for item in self.imported)

    @property
    def messages(self) -> int:
        """Messages written."""
        return sum(item.messages for item in self.imported)

    def __repr__(self) -> str:
        return (f"ImportSummary(imported={len(self.imported)} files, roots={len(self.roots)}, traces={self.traces}, "
                f"messages={self.messages}, skipped={len(self.skipped)})")

    def to_text(self) -> str:
        """One line of totals, then a line per skipped file with its reason."""
        sources = sorted({item.source for item in self.imported})
        lines = [f"imported {len(self.imported)} file(s) ({', '.join(sources) or 'none'}): {len(self.roots)} tree(s), "
                 f"{self.traces} traces, {self.messages} messages; skipped {len(self.skipped)}"]
        lines += [f"  skipped {item.path}: {item.reason}" for item in self.skipped]
        return "\n".join(lines)

    def to_html(self) -> str:
        """The same as `to_text`, as HTML."""
        return f"<pre>{html.escape(self.to_text())}</pre>"

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        return {"text/plain": self.to_text(), "text/html": self.to_html()}


def read_file(path: Path, source: ImportSource) -> list[TracePlan]:
    """Read one file (or ReDel run folder) with its format's reader into root plans."""
    if source == "redel":
        from cyber_agent.importers._redel import read_redel

        return read_redel(path)
    if source == "inspect":
        from cyber_agent.importers._inspect import read_inspect

        return read_inspect(path)
    from cyber_agent.importers._otel_spans import read_otel_file

    return read_otel_file(path)


def _check_source(source: str | None) -> ImportSource | None:
    if source is None or source in IMPORT_SOURCES:
        return source
    raise ConfigurationError("import format", f"{source!r} is not one of {', '.join(IMPORT_SOURCES)}")


async def import_runs(
    paths: Sequence[str | Path] | str | Path, store: TraceStore, *, source: str | None = None,
    progress: Callable[[ImportProgress], None] | None = None,
) -> ImportSummary:
    """Import files and folders (formats detected unless `source` names one) into `store`."""
    fmt = _check_source(source)
    if isinstance(paths, (str, Path)):
        paths = [paths]
    summary = ImportSummary(store=store)
    work: list[Candidate] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise ConfigurationError("import path", f"{str(path)!r} does not exist")
        if path.is_dir() and detect_format(path) is None:
            found, skipped = directory_candidates(path, fmt)
            work += found
            summary.skipped += skipped
            continue
        kind = fmt or detect_format(path)
        if kind is None:
            raise ImportFormatError(path, "run file cyber-agent can import", "its format is not recognised (an Inspect .eval/.json log, an "
                                                 "OTLP/JSON file, a ReDel state.json); name it with --from / source=")
        work.append(Candidate(path=path, source=kind))
    explicit = {Path(p) for p in paths}
    for done, candidate in enumerate(work, 1):
        try:
            plans = await asyncio.to_thread(read_file, candidate.path, candidate.source)
        except ImportFormatError as exc:
            if candidate.path in explicit:
                raise
            summary.skipped.append(SkippedFile(path=candidate.path, reason=exc.problem))
            if progress:
                progress(ImportProgress(done=done, total=len(work), path=candidate.path, imported=False))
            continue
        roots, traces, messages, existing = [], 0, 0, []
        for plan in plans:
            if await store.get_trace(plan.trace.trace_id) is not None:
                existing.append(plan.trace.trace_id)
                continue
            written_traces, written_messages = await write_plan(store, plan)
            roots.append(plan.trace.trace_id)
            traces += written_traces
            messages += written_messages
        if existing:
            summary.skipped.append(SkippedFile(path=candidate.path, reason=(
                f"already imported: root trace(s) {', '.join(existing)} exist in the store")))
        if roots:
            summary.imported.append(ImportedFile(path=candidate.path, source=candidate.source, roots=roots,
                                                 traces=traces, messages=messages))
        elif not plans:
            summary.skipped.append(SkippedFile(path=candidate.path, reason="holds no run"))
        if progress:
            progress(ImportProgress(done=done, total=len(work), path=candidate.path, imported=bool(roots)))
    return summary
