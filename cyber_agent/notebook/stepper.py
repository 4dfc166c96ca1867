"""Step through the recursive protocol of a tree: brief → report → validation → review (SPEC J4).

Items are read from the `protocol` column (`Trace.protocol`) through the `reports` and
`validations` frames; a legacy tree has none and the stepper says so. The state is plain Python
(`ReportStepper.index` and `.verdict`); the display is self-contained HTML whose script draws
the controls in the browser (`stepper_js.py`), so a saved notebook reopens readable without a
kernel or widget state, and headless tests drive the same state the buttons show.

Order: a trace's brief, then its children's steps, then each round of report → evidence check
per claim (its verdict, reason and cited excerpt) → criterion verdicts → the parent's review (a report sent back with `revise` and submitted again is a new
round, read from the child's `submit_report` calls and the parent's review list). A recursive
root shows its anchor first and, last, its candidate answers with the root validator's verdicts.
`jump_to(trace_id)` and the trace picker move to a trace's first step; `filter_verdict("fail")`
and the verdict dropdown keep only the criterion verdicts of that kind.
"""

from __future__ import annotations

import html
import json
import textwrap
from dataclasses import dataclass
from typing import Any

import pandas as pd

from cyber_agent.notebook.display import RichDisplay, UpdatingDisplay
from cyber_agent.notebook.frames import TraceFrames, to_frames
from cyber_agent.notebook.records import StoreSource
from cyber_agent.notebook.stepper_js import STEPPER_CSS, STEPPER_JS

__all__ = ["ReportStepper", "StepItem", "protocol_items"]

EMPTY = "no reports in this tree"
VERDICTS = ("pass", "fail", "unknown")
"""Values of the verdict filter besides "all"."""
VERDICT_COLORS = {"pass": "#2ca02c", "fail": "#d62728", "unknown": "#7f7f7f"}


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
    verdict: str | None = None
    """Validation steps: the criterion's verdict (pass, fail or unknown); None for other steps."""
    round: int = 1
    """Which report of the trace the step belongs to (2 after a first revision, ...)."""

    def to_text(self) -> str:
        """Title and body as text."""
        return "\n".join([self.title, *("  " + line for line in self.lines)])

    def to_html(self) -> str:
        """Title and body as HTML (a validation step starts with a dot in its verdict's colour)."""
        body = "".join(f"<li>{html.escape(line)}</li>" for line in self.lines)
        dot = f'<span style="color:{VERDICT_COLORS[self.verdict]}">●</span> ' if self.verdict in VERDICT_COLORS else ""
        return f"{dot}<b>{html.escape(self.title)}</b>" + (f"<ul>{body}</ul>" if body else "")


def _items(values: Any) -> list[str]:
    return [str(v) for v in values] if isinstance(values, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _submitted(tool_calls: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """The arguments of every accepted submit_report call, per trace, in order (one pass over plain columns)."""
    calls = tool_calls[tool_calls["tool_name"] == "submit_report"].sort_values(["trace_id", "sequence", "call_index"])
    out: dict[str, list[dict[str, Any]]] = {}
    for trace_id, arguments, is_error in zip(calls["trace_id"].tolist(), calls["arguments"].tolist(),
                                             calls["is_error"].tolist()):
        if is_error is not True and isinstance(arguments, dict):
            out.setdefault(str(trace_id), []).append(dict(arguments))
    return out


def _report_rounds(submitted: list[dict[str, Any]], final: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every report the trace submitted, in order; the persisted (final) one closes the list if it differs."""
    rounds = list(submitted)
    if final is not None and (not rounds or any(rounds[-1].get(k) != final.get(k) for k in ("outcome", "summary"))):
        rounds.append(final)
    return rounds


def _candidate_answers(frames: TraceFrames, trace: Any) -> list[dict[str, Any]]:
    """A recursive root's final texts (each a candidate for the root validator), as reports."""
    messages = frames.messages
    finals = messages[(messages["trace_id"] == trace.trace_id) & (messages["message_role"] == "assistant")
                      & messages["on_main_path"] & (messages["n_tool_calls"] == 0)]
    texts = [t for t in finals.sort_values("sequence")["text"] if isinstance(t, str) and t.strip()]
    if not texts and isinstance(trace.result_summary, str):
        texts = [trace.result_summary]
    return [{"outcome": "candidate answer", "summary": text} for text in texts]


def _report_item(who: str, trace_id: str, report: dict[str, Any], number: int, count: int, *, root: bool) -> StepItem:
    outcome = _text(report.get("outcome"))
    which = "answer" if root else "report"
    if count > 1:
        which += f" {number} of {count}"
    summary = _text(report.get("summary"))
    if root:  # a candidate answer is multi-line: its first line is the title, the rest the body
        first, *rest = summary.splitlines() or [""]
        return StepItem(kind="report", trace_id=trace_id, title=f"{who} · {which}: {first}", lines=tuple(rest), round=number)
    claimed = [c for c in report.get("claims") or [] if isinstance(c, dict)] if not _items(report.get("outputs")) else []
    lines = [f"output: {o}" for o in _items(report.get("outputs"))] + [f"claim: {_text(c.get('text'))}" for c in claimed]
    lines += [f"evidence: {e}" for e in _items(report.get("evidence"))]
    lines += [f"open issue: {i}" for i in _items(report.get("open_issues"))]
    return StepItem(kind="report", trace_id=trace_id, title=f"{who} · {which} ({outcome}): {summary}", lines=tuple(lines),
                    round=number)


def _rows_by_trace(frame: pd.DataFrame) -> dict[str, list[Any]]:
    """The rows of `frame` (named tuples) per trace id, read in one pass (a filter per trace is quadratic)."""
    out: dict[str, list[Any]] = {}
    for row in frame.itertuples(index=False):
        out.setdefault(str(row.trace_id), []).append(row)
    return out


def _validation_groups(rows: list[Any]) -> list[list[Any]]:
    """A trace's validation rows, one list per validation, by validation index."""
    groups: dict[int, list[Any]] = {}
    for row in rows:
        groups.setdefault(int(row.validation_index), []).append(row)
    return [groups[index] for index in sorted(groups)]


def _rounds(groups: list[list[Any]]) -> list[list[list[Any]]]:
    """Validations grouped per report: an evidence check and the validator verdict that followed it (if it passed)."""
    rounds: list[list[list[Any]]] = []
    for group in groups:
        scope = group[0].scope
        last = rounds[-1] if rounds else None
        joins = (scope != "evidence" and last is not None and len(last) == 1 and last[0][0].scope == "evidence"
                 and last[0][0].verdict != "fail")
        if joins and last is not None:
            last.append(group)
        else:
            rounds.append([group])
    return rounds


def _claim_items(who: str, trace_id: str, claims: list[Any], index: int, number: int) -> list[StepItem]:
    """One step per claim of an evidence check: its verdict, the reason, and the excerpt it cites."""
    out = []
    for row in (c for c in claims if int(c.validation_index) == index):
        verdict = row.check_verdict if isinstance(row.check_verdict, str) else None
        what = f"claim {int(row.claim_index) + 1}: {row.claim}" if pd.notna(row.claim_index) else f"whole report: {row.claim}"
        lines = [f"{row.code}: {_text(row.reason)}"]
        if isinstance(row.location, str) and row.location:
            lines.append(f"cites {row.location}")
        if isinstance(row.excerpt, str) and row.excerpt:
            lines.append(f"cited excerpt: {row.excerpt}")
        out.append(StepItem(kind="validation", trace_id=trace_id, title=f"{who} · evidence check: {verdict} — {what}",
                            lines=tuple(lines), verdict=verdict, round=number))
    if not out:
        out.append(StepItem(kind="validation", trace_id=trace_id, title=f"{who} · evidence check: no claims to check",
                            verdict="unknown", round=number))
    return out


def protocol_items(frames: TraceFrames) -> list[StepItem]:
    """The protocol of a tree as steps: brief, children, then per round report → criterion verdicts → review."""
    traces = frames.traces.sort_values("position")
    labels = dict(zip(traces["trace_id"], traces["label"]))
    agents = traces[~traces["is_validator"]]
    ids = set(agents["trace_id"])
    children: dict[str, list[Any]] = {}
    roots: list[Any] = []
    reviews: dict[str, list[dict[str, Any]]] = {}
    for trace in agents.itertuples(index=False):
        if isinstance(trace.parent_trace_id, str) and trace.parent_trace_id in ids:
            children.setdefault(trace.parent_trace_id, []).append(trace)
        else:
            roots.append(trace)
        protocol = trace.protocol if isinstance(trace.protocol, dict) else None
        for review in (protocol or {}).get("reviews") or []:
            if isinstance(review, dict) and isinstance(review.get("child_trace_id"), str):
                reviews.setdefault(review["child_trace_id"], []).append(review)
    reports = {row.trace_id: row for row in frames.reports.itertuples(index=False)}
    submitted_calls = _submitted(frames.tool_calls)
    checks_of, claims_of = _rows_by_trace(frames.validations), _rows_by_trace(frames.claims)

    def opening(trace: Any) -> list[StepItem]:
        who, row = trace.label, reports.get(trace.trace_id)
        brief = row.brief if row is not None and isinstance(row.brief, dict) else {}
        anchor = trace.root_setup.get("anchor") if isinstance(trace.root_setup, dict) else None
        if brief:
            lines = [f"criterion: {c}" for c in _items(brief.get("completion_criteria"))]
            lines += [f"expected output: {o}" for o in _items(brief.get("expected_outputs"))]
            lines += [f"constraint: {c}" for c in _items(brief.get("constraints"))]
            return [StepItem(kind="brief", trace_id=trace.trace_id, title=f"{who} · brief: {_text(brief.get('objective'))}",
                             lines=tuple(lines))]
        if isinstance(anchor, dict) and trace.trace_id not in reports:
            lines = [f"criterion: {c}" for c in _items(anchor.get("completion_criteria"))]
            lines += [f"constraint: {c}" for c in _items(anchor.get("constraints"))]
            return [StepItem(kind="brief", trace_id=trace.trace_id,
                             title=f"{who} · root task: {_text(anchor.get('objective'))}", lines=tuple(lines))]
        return []

    def closing(trace: Any, *, is_root: bool) -> list[StepItem]:
        who, row = trace.label, reports.get(trace.trace_id)
        by_round = _rounds(_validation_groups(checks_of.get(trace.trace_id, [])))
        claims = claims_of.get(trace.trace_id, [])
        if row is not None:
            final = {"outcome": row.outcome, "summary": row.summary, "outputs": row.outputs, "evidence": row.evidence,
                     "open_issues": row.open_issues} if isinstance(row.outcome, str) else None
            submitted = _report_rounds(submitted_calls.get(trace.trace_id, []), final)
        else:
            anchored = isinstance(trace.root_setup, dict) and isinstance(trace.root_setup.get("anchor"), dict)
            submitted = _candidate_answers(frames, trace) if is_root and (anchored or by_round) else []
        decisions = reviews.get(trace.trace_id, [])
        if not decisions and row is not None and isinstance(row.review_decision, str):
            decisions = [{"decision": row.review_decision, "feedback": row.review_feedback}]
        out: list[StepItem] = []
        for k in range(max(len(submitted), len(by_round), len(decisions))):
            number = k + 1
            if k < len(submitted):
                out.append(_report_item(who, trace.trace_id, submitted[k], number, len(submitted),
                                        root=row is None))
            for group in by_round[k] if k < len(by_round) else []:
                if group[0].scope == "evidence":
                    out += _claim_items(who, trace.trace_id, claims, int(group[0].validation_index), number)
                    continue
                for check in group:
                    criterion = check.criterion if isinstance(check.criterion, str) else "(no criteria)"
                    verdict = check.criterion_verdict if isinstance(check.criterion_verdict, str) else check.verdict
                    evidence = _text(check.criterion_evidence)
                    lines = [f"evidence: {evidence}"] if evidence else []
                    if isinstance(check.validator_trace_id, str):
                        lines.append(f"judged by {labels.get(check.validator_trace_id, check.validator_trace_id)}")
                    out.append(StepItem(kind="validation", trace_id=trace.trace_id,
                                        title=f"{who} · {check.scope} validation: {verdict} — {criterion}",
                                        lines=tuple(lines), verdict=verdict if isinstance(verdict, str) else None,
                                        round=number))
            if k < len(decisions):
                feedback = _text(decisions[k].get("feedback"))
                by = f" by {labels[trace.parent_trace_id]}" if trace.parent_trace_id in labels else ""
                out.append(StepItem(kind="review", trace_id=trace.trace_id,
                                    title=f"{who} · review{by}: {_text(decisions[k].get('decision'))}",
                                    lines=(feedback,) if feedback else (), round=number))
        return out

    out: list[StepItem] = []
    for root in roots:
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:  # iterative: brief on the way down, reports and verdicts on the way up
            trace, done = stack.pop()
            if done:
                out.extend(closing(trace, is_root=trace is root))
                continue
            out.extend(opening(trace))
            stack.append((trace, True))
            stack.extend((child, False) for child in reversed(children.get(trace.trace_id, [])))
    return out


class ReportStepper(UpdatingDisplay):
    """Prev / slider / next over the protocol items of a tree, a trace picker and a verdict filter.

    The state is plain Python (`index`, `verdict`, moved by `go`, `next`, `prev`, `jump_to`,
    `filter_verdict`); displayed, the stepper is self-contained HTML: the script of
    `cyber_agent/notebook/stepper_js.py` draws the controls in the browser, starting at the step
    shown, and a static list of every step (the current one open) shows where scripts do not run.
    No widget: a saved notebook reopens as it was, in JupyterLab, on GitHub and in nbviewer.
    """

    def __init__(self, source: StoreSource | TraceFrames, root_trace_id: str) -> None:
        frames = to_frames(source, [root_trace_id], events=False).tree(root_trace_id)
        self.root_trace_id = root_trace_id
        """The tree's root (or the subtree's top)."""
        self.items = protocol_items(frames)
        """The steps, in order."""
        self.visible: list[StepItem] = list(self.items)
        """The steps the verdict filter keeps (all of them by default); `index` moves over these."""
        self._index = 0
        self._verdict = "all"
        self.trace_options = self._trace_options(frames)
        """(text, trace id) of every trace with steps, in step order: what the trace picker offers."""

    def _trace_options(self, frames: TraceFrames) -> list[tuple[str, str]]:
        labels = dict(zip(frames.traces["trace_id"], frames.traces["label"]))
        summaries = {row.trace_id: row.summary if isinstance(row.summary, str) else row.objective
                     for row in frames.reports.itertuples(index=False)}
        options: dict[str, str] = {}
        for item in self.items:
            if item.trace_id not in options:
                about = summaries.get(item.trace_id)
                about = textwrap.shorten(about, 60, placeholder=" …") if isinstance(about, str) else "root task and answer"
                options[item.trace_id] = f"{labels.get(item.trace_id, item.trace_id)} · {about}"
        return [(text, trace_id) for trace_id, text in options.items()]

    @property
    def index(self) -> int:
        """Position of the current step (among the visible ones)."""
        return self._index

    @property
    def verdict(self) -> str:
        """The verdict filter: "all", or the criterion verdict kept (pass, fail, unknown)."""
        return self._verdict

    @property
    def current(self) -> StepItem | None:
        """The step shown (None when the tree has no protocol data, or the filter keeps nothing)."""
        return self.visible[self._index] if self.visible else None

    @property
    def trace(self) -> str | None:
        """The trace of the step shown (what the trace picker shows)."""
        item = self.current
        return item.trace_id if item is not None else None

    @property
    def at_first(self) -> bool:
        """True at the first visible step (or with none): "◀ prev" is disabled."""
        return self._index == 0 or not self.visible

    @property
    def at_last(self) -> bool:
        """True at the last visible step (or with none): "next ▶" is disabled."""
        return self._index >= len(self.visible) - 1

    @property
    def label(self) -> str:
        """`3 / 12 · validation` (· fail only when filtered): where the stepper is."""
        only = "" if self._verdict == "all" else f" · {self._verdict} only"
        item = self.current
        return f"0 / 0{only}" if item is None else f"{self._index + 1} / {len(self.visible)} · {item.kind}{only}"

    @property
    def body(self) -> str:
        """The step shown, as HTML (or why there is none)."""
        return self.to_html_step()

    def go(self, index: int) -> None:
        """Show step `index` (clamped to the visible steps)."""
        if self.visible:
            self._index = min(max(index, 0), len(self.visible) - 1)
        self._changed()

    def next(self) -> None:
        """Show the next step (at the last one, nothing moves)."""
        self.go(self._index + 1)

    def prev(self) -> None:
        """Show the previous step (at the first one, nothing moves)."""
        self.go(self._index - 1)

    def jump_to(self, trace_id: str) -> None:
        """Show the first step of `trace_id`; a verdict filter that hides all of its steps is reset to "all"."""
        if not any(item.trace_id == trace_id for item in self.items):
            raise ValueError(f"no steps for trace {trace_id!r} in this tree (validators have none of their own)")
        if not any(item.trace_id == trace_id for item in self.visible):
            self.filter_verdict("all")
        self._index = next(i for i, item in enumerate(self.visible) if item.trace_id == trace_id)
        self._changed()

    def filter_verdict(self, verdict: str = "all") -> None:
        """Keep only criterion verdicts `verdict` (pass, fail, unknown), or every step ("all"); the step shown stays if kept."""
        if verdict not in ("all", *VERDICTS):
            raise ValueError(f"verdict must be one of all, {', '.join(VERDICTS)}; got {verdict!r}")
        shown = self.current
        self._verdict = verdict
        self.visible = [item for item in self.items if verdict == "all" or item.verdict == verdict]
        self._index = self.visible.index(shown) if shown in self.visible else 0
        self._changed()


    def _empty_text(self) -> str:
        return EMPTY if not self.items else f"no steps with verdict {self._verdict}"

    def __repr__(self) -> str:
        return f"ReportStepper(steps={len(self.items)}, index={self._index})"

    def to_text(self) -> str:
        """The current step as text (or that there is none)."""
        item = self.current
        return self._empty_text() if item is None else f"step {self._index + 1}/{len(self.visible)} · {item.to_text()}"

    def to_html_step(self) -> str:
        """The current step as HTML (or why there is none)."""
        item = self.current
        return f"<i>{html.escape(self._empty_text())}</i>" if item is None else item.to_html()

    def _static(self) -> str:
        """Every step as a `<details>` (the current one open and marked), for wherever scripts do not run."""
        shown = self.current
        rows = []
        for item in self.items:
            body = "".join(f"<li>{html.escape(line)}</li>" for line in item.lines)
            dot = (f'<span style="color:{VERDICT_COLORS[item.verdict]}">●</span> '
                   if item.verdict in VERDICT_COLORS else "")
            now = item is shown
            summary = f"{dot}{'▶ ' if now else ''}{html.escape(item.title)}"
            inner = f"<ul>{body}</ul>" if body else ""
            mark = ' class="ca-now"' if now else ""
            rows.append(f'<li{mark}><details{" open" if now else ""}><summary>{summary}</summary>{inner}</details></li>')
        head = f"<b>{len(self.items)} protocol steps</b> · {html.escape(self.label)}"
        if not self.items:
            return f"{head}<br><i>{html.escape(EMPTY)}</i>"
        return f"{head}<ol>{''.join(rows)}</ol>"

    def to_html(self) -> str:
        """The stepper as self-contained HTML: the steps as data, the script, and the static list (no random ids)."""
        data = {"items": [[i.kind, i.trace_id, i.verdict, i.to_html()] for i in self.items],
                "traces": self.trace_options, "verdicts": list(VERDICTS), "verdict": self._verdict,
                "index": self._index, "empty": EMPTY}
        payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
        # No element id: the script finds its box as its own ancestor (`document.currentScript`).
        return (f'<div class="ca-stepper-box cyber-agent-stepper"><style>{STEPPER_CSS}</style>'
                f'<div class="ca-stepper-static">{self._static()}</div>'
                f'<script type="application/json" class="ca-data">{payload}</script>'
                f'<script>{STEPPER_JS}</script></div>')
