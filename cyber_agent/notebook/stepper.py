"""Step through the recursive protocol of a tree: brief → report → validation → review (SPEC J4).

Skeleton for the recursive half. Items are read from `trace.context["task_protocol"]` through
the `reports` and `validations` frames; a legacy tree has none and the stepper says so. The
state lives in one IntSlider (the single source of truth; the buttons only move it), and the
body is rendered by assigning `HTML.value` — never `with out:`, which only a frontend can
capture — so headless tests can click and assert.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from cyber_agent.notebook.display import RichDisplay
from cyber_agent.notebook.frames import TraceFrames, to_frames
from cyber_agent.notebook.records import StoreSource

__all__ = ["ReportStepper", "StepItem", "protocol_items"]

EMPTY = "no reports in this tree"


@dataclass(frozen=True, kw_only=True)
class StepItem(RichDisplay):
    """One step: what kind, for which trace, and its rendering."""

    kind: str
    """brief, report, validation or review."""
    trace_id: str
    """The trace the item is about."""
    title: str
    """One line."""
    lines: tuple[str, ...] = ()
    """Body lines."""

    def to_text(self) -> str:
        """Title and body as text."""
        return "\n".join([self.title, *("  " + line for line in self.lines)])

    def to_html(self) -> str:
        """Title and body as HTML."""
        body = "".join(f"<li>{html.escape(line)}</li>" for line in self.lines)
        return f"<b>{html.escape(self.title)}</b>" + (f"<ul>{body}</ul>" if body else "")


def _items(values: Any) -> list[str]:
    return [str(v) for v in values] if isinstance(values, list) else []


def protocol_items(frames: TraceFrames) -> list[StepItem]:
    """The protocol of a tree as steps, in tree order: per trace brief, report, criterion verdicts, review."""
    reports = {row.trace_id: row for row in frames.reports.itertuples(index=False)}
    out: list[StepItem] = []
    for trace in frames.traces.sort_values("position").itertuples(index=False):
        who, row = trace.label, reports.get(trace.trace_id)
        brief = row.brief if row is not None and isinstance(row.brief, dict) else {}
        if brief:
            out.append(StepItem(kind="brief", trace_id=trace.trace_id, title=f"{who} · brief: {brief.get('objective', '')}",
                                lines=tuple(f"criterion: {c}" for c in _items(brief.get("completion_criteria")))))
        if row is not None and isinstance(row.outcome, str):
            lines = [f"output: {o}" for o in row.outputs] + [f"evidence: {e}" for e in row.evidence]
            lines += [f"open issue: {i}" for i in row.open_issues]
            out.append(StepItem(kind="report", trace_id=trace.trace_id,
                                title=f"{who} · report ({row.outcome}): {row.summary}", lines=tuple(lines)))
        checks = frames.validations[frames.validations["trace_id"] == trace.trace_id]
        for check in checks.itertuples(index=False):
            criterion = check.criterion if isinstance(check.criterion, str) else "(no criteria)"
            verdict = check.criterion_verdict if isinstance(check.criterion_verdict, str) else check.verdict
            evidence = check.criterion_evidence if isinstance(check.criterion_evidence, str) else ""
            out.append(StepItem(kind="validation", trace_id=trace.trace_id,
                                title=f"{who} · {check.scope} validation: {verdict} — {criterion}",
                                lines=(f"evidence: {evidence}",) if evidence else ()))
        if row is not None and isinstance(row.review_decision, str):
            feedback = row.review_feedback if isinstance(row.review_feedback, str) else ""
            out.append(StepItem(kind="review", trace_id=trace.trace_id, title=f"{who} · review: {row.review_decision}",
                                lines=(feedback,) if feedback else ()))
    return out


class ReportStepper(RichDisplay):
    """Prev / slider / next over the protocol items of a tree."""

    def __init__(self, source: StoreSource | TraceFrames, root_trace_id: str) -> None:
        import ipywidgets as widgets

        frames = to_frames(source, [root_trace_id], events=False).tree(root_trace_id)
        self.items = protocol_items(frames)
        """The steps, in order."""
        count = max(len(self.items), 1)
        self.slider = widgets.IntSlider(value=0, min=0, max=count - 1, description="step", readout=False,
                                        disabled=not self.items)
        self.prev_button = widgets.Button(description="◀ prev", disabled=True)
        self.next_button = widgets.Button(description="next ▶", disabled=len(self.items) <= 1)
        self.label = widgets.Label()
        self.body = widgets.HTML()
        self.prev_button.on_click(lambda _: self.go(self.slider.value - 1))
        self.next_button.on_click(lambda _: self.go(self.slider.value + 1))
        self.slider.observe(lambda _: self._render(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.prev_button, self.slider, self.next_button, self.label]), self.body])
        self._render()

    @property
    def index(self) -> int:
        """Position of the current step."""
        return int(self.slider.value)

    @property
    def current(self) -> StepItem | None:
        """The step shown (None when the tree has no protocol data)."""
        return self.items[self.index] if self.items else None

    def go(self, index: int) -> None:
        """Show step `index` (clamped to the available steps)."""
        if self.items:
            self.slider.value = min(max(index, 0), len(self.items) - 1)

    def _render(self) -> None:
        item = self.current
        if item is None:
            self.label.value, self.body.value = "0 / 0", f"<i>{EMPTY}</i>"
            return
        self.label.value = f"{self.index + 1} / {len(self.items)} · {item.kind}"
        self.body.value = item.to_html()
        self.prev_button.disabled = self.index == 0
        self.next_button.disabled = self.index >= len(self.items) - 1

    def __repr__(self) -> str:
        return f"ReportStepper(steps={len(self.items)}, index={self.index})"

    def to_text(self) -> str:
        """The current step as text (or that there is none)."""
        item = self.current
        return EMPTY if item is None else f"step {self.index + 1}/{len(self.items)} · {item.to_text()}"

    def to_html(self) -> str:
        """The current step as HTML."""
        item = self.current
        return f"<i>{EMPTY}</i>" if item is None else item.to_html()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle.update({"text/plain": self.to_text(), "text/html": self.to_html()})
        return bundle
