"""What the trace explorer shows about one trace: a page of sections, as text and as HTML.

`trace_page` is a pure function of already loaded frames (and, optionally, the trace's messages):
header (path, role, status, verdict, id), brief, report and the parent's review, verdicts (of the
trace's validations, or a validator's own), goals, usage, and the last messages. Every value is
escaped; no random ids, so a saved notebook stays stable.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from cyber_agent.notebook.tree_labels import VERDICT_MARKS, TraceText
from cyber_agent.trace.models import Message, MessageContent

__all__ = ["SECTIONS", "Page", "trace_page"]

SECTIONS = ("brief", "report", "verdicts", "goals", "usage", "messages")
"""The sections of a page, in order."""
MESSAGE_CHARS = 280
"""Characters of a message's text shown on a page."""
_VERDICT_STYLE = {"pass": "#2ca02c", "fail": "#d62728", "unknown": "#b8860b"}


@dataclass(frozen=True, kw_only=True)
class Page:
    """One trace's page: a headline and (title, lines) per section."""

    trace_id: str
    """The trace shown."""
    headline: str
    """`1.3 explore ✓ · region West · completed`."""
    sections: tuple[tuple[str, tuple[str, ...]], ...]
    """(section name, lines) in `SECTIONS` order; a section without content says so in one line."""

    def section(self, name: str) -> tuple[str, ...]:
        """The lines of one section."""
        for title, lines in self.sections:
            if title == name:
                return lines
        raise KeyError(f"no section {name!r}; sections are {', '.join(SECTIONS)}")

    def to_text(self) -> str:
        """The page as text."""
        out = [self.headline, self.trace_id]
        for title, lines in self.sections:
            out.append(f"[{title}]")
            out.extend(f"  {line}" for line in lines)
        return "\n".join(out)

    def to_html(self) -> str:
        """The page as HTML: one `<details>` per section (brief, report and verdicts open)."""
        parts = [f'<div class="cyber-agent-explorer-page"><b>{html.escape(self.headline)}</b><br>'
                 f'<code style="font-size:85%">{html.escape(self.trace_id)}</code>']
        for title, lines in self.sections:
            opened = " open" if title in ("brief", "report", "verdicts") else ""
            body = "".join(f"<li>{_html_line(line)}</li>" for line in lines)
            parts.append(f'<details{opened} class="cyber-agent-explorer-{title}"><summary><b>{title}</b></summary>'
                         f'<ul style="margin:0.2em 0">{body}</ul></details>')
        parts.append("</div>")
        return "".join(parts)


def _html_line(line: str) -> str:
    escaped = html.escape(line)
    for verdict, color in _VERDICT_STYLE.items():
        mark = f"{VERDICT_MARKS[verdict]} {verdict}"
        escaped = escaped.replace(mark, f'<span style="color:{color};font-weight:bold">{mark}</span>')
    return escaped


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _list(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _brief(report: Any) -> list[str]:
    brief = report.brief if report is not None and isinstance(report.brief, Mapping) else {}
    if not brief:
        return []
    lines = [f"objective: {_text(brief.get('objective'))}"]
    if _text(brief.get("reason")):
        lines.append(f"reason: {brief['reason']}")
    lines += [f"criterion {i}: {c}" for i, c in enumerate(_list(brief.get("completion_criteria")), 1)]
    lines += [f"expected: {o}" for o in _list(brief.get("expected_outputs"))]
    lines += [f"constraint: {c}" for c in _list(brief.get("constraints"))]
    return lines


def _report(report: Any) -> list[str]:
    if report is None or not _text(report.outcome):
        return []
    lines = [f"outcome: {report.outcome} · {_text(report.summary)}"]
    lines += [f"output: {o}" for o in _list(report.outputs)]
    lines += [f"evidence: {e}" for e in _list(report.evidence)]
    lines += [f"open issue: {i}" for i in _list(report.open_issues)]
    if _text(report.review_decision):
        feedback = f" — {report.review_feedback}" if _text(report.review_feedback) else ""
        lines.append(f"parent's review: {report.review_decision}{feedback}")
    return lines


def _verdicts(validations: pd.DataFrame, trace_id: str, paths: Mapping[str, str]) -> list[str]:
    rows = validations[(validations["trace_id"] == trace_id) | (validations["validator_trace_id"] == trace_id)]
    lines: list[str] = []
    for (validator, index), group in rows.groupby(["validator_trace_id", "validation_index"], sort=False, dropna=False):
        first = group.iloc[0]
        verdict = _text(first["verdict"])
        by = paths.get(str(validator), str(validator)) if isinstance(validator, str) else "?"
        about = f"of {paths.get(str(first['trace_id']), first['trace_id'])}" if validator == trace_id else f"by {by}"
        lines.append(f"validation {int(index) + 1} ({first['scope']}) {about}: {VERDICT_MARKS.get(verdict, '')} {verdict}".rstrip())
        for row in group.itertuples(index=False):
            if isinstance(row.criterion, str):
                mark = VERDICT_MARKS.get(_text(row.criterion_verdict), "")
                evidence = f" — {row.criterion_evidence}" if _text(row.criterion_evidence) else ""
                lines.append(f"  {mark} {row.criterion_verdict}: {row.criterion}{evidence}")
    return lines


def _goals(goals: pd.DataFrame) -> list[str]:
    lines = []
    for row in goals.sort_values("position").itertuples(index=False):
        summary = f" → {row.summary}" if _text(row.summary) else ""
        subs = f" [{row.n_sub_traces} sub-agents]" if row.n_sub_traces else ""
        lines.append(f"{'  ' * int(row.depth)}{row.goal_id}. {row.description} ({row.status}){subs}{summary}")
    return lines


def _usage(trace: Any, messages: Sequence[Message] | None) -> list[str]:
    calls = "?" if messages is None else str(sum(1 for m in messages if m.role == "assistant"))
    duration = f"{trace.duration_seconds:.1f} s" if pd.notna(trace.duration_seconds) else "?"
    return [f"tokens: {int(trace.total_tokens):,} ({int(trace.total_prompt_tokens):,} in, {int(trace.total_completion_tokens):,} out)",
            f"cost: ${float(trace.total_cost):.4f} · LLM calls: {calls} · messages: {int(trace.total_messages)} · {duration}",
            f"model: {_text(trace.model) or '?'}"]


def _messages(messages: Sequence[Message] | None, limit: int) -> list[str]:
    if messages is None:
        return ["(not loaded)"]
    shown = list(messages)[-limit:]
    lines = [f"last {len(shown)} of {len(messages)}"] if len(shown) < len(messages) else []
    for m in shown:
        calls = m.content.tool_calls if isinstance(m.content, MessageContent) else []
        what = m.tool_name or ", ".join(call.name for call in calls)
        text = textwrap.shorten(" ".join(m.text.split()), MESSAGE_CHARS, placeholder=" …") if m.text else ""
        lines.append(f"#{m.sequence} {m.role}{f' [{what}]' if what else ''}: {text}".rstrip(": "))
    return lines


def trace_page(
    trace: Any, text: TraceText, *, report: Any = None, validations: pd.DataFrame, goals: pd.DataFrame,
    paths: Mapping[str, str], messages: Sequence[Message] | None = None, message_limit: int = 30,
) -> Page:
    """The page of one trace: `trace` a traces-frame row (itertuples), `report` its reports-frame row or None."""
    role = str(trace.role)
    verdict = f" · {VERDICT_MARKS[text.verdict]} {text.verdict}" if text.verdict else ""
    about = f" · {text.title}" if text.title else ""
    headline = f"{text.path} {role}{about} · {trace.status}{verdict}"
    head = [line for line in (f"error: {_text(trace.error_message)}" if _text(trace.error_message) else "",) if line]
    brief = _brief(report) or ([f"task: {textwrap.shorten(_text(trace.task), 400, placeholder=' …')}"] if _text(trace.task) else [])
    result = head + (_report(report) or ([f"result: {_text(trace.result_summary)}"] if _text(trace.result_summary) else []))
    sections = (
        ("brief", tuple(brief or ["no brief"])),
        ("report", tuple(result or ["no report"])),
        ("verdicts", tuple(_verdicts(validations, trace.trace_id, paths) or ["not validated"])),
        ("goals", tuple(_goals(goals) or ["no goals"])),
        ("usage", tuple(_usage(trace, messages))),
        ("messages", tuple(_messages(messages, message_limit) or ["no messages"])),
    )
    return Page(trace_id=trace.trace_id, headline=headline, sections=sections)
