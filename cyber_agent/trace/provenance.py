"""Where an imported trace came from (`Trace.provenance`): the source format, file and ids.

Traces this toolkit ran have no provenance record (`Trace.provenance is None`); a trace made by
`cyber_agent/importers/` from another tool's run keeps the source's own ids here and says what
the source did not record (`missing`), so nothing a reader sees is mistaken for a measurement
the source never made. The record rides in the trace's JSON, so every store keeps it without a
schema change.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cyber_agent.trace.clock import utc_now

__all__ = ["IMPORT_SOURCES", "ImportSource", "Missing", "Provenance"]

ImportSource = Literal["inspect", "otel", "redel"]
"""The formats `cyber_agent/importers/` reads."""
IMPORT_SOURCES: tuple[ImportSource, ...] = ("inspect", "otel", "redel")

Missing = Literal["usage", "cost", "timestamps", "model", "content", "status", "task"]
"""What a source may not record for a trace:

- `usage`: token counts (the trace's totals are 0 because nothing was counted, not because none were used)
- `cost`: USD cost (tokens may be known)
- `timestamps`: when the trace and its messages happened (the times stored keep the source's order only)
- `model`: which model answered
- `content`: message texts and tool arguments (structure only: roles, tool names, usage)
- `status`: how the run ended
- `task`: what the agent was asked
"""


class Provenance(BaseModel):
    """The source of an imported trace: format, file, the source's ids, and what it lacks."""

    model_config = ConfigDict(extra="ignore")

    source: ImportSource
    """The format it was imported from."""
    path: str
    """The file (or in-process span list, `<spans>`) it was read from."""
    ids: dict[str, str] = Field(default_factory=dict)
    """The source's own ids of this trace (e.g. ReDel `session_id` / `node_id`, Inspect `eval_id` /
    `sample_id` / `epoch`, OTel `trace_id` / `span_id`)."""
    missing: list[Missing] = Field(default_factory=list)
    """What the source does not record for this trace (see `Missing`); the stored value is a default."""
    notes: list[str] = Field(default_factory=list)
    """Anything approximated or dropped while mapping (one sentence each)."""
    started_by_call: str | None = None
    """The parent's tool call id (as the source spells it) that started this trace, when the source links them."""
    imported_at: datetime = Field(default_factory=utc_now)
    """When the import ran (UTC)."""
