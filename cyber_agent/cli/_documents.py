"""The documents `--json` prints: one JSON object per command, described by a published JSON Schema.

    cyber-agent run TASK --json     RunDocument     {"kind": "run", "schema_version": 1, ...}
    cyber-agent show ID --json      ShowDocument    {"kind": "show", ...}
    cyber-agent list --json         ListDocument    {"kind": "list", ...}
    cyber-agent sweep FILE --json   SweepDocument   {"kind": "sweep", ...}

Every document carries `kind` (which command wrote it) and `schema_version` (raised when a field
changes meaning or goes away; new fields do not raise it). The schema of all four, a union
discriminated by `kind`, is `cli_json_schema()`, published as `docs/cli-output.schema.json`
(`cyber-agent schema > docs/cli-output.schema.json` rewrites it; a test checks the file is
current and validates every command's output against it).
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cyber_agent.tools.shell_policy import ShellPolicy
from cyber_agent.trace.models import Trace

__all__ = [
    "SCHEMA_VERSION", "CliDocument", "ListDocument", "ListFilters", "RunDocument", "ShowDocument", "SweepCells",
    "SweepDocument", "SweepGroup", "Totals", "TraceRow", "cli_json_schema", "finite_or_none", "print_document",
    "schema_text", "trace_row",
]

SCHEMA_VERSION = 1
"""Version of every document's shape."""


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Totals(_Document):
    """Sums over a tree: the root and every trace under it."""

    traces: int
    """Traces in the tree (agents and validators)."""
    messages: int
    """Messages over the tree."""
    tokens: int
    """Prompt plus completion tokens over the tree."""
    cost_usd: float
    """USD over the tree (a lower bound where usage had no price)."""


class TraceRow(_Document):
    """One trace as `show` and `list` report it."""

    trace_id: str
    """The trace id (a UUID for a root; `{parent}@{mode}-{timestamp}-{seq}` below it)."""
    parent_trace_id: str | None
    """Its parent; null for a root."""
    depth: int
    """Depth in its tree (root = 0)."""
    status: str
    """running, completed, failed, stopped or waiting_confirmation."""
    agent_mode: Literal["legacy", "recursive"]
    """The tree's mode, frozen on its root."""
    agent_type: str | None
    """Role: main, delegate, explore, validator, ..."""
    model: str | None
    """The model spec the trace ran with."""
    task: str | None
    """The task as the user or the parent stated it."""
    created_at: datetime
    """When the trace was created (UTC)."""
    completed_at: datetime | None
    """When it ended; null while it runs."""
    messages: int
    """Its own messages."""
    tokens: int
    """Its own prompt plus completion tokens."""
    cost_usd: float
    """Its own USD."""
    error: str | None
    """Why it failed or stopped; null otherwise."""


def trace_row(trace: Trace) -> TraceRow:
    """Describe `trace` as a `TraceRow`."""
    return TraceRow(
        trace_id=trace.trace_id, parent_trace_id=trace.parent_trace_id, depth=trace.lineage.depth, status=trace.status,
        agent_mode=trace.lineage.mode, agent_type=trace.agent_type, model=trace.model, task=trace.task,
        created_at=trace.created_at, completed_at=trace.completed_at, messages=trace.total_messages,
        tokens=trace.total_tokens, cost_usd=trace.total_cost, error=trace.error_message,
    )


class RunDocument(_Document):
    """What `run --json` (and `demo --json`) prints when the run ends."""

    kind: Literal["run"] = "run"
    """Which command wrote the document."""
    schema_version: Literal[1] = 1
    """Version of the document's shape."""
    trace_id: str
    """The root trace of the run."""
    status: str
    """The root's end status: completed, failed, stopped or waiting_confirmation."""
    answer: str | None
    """The final answer; null when the run ended without one."""
    error: str | None
    """Why the run failed or stopped; null when it completed."""
    agent_mode: Literal["legacy", "recursive"]
    """The mode the tree ran in."""
    model: str
    """The model spec given."""
    shell_tools: ShellPolicy
    """The run's shell policy, as recorded in its run config."""
    store: str
    """URL of the store holding the trace (`memory:` when nothing was kept)."""
    show_command: str
    """A shell-safe command that prints the tree again."""
    totals: Totals
    """Sums over the tree."""
    budget_used: dict[str, int] | None
    """Recursive runs: the tree budget's counters (agents, llm_calls, validation_tool_calls, ...); null in legacy."""


class ShowDocument(_Document):
    """What `show ID --json` prints."""

    kind: Literal["show"] = "show"
    """Which command wrote the document."""
    schema_version: Literal[1] = 1
    """Version of the document's shape."""
    trace_id: str
    """The trace shown (the top of `traces`)."""
    store: str
    """URL of the store read."""
    totals: Totals
    """Sums over the tree under `trace_id`."""
    traces: list[TraceRow]
    """The tree under `trace_id`, depth first, children in creation order."""


class ListFilters(_Document):
    """The filters `list` applied (null: not filtered)."""

    all_traces: bool
    """False: roots only (the default); true: sub-traces too."""
    status: str | None
    """Only traces with this status."""
    agent_mode: Literal["legacy", "recursive"] | None
    """Only traces of this mode."""
    model: str | None
    """Only traces that ran this model spec."""
    since: datetime | None
    """Only traces created at or after this time (UTC)."""
    limit: int | None
    """At most this many rows (newest first); null: no limit."""


class ListDocument(_Document):
    """What `list --json` prints."""

    kind: Literal["list"] = "list"
    """Which command wrote the document."""
    schema_version: Literal[1] = 1
    """Version of the document's shape."""
    store: str
    """URL of the store read."""
    filters: ListFilters
    """What was asked for."""
    traces: list[TraceRow]
    """Matching traces, newest first."""
    more: bool
    """True when more traces matched than `filters.limit` let through."""
    damaged: list[str]
    """Store entries the listing skipped as damaged or foreign, each as `path (kind): detail`."""


class SweepCells(_Document):
    """How the cells of a sweep ended up."""

    total: int
    """Cells in the grid."""
    done: int
    """Cells run by this invocation."""
    skipped: int
    """Cells already finished before it (a resumed sweep)."""
    failed: int
    """Cells that errored past their retries."""


class SweepGroup(_Document):
    """One row of the sweep's summary: a mode and model over every task and repeat."""

    mode: str
    """The mode of the group."""
    model: str
    """The model of the group."""
    score_mean: float | None
    """Mean score over repeats (null: nothing scored)."""
    score_std: float | None
    """Spread of the score across repeats."""
    cost_mean: float | None
    """Mean USD per cell."""
    cost_std: float | None
    """Spread of the cost across repeats."""
    llm_calls_mean: float | None
    """Mean LLM calls per cell."""
    cells: int
    """Scored cells."""
    unfinished: int
    """Pending or errored cells (no score)."""


class SweepDocument(_Document):
    """What `sweep FILE --json` prints when the sweep ends."""

    kind: Literal["sweep"] = "sweep"
    """Which command wrote the document."""
    schema_version: Literal[1] = 1
    """Version of the document's shape."""
    store: str | None
    """URL of the store holding the cells; null when it was memory (nothing kept)."""
    cells: SweepCells
    """How the cells ended up."""
    summary: list[SweepGroup]
    """Per mode and model (`cyber_agent/experiments/frame.py:summarize`)."""


CliDocument = Annotated[RunDocument | ShowDocument | ListDocument | SweepDocument, Field(discriminator="kind")]
"""Any document `--json` prints."""


def cli_json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of every `--json` document."""
    # Serialization mode: fields with defaults (kind, schema_version) are always printed, so required.
    schema = TypeAdapter(CliDocument).json_schema(mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "cyber-agent --json output", **schema}


def finite_or_none(value: object) -> float | None:
    """A float for the JSON document; NaN (pandas' "nothing here") becomes null."""
    if value is None:
        return None
    number = float(value)  # type: ignore[arg-type]
    return None if math.isnan(number) else number


def print_document(document: BaseModel) -> None:
    """Print one document on stdout as a single JSON object."""
    print(document.model_dump_json())


def schema_text() -> str:
    """`cli_json_schema()` as the published file holds it."""
    return json.dumps(cli_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

