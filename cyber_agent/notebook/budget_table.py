"""A budget frame formatted for reading: `budget_table(store, root)` (SPEC J3).

`budget_frame` is data (floats, NaN for "no limit"); printed as is it reads `8.000000`,
`4.200000e+01` and `<NA>`, so `budget_frame` returns a `BudgetFrame`: the same data, displayed
as the formatted table (the frames derived from it — `.loc[...]`, arithmetic — are plain
DataFrames again). `BudgetTable` renders the same frame with each resource in its unit
(counts with thousands separators, dollars, seconds), `—` for no limit, the percent used, the
refusal of each row, and below the table why the run stopped and the refusal behind it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from cyber_agent.notebook.display import RichDisplay, html_table
from cyber_agent.notebook.frames import TraceFrames
from cyber_agent.notebook.records import StoreSource

__all__ = ["BudgetFrame", "BudgetTable", "budget_table", "format_amount"]

_HEADER = ["resource", "used", "limit", "remaining", "% used", "refusal"]


def format_amount(value: float, unit: str) -> str:
    """`1,234` for counts, `$0.0123` for USD, `12.3 s` for seconds, `—` for NaN (no limit)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if unit == "USD":
        return f"${value:,.4f}"
    if unit == "s":
        return f"{value:,.1f} s"
    return f"{value:,.0f}"


_REFUSED_ROW = "background-color:#fde2e1"


class BudgetFrame(pd.DataFrame):  # type: ignore[misc]  # pandas ships no types here (ignore_missing_imports)
    """A `budget_frame`: data like any DataFrame, displayed formatted (units, %, refused rows marked)."""

    @property
    def _constructor(self) -> Any:
        return pd.DataFrame  # a slice or a sum is data again: displayed as pandas would

    def _repr_html_(self) -> str:
        table = BudgetTable(self)
        shown = pd.DataFrame(table.rows(), columns=_HEADER).set_index("resource")
        refused = [bool(r) for r in shown["refusal"]]
        shown["refusal"] = [f"⚠ refused: {r}" if r else "" for r in shown["refusal"]]  # marked where styles are stripped
        # An id from the content, not random: a rerun saves the same output, and two tables never share row styles.
        uuid = "cyber-agent-budget-" + hashlib.sha1(shown.to_json().encode()).hexdigest()[:10]
        styler = shown.style.set_uuid(uuid).set_caption(table._headline())
        styler = styler.apply(lambda row: [_REFUSED_ROW if refused[shown.index.get_loc(row.name)] else ""] * len(row),
                              axis=1)
        notes = html_table(table._notes()) if table._notes() else ""
        return str(styler.to_html()) + notes

    def __repr__(self) -> str:
        return BudgetTable(self).to_text()


class BudgetTable(RichDisplay):
    """A `budget_frame` rendered with units, percent used, refusals, and the run's stop reason."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        """The budget frame (data: use it for arithmetic)."""

    def rows(self) -> list[list[str]]:
        """One formatted row per resource: resource, used, limit, remaining, % used, refusal."""
        out = []
        for resource, row in self.frame.iterrows():
            unit = str(row["unit"])
            percent = row["percent"]
            refusal = row["refusal"]
            out.append([
                str(resource).replace("_", " "), format_amount(row["used"], unit), format_amount(row["limit"], unit),
                format_amount(row["remaining"], unit), "—" if pd.isna(percent) else f"{percent:.1f}%",
                refusal if isinstance(refusal, str) else "",
            ])
        return out

    def _headline(self) -> str:
        attrs = self.frame.attrs
        source = {"given": "what-if limits", "tree": "the tree's limits",
                  "unknown": f"limits unknown ({attrs.get('source')} records none)"}.get(
            str(attrs.get("limits_source")), "no limits")
        return f"Tree budget ({attrs.get('mode', 'legacy')}, {source}, usage from {attrs.get('usage_source', 'traces')})"

    def _notes(self) -> list[tuple[str, str]]:
        attrs = self.frame.attrs
        notes = []
        if attrs.get("stop_reason"):
            notes.append((f"{attrs.get('status', 'stopped')}", str(attrs["stop_reason"])))
        if attrs.get("refusal"):
            notes.append(("last refusal", str(attrs["refusal"])))
        reserved = attrs.get("reserved_final_calls")
        if isinstance(reserved, int) and reserved > 0 and attrs.get("mode") == "recursive":
            notes.append(("reserved", f"{reserved} of the LLM calls are kept for the root validator: "
                                      "agents stop at the limit minus these"))
        if attrs.get("unknown"):
            notes.append(("not recorded by the source", ", ".join(attrs["unknown"]) + " (— above)"))
        return notes

    def __repr__(self) -> str:
        return f"BudgetTable(root={self.frame.attrs.get('root_trace_id')!r}, rows={len(self.frame)})"

    def to_text(self) -> str:
        """Aligned columns, then the stop reason and the last refusal."""
        rows = self.rows()
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(_HEADER[:-1])]
        lines = [self._headline()]
        for cells in [_HEADER, *rows]:
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
                         + (f"  {cells[-1]}" if cells[-1] else ""))
        lines += [f"{label}: {text}" for label, text in self._notes()]
        return "\n".join(lines)

    def to_html(self) -> str:
        """The table (padded cells), then the stop reason and the last refusal."""
        notes = html_table(self._notes()) if self._notes() else ""
        return html_table(self.rows(), _HEADER, caption=self._headline()) + notes


def budget_table(
    source: StoreSource | TraceFrames | pd.DataFrame, root_trace_id: str | None = None, *,
    limits: Mapping[str, Any] | None = None,
) -> BudgetTable:
    """The budget of a tree (or an existing `budget_frame`) as a formatted table."""
    from cyber_agent.notebook.budgets import budget_frame

    if isinstance(source, pd.DataFrame):
        return BudgetTable(source)
    if not root_trace_id:
        from cyber_agent.errors import ConfigurationError

        raise ConfigurationError("root_trace_id", "is required when reading the budget from a store, path or frames")
    return BudgetTable(budget_frame(source, root_trace_id, limits=limits))
