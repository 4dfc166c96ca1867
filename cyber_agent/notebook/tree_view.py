"""One tree view for runs: self-contained HTML and an inline script, in a notebook and in a shared file.

    view = TreeView(store, root_id)              # display it: the tree, a node's page, search
    TreeView(store, [root_a, root_b])            # a forest (a sweep's roots)
    TreeView(store, root_id, marks={tid: ["unsupported claim"]})   # badges on nodes ([evidence], [compare])
    export_html(store, root_id, "run.html")      # one file, no network: send it, open it anywhere

The view is data, not a widget: `to_html()` embeds the tree as JSON beside the script of
`cyber_agent/notebook/tree_view_js.py`, which draws only the rows on screen (so 10,000 rows
cost what 30 do), and a static outline (`<details>`, the first `STATIC_ROWS` rows) that shows
wherever scripts do not run (an untrusted notebook, GitHub). Nothing needs the kernel after
display, so a saved notebook reopens as it was — never "model not found". Each node carries
its path, role, status, verdict, title, own and subtree cost / tokens / LLM calls, its marks
(badges), and, up to `page_limit` nodes (breadth first), its page
(`cyber_agent/notebook/explorer_pages.py:trace_page`, without messages).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from cyber_agent.notebook.display import RichDisplay
from cyber_agent.notebook.explorer_pages import Page, _brief, _report, _usage, trace_page
from cyber_agent.notebook.frames import TraceFrames, to_frames
from cyber_agent.notebook.records import StoreSource, open_source
from cyber_agent.notebook.tree_labels import VERDICT_MARKS, TraceText, trace_texts
from cyber_agent.notebook.tree_view_js import TREE_CSS, TREE_JS
from cyber_agent.trace.bulk import gc_paused

__all__ = ["STATIC_ROWS", "TreeView", "export_html"]

STATIC_ROWS = 500
"""Rows of the static outline (what shows without scripts)."""


def _num(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if number != number else number  # NaN / NA → 0


def _verdict_lines(trace_id: str, rows: Sequence[Any], paths: Mapping[str, str]) -> list[str]:
    lines: list[str] = []
    seen: set[tuple[str, int]] = set()
    for v in rows:
        key = (str(v.validator_trace_id), int(_num(v.validation_index)))
        if key not in seen:
            seen.add(key)
            verdict = v.verdict if isinstance(v.verdict, str) else ""
            about = (f"of {paths.get(str(v.trace_id), str(v.trace_id))}" if v.validator_trace_id == trace_id
                     else f"by {paths.get(str(v.validator_trace_id), str(v.validator_trace_id))}")
            lines.append(f"validation {key[1] + 1} ({v.scope}) {about}: {VERDICT_MARKS.get(verdict, '')} {verdict}".rstrip())
        if isinstance(v.criterion, str):
            mark = VERDICT_MARKS.get(str(v.criterion_verdict), "")
            evidence = f" — {v.criterion_evidence}" if isinstance(v.criterion_evidence, str) and v.criterion_evidence else ""
            lines.append(f"  {mark} {v.criterion_verdict}: {v.criterion}{evidence}")
    return lines


def _goal_lines(rows: Sequence[Any]) -> list[str]:
    lines = []
    for g in rows:
        summary = f" → {g.summary}" if isinstance(g.summary, str) and g.summary else ""
        subs = f" [{g.n_sub_traces} sub-agents]" if _num(g.n_sub_traces) else ""
        lines.append(f"{'  ' * int(_num(g.depth))}{g.goal_id}. {g.description} ({g.status}){subs}{summary}")
    return lines


def _page(row: Any, text: TraceText, report: Any, checks: Sequence[Any], goals: Sequence[Any],
          paths: Mapping[str, str]) -> Page:
    """The sections of `cyber_agent/notebook/explorer_pages.py:trace_page` (without messages), from grouped rows."""
    role = str(row.role)
    verdict = f" · {VERDICT_MARKS[text.verdict]} {text.verdict}" if text.verdict else ""
    headline = f"{text.path} {role}{f' · {text.title}' if text.title else ''} · {row.status}{verdict}"
    error = [f"error: {row.error_message}"] if isinstance(row.error_message, str) and row.error_message else []
    task = row.task if isinstance(row.task, str) else ""
    result = row.result_summary if isinstance(row.result_summary, str) else ""
    brief = _brief(report) or ([f"task: {textwrap.shorten(task, 400, placeholder=' …')}"] if task else [])
    done = error + (_report(report) or ([f"result: {result}"] if result else []))
    sections = (
        ("brief", tuple(brief or ["no brief"])),
        ("report", tuple(done or ["no report"])),
        ("verdicts", tuple(_verdict_lines(row.trace_id, checks, paths) or ["not validated"])),
        ("goals", tuple(_goal_lines(goals) or ["no goals"])),
        ("usage", tuple(_usage(row, None))),
        ("messages", ("not in this view: TraceExplorer, or to_frames(..., messages=True), shows them",)),
    )
    return Page(trace_id=row.trace_id, headline=headline, sections=sections)


class TreeView(RichDisplay):
    """The trees under `root_ids` as one interactive HTML view (see the module docstring)."""

    @gc_paused()
    def __init__(self, source: StoreSource | TraceFrames, root_ids: str | Sequence[str], *,
                 marks: Mapping[str, Sequence[str]] | None = None, page_limit: int | None = 500) -> None:
        roots = [root_ids] if isinstance(root_ids, str) else list(root_ids)
        frames = source if isinstance(source, TraceFrames) else to_frames(open_source(source), roots, messages=False,
                                                                          events=False)
        self.frames = frames
        """The frames of the trees (no messages, no events)."""
        self.root_ids = roots
        traces = frames.traces.sort_values(["depth", "position"], kind="stable")
        self._texts: dict[str, TraceText] = {}
        for _, group in frames.traces.groupby("root_trace_id", sort=False):
            self._texts.update(trace_texts(group.sort_values("position", kind="stable"), frames.validations))
        usage = frames.usage.set_index("trace_id")["llm_calls"] if "llm_calls" in frames.usage else pd.Series(dtype=float)
        ids = traces["trace_id"].tolist()
        index = {trace_id: i for i, trace_id in enumerate(ids)}
        badges = {k: [str(b) for b in v] for k, v in (marks or {}).items()}
        self.nodes: list[dict[str, Any]] = []
        """One dict per trace, parents before children (breadth first): what the script draws."""
        self._rows = list(traces.itertuples(index=False))
        for row in self._rows:
            parent = row.parent_trace_id if isinstance(row.parent_trace_id, str) else None
            text = self._texts[row.trace_id]
            calls = _num(usage.get(row.trace_id)) or float(int(_num(row.total_messages)) // 2)
            own = [round(_num(row.total_cost), 6), int(_num(row.total_tokens)), int(calls)]
            self.nodes.append({
                "id": row.trace_id, "parent": index.get(parent) if parent else None, "depth": 0, "path": text.path,
                "role": str(row.role), "status": str(row.status), "verdict": text.verdict, "title": text.title,
                "own": own, "sub": [*own, 1], "badges": badges.get(row.trace_id, []),
            })
        for node in self.nodes:  # parents come first: depth from the parent's
            if node["parent"] is not None:
                node["depth"] = self.nodes[node["parent"]]["depth"] + 1
        for node in reversed(self.nodes):  # children come after: fold subtree totals upwards
            if node["parent"] is not None:
                up = self.nodes[node["parent"]]["sub"]
                for k in range(4):
                    up[k] += node["sub"][k]
        for node in self.nodes:
            node["sub"][0] = round(node["sub"][0], 6)
        self.page_limit = page_limit
        self._pages = self._build_pages(page_limit)

    def _build_pages(self, limit: int | None) -> dict[int, Page]:
        """Pages of the first `limit` nodes, from rows grouped once (a pandas filter per node costs ~40 ms)."""
        f = self.frames
        reports = {r.trace_id: r for r in f.reports.itertuples(index=False)}
        goals: dict[str, list[Any]] = {}
        for g in f.goals.sort_values("position", kind="stable").itertuples(index=False):
            goals.setdefault(g.trace_id, []).append(g)
        checks: dict[str, list[Any]] = {}
        for v in f.validations.itertuples(index=False):
            checks.setdefault(str(v.trace_id), []).append(v)
            if isinstance(v.validator_trace_id, str) and v.validator_trace_id != v.trace_id:
                checks.setdefault(v.validator_trace_id, []).append(v)
        paths = {t: text.path for t, text in self._texts.items()}
        pages: dict[int, Page] = {}
        for i, row in enumerate(self._rows[: limit if limit is not None else None]):
            pages[i] = _page(row, self._texts[row.trace_id], reports.get(row.trace_id), checks.get(row.trace_id, []),
                             goals.get(row.trace_id, []), paths)
        return pages

    # ---- reading ---------------------------------------------------------------------------
    def page(self, trace_id: str) -> Page:
        """The page of any trace of the view (built on demand beyond `page_limit`)."""
        for i, row in enumerate(self._rows):
            if row.trace_id == trace_id:
                if i not in self._pages:
                    f = self.frames
                    v = f.validations[(f.validations["trace_id"] == trace_id) | (f.validations["validator_trace_id"] == trace_id)]
                    reports = f.reports[f.reports["trace_id"] == trace_id]
                    self._pages[i] = trace_page(row, self._texts[trace_id],
                                                report=next(reports.itertuples(index=False), None), validations=v,
                                                goals=f.goals[f.goals["trace_id"] == trace_id],
                                                paths={t: x.path for t, x in self._texts.items()})
                return self._pages[i]
        raise KeyError(f"{trace_id!r} is not in this tree view (roots: {', '.join(self.root_ids)})")

    def find(self, text: str) -> list[str]:
        """Trace ids matching `text` in the script's order: exact path or id first, then substring matches."""
        needle = text.strip().lower()
        exact = [n["id"] for n in self.nodes if needle in (n["path"].lower(), n["id"].lower())]
        rest = [n["id"] for n in self.nodes if n["id"] not in exact and needle in " ".join(
            [n["path"], n["role"], n["title"], n["status"], n["verdict"] or "", n["id"], *n["badges"]]).lower()]
        return exact + rest if needle else []

    # ---- rendering -------------------------------------------------------------------------
    def data(self) -> dict[str, Any]:
        """What the script reads: roots (node indices), nodes, pages by node index, verdict marks."""
        roots = [i for i, n in enumerate(self.nodes) if n["parent"] is None]
        pages = {str(i): [p.headline, [[name, list(lines)] for name, lines in p.sections]] for i, p in self._pages.items()}
        return {"roots": roots, "nodes": self.nodes, "pages": pages, "marks": dict(VERDICT_MARKS)}

    def _static(self) -> str:
        """A nested <details> outline of the first `STATIC_ROWS` rows (depth first), for pages without scripts."""
        kids: dict[int | None, list[int]] = {}
        for i, n in enumerate(self.nodes):
            kids.setdefault(n["parent"], []).append(i)
        budget = [STATIC_ROWS]

        def item(i: int) -> str:
            budget[0] -= 1
            n = self.nodes[i]
            mark = f" {VERDICT_MARKS[n['verdict']]}" if n["verdict"] else ""
            label = html.escape(f"{n['path']} {n['role']}{mark} · {n['title']} · {n['status']} · "
                                f"${n['own'][0]:.4f} own, ${n['sub'][0]:.4f} subtree, {n['sub'][3]} traces")
            below = [c for c in kids.get(i, [])]
            if not below:
                return f"<li>{label}</li>"
            inner = "".join(item(c) for c in below if budget[0] > 0)
            more = "" if budget[0] > 0 else "<li>…</li>"
            return f"<li><details{' open' if n['depth'] == 0 else ''}><summary>{label}</summary><ul>{inner}{more}</ul></details></li>"

        return "<ul>" + "".join(item(r) for r in kids.get(None, []) if budget[0] > 0) + "</ul>"

    def to_html(self) -> str:
        """The view as an HTML fragment: data, script and static outline (no random ids: a hash of the data)."""
        payload = json.dumps(self.data(), ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
        box = "ca-tree-" + hashlib.sha1(payload.encode()).hexdigest()[:12]
        return (f'<div class="ca-tree-box" id="{box}"><style>{TREE_CSS}</style>'
                f'<div class="ca-static">{self._static()}</div>'
                f'<script type="application/json" class="ca-data">{payload}</script>'
                f'<script data-box="{box}">{TREE_JS}</script></div>')

    def to_document(self, title: str | None = None) -> str:
        """A whole HTML page holding the view (what `export_html` writes)."""
        name = html.escape(title or f"cyber_agent run {', '.join(self.root_ids)}")
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{name}</title></head>'
                f"<body><h2>{name}</h2>{self.budget_html()}{self.to_html()}</body></html>\n")

    def budget_html(self) -> str:
        """A line per root: traces, cost, tokens and LLM calls of its whole tree."""
        lines = []
        for n in self.nodes:
            if n["parent"] is None:
                cost, tokens, calls, count = n["sub"]
                lines.append(f"<li>{html.escape(n['id'])}: {count} traces · ${cost:.4f} · {tokens:,} tokens · "
                             f"{calls:,} LLM calls · {html.escape(n['status'])}</li>")
        return f'<ul class="ca-budget">{"".join(lines)}</ul>'

    def __repr__(self) -> str:
        return f"TreeView(roots={len(self.root_ids)}, traces={len(self.nodes)}, pages={len(self._pages)})"

    def to_text(self) -> str:
        """One line per root with its subtree totals."""
        lines = [repr(self)]
        for n in self.nodes:
            if n["parent"] is None:
                cost, tokens, calls, count = n["sub"]
                lines.append(f"  {n['id']}: {count} traces · ${cost:.4f} · {tokens:,} tokens · {calls:,} LLM calls")
        return "\n".join(lines)


def export_html(source: StoreSource | TraceFrames, root_id: str | Sequence[str], path: str | os.PathLike[str], *,
                marks: Mapping[str, Sequence[str]] | None = None) -> Path:
    """Write one self-contained HTML file (no network, no server): the tree view, every node's page, the budget."""
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(f"{str(path)!r} is a folder; give a file name, e.g. {str(target / 'run.html')!r}")
    view = TreeView(source, root_id, marks=marks, page_limit=None)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(view.to_document(), encoding="utf-8")
    return target
