"""Names of the nodes of a trace tree: a unique path, what the agent handled, the verdicts.

Every trace gets a **path**: the root is `root`, its agents `1`, `2`, … in creation order, their
agents `1.1`, `1.2`, …, and the validators of a trace `v1`, `v2`, … after its path (`1.3.v2`
is the second validator of the third agent of the first agent). A path is unique in its tree
and its dots are the depth. Beside it, a **title**: what the agent was asked to do (its
`TaskBrief.objective`, or its task), cut down to the words that tell it apart from its
siblings — four explore agents asked "Compute the revenue (units × unit_price) of region
East in data/sales.csv", "… North …" become `region East`, `region North`.

Verdicts come from the validations frame: a validator's own verdict with the criteria it passed
(`2/3 criteria`), and for a judged trace the verdict of its latest validation.
"""

from __future__ import annotations

import textwrap
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

__all__ = [
    "TraceText",
    "VERDICT_MARKS",
    "distinct_titles",
    "trace_objective",
    "trace_paths",
    "trace_texts",
]

VerdictName = Literal["pass", "fail", "unknown"]
VERDICT_MARKS: dict[str, str] = {"pass": "✓", "fail": "✗", "unknown": "?"}
"""The mark printed before a verdict in labels."""
_STOPWORDS = frozenset({"a", "an", "the", "of", "in", "for", "to", "and", "or", "on", "at", "by", "with", "from"})
TITLE_WIDTH = 30
"""Longest title (characters) in a node label."""


@dataclass(frozen=True, kw_only=True)
class TraceText:
    """What a trace tree says about one trace."""

    path: str
    """Unique position in the tree: `root`, `1.3`, `1.3.v2`."""
    title: str
    """The objective cut to what tells the trace apart from its siblings ("" when it has none)."""
    objective: str
    """The whole objective (or task) the trace was given."""
    verdict: VerdictName | None
    """A validator's verdict; for a judged trace the verdict of its latest validation; else None."""
    checks: str
    """A validator's criteria count, e.g. `2/3 criteria` passed ("" otherwise)."""

    def headline(self, role: str) -> str:
        """`main` for the root, `1.3 explore` (with the mark of its latest verdict: `1.3 explore ✓`), `1.3.v2` for a validator."""
        if role == "validator":
            return self.path
        head = role if self.path == "root" else f"{self.path} {role}"
        return f"{head} {VERDICT_MARKS[self.verdict]}" if self.verdict else head

    def detail(self, role: str) -> str:
        """The second line of a label: a validator's verdict and criteria (`✗ fail · 0/1 criteria`), else the title."""
        if role != "validator":
            return self.title
        parts = [f"{VERDICT_MARKS[self.verdict]} {self.verdict}" if self.verdict else "no verdict"]
        if self.checks:
            parts.append(self.checks)
        return " · ".join(parts)


def trace_objective(task: object, protocol: object) -> str:
    """The objective of a trace: its typed brief's (a child), else its task's first line that is not a heading.

    A brief's rendered text is never parsed back: a child's objective comes from `protocol.brief`.
    """
    if isinstance(protocol, dict) or isinstance(protocol, Mapping):  # a dict first: the ABC check is slow
        brief = protocol.get("brief")
        if (isinstance(brief, dict) or isinstance(brief, Mapping)) and isinstance(brief.get("objective"), str):
            return " ".join(str(brief["objective"]).split())
    if not isinstance(task, str):
        return ""
    first = None  # the first line with text, if every one is a heading
    for line in task.splitlines():
        line = line.strip()
        if line:
            if not line.startswith("#"):
                return line
            if first is None:
                first = line
    return first.lstrip("# ").strip() if first is not None else ""


def _shorten(text: str, width: int) -> str:
    # textwrap.shorten collapses whitespace, then returns what fits whole: check that first (100k titles).
    collapsed = " ".join(text.split())
    if len(collapsed) <= width:
        return collapsed
    return textwrap.shorten(text, width, placeholder=" …") if text else ""


def distinct_titles(texts: Sequence[str], width: int = TITLE_WIDTH) -> list[str]:
    """Cut sibling texts to the words that differ (a single differing word keeps the word before it, unless that is a stopword); each at most `width`."""
    words = [text.rstrip(".").split() for text in texts]
    if len(words) < 2 or len({tuple(w) for w in words}) < 2:
        return [_shorten(" ".join(w), width) for w in words]
    prefix = 0
    while all(len(w) > prefix for w in words) and len({w[prefix] for w in words}) == 1:
        prefix += 1
    suffix = 0
    while (all(len(w) > prefix + suffix for w in words)
           and len({w[len(w) - 1 - suffix] for w in words}) == 1):
        suffix += 1
    out = []
    for w in words:
        start, end = prefix, len(w) - suffix
        middle = w[start:end]
        if len(middle) == 1 and start > 0 and w[start - 1].lower() not in _STOPWORDS:
            start -= 1
        out.append(_shorten(" ".join(w[start:end]) or " ".join(w), width))
    return out


def trace_paths(traces: pd.DataFrame) -> dict[str, str]:
    """Path of every trace of a traces (or usage) frame: needs `trace_id`, a parent column and `role`.

    Rows are taken in frame order (parents first, siblings in creation order, as every frame is);
    a trace whose parent is not in the frame starts its own numbering as a root.
    """
    parent_column = "parent_trace_id" if "parent_trace_id" in traces.columns else "parent"
    paths: dict[str, str] = {}
    counts: dict[str, list[int]] = {}  # parent -> [agents numbered, validators numbered]
    ids, parents, roles = traces["trace_id"].tolist(), traces[parent_column].tolist(), traces["role"].tolist()
    for trace_id, parent, role in zip(ids, parents, roles):
        if not isinstance(parent, str) or parent not in paths:
            paths[trace_id] = "root"
            continue
        seen = counts.setdefault(parent, [0, 0])
        base = "" if paths[parent] == "root" else f"{paths[parent]}."
        if role == "validator":
            seen[1] += 1
            paths[trace_id] = f"{base}v{seen[1]}"
        else:
            seen[0] += 1
            paths[trace_id] = f"{base}{seen[0]}"
    return paths


def _verdicts(validations: pd.DataFrame) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """(validator id -> (verdict, `k/n criteria`), judged trace id -> verdict of its latest validation).

    Plain loops over the columns: a groupby over hundreds of validators costs seconds.
    """
    own: dict[str, list[Any]] = {}  # validator -> [verdict, criteria passed, criteria judged]
    latest: dict[str, tuple[int, str]] = {}
    for target, validator, index, verdict, criterion in zip(
            validations["trace_id"].tolist(), validations["validator_trace_id"].tolist(), validations["validation_index"].tolist(),
            validations["verdict"].tolist(), validations["criterion_verdict"].tolist()):
        if not isinstance(verdict, str):
            continue
        if isinstance(validator, str):
            entry = own.setdefault(validator, [verdict, 0, 0])
            if isinstance(criterion, str):
                entry[1] += criterion == "pass"
                entry[2] += 1
        if target not in latest or int(index) >= latest[target][0]:
            latest[target] = (int(index), verdict)
    checks = {v: (str(e[0]), f"{e[1]}/{e[2]} criteria" if e[2] else "") for v, e in own.items()}
    return checks, {target: verdict for target, (_, verdict) in latest.items()}


def trace_texts(traces: pd.DataFrame, validations: pd.DataFrame | None = None) -> dict[str, TraceText]:
    """A `TraceText` for every row of a traces frame (`to_frames(...).traces`), verdicts from `validations`."""
    paths = trace_paths(traces)
    own, latest = _verdicts(validations) if validations is not None else ({}, {})
    ids, parents, roles = traces["trace_id"].tolist(), traces["parent_trace_id"].tolist(), traces["role"].tolist()
    objectives = {trace_id: trace_objective(task, protocol)
                  for trace_id, task, protocol in zip(ids, traces["task"].tolist(), traces["protocol"].tolist())}
    siblings: dict[Hashable, list[str]] = {}
    for trace_id, parent, role in zip(ids, parents, roles):
        if role != "validator":
            siblings.setdefault(parent if isinstance(parent, str) else None, []).append(trace_id)
    titles: dict[str, str] = {}
    for group in siblings.values():
        titles.update(zip(group, distinct_titles([objectives[t] for t in group])))
    out: dict[str, TraceText] = {}
    for trace_id, role in zip(ids, roles):
        verdict: Any
        if role == "validator":
            verdict, checks = own.get(trace_id, (None, ""))
        else:
            verdict, checks = latest.get(trace_id), ""
        out[trace_id] = TraceText(path=paths[trace_id], title=titles.get(trace_id, ""), objective=objectives[trace_id],
                                  verdict=verdict if verdict in VERDICT_MARKS else None, checks=checks)
    return out
