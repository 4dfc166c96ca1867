"""TraceExplorer: a trace tree you open a branch at a time, and a page per trace (SPEC J2, J4).

    explorer = TraceExplorer(store, root_trace_id)    # display it: the tree view, and the selected trace's page
    explorer.select(trace_id)                         # or click a row of the tree view
    explorer.expand(); explorer.collapse(); explorer.find("region West")

Opening reads the tree once without messages or events (`to_frames(..., messages=False,
events=False)`). The explorer's state is plain Python: which traces are expanded, which one
is selected, and its rows (`▸ 1.3 explore ✓ · region West  (+24: 2 failed, 3 ✗)`: toggle, path,
role, verdict mark, title and, while collapsed, what lies below), built only for the traces
shown. Selecting a trace gives its page (`cyber_agent/notebook/explorer_pages.py:trace_page`):
brief, report and review, verdicts, goals, usage and messages; messages are read from the store
for that trace only, on first selection.

Displayed, it is HTML and no widget: the tree view (`cyber_agent/notebook/tree_view.py:TreeView`,
interactive in the browser — expand, search, a node's page — and a static outline where scripts
do not run), the selected trace's page with its messages, and the rows as opened from Python,
each in a `<details>`. Code that moves the explorer later (`select`, `find`, `expand`) updates the
output it is shown in. A saved notebook reopens as it was, never "model not found".
"""

from __future__ import annotations

import html

from cyber_agent.errors import TraceNotFoundError
from cyber_agent.notebook.bridge import run_sync
from cyber_agent.notebook.display import UpdatingDisplay
from cyber_agent.notebook.explorer_pages import Page, trace_page
from cyber_agent.notebook.frames import TraceFrames
from cyber_agent.notebook.records import StoreSource, open_source
from cyber_agent.notebook.tree_labels import VERDICT_MARKS
from cyber_agent.notebook.tree_view import TreeView
from cyber_agent.notebook.trees import tree_frames
from cyber_agent.trace.bulk import gc_paused
from cyber_agent.trace.models import Message

__all__ = ["TraceExplorer"]

_INDENT = "\u00a0\u00a0\u00a0"  # no-break spaces: HTML keeps them, plain spaces collapse


class TraceExplorer(UpdatingDisplay):
    """The tree of `root_trace_id` as expandable rows, the selected trace's page, shown as the tree view and that page."""

    @gc_paused()  # thousands of rows and dicts: see cyber_agent/trace/bulk.py
    def __init__(self, source: StoreSource | TraceFrames, root_trace_id: str, *, message_limit: int = 30) -> None:
        self._reader = None if isinstance(source, TraceFrames) else open_source(source)
        frames, texts = tree_frames(source if self._reader is None else self._reader, root_trace_id)
        self.frames = frames
        """The tree's frames (no messages unless the source had them)."""
        self.root_trace_id = root_trace_id
        self.message_limit = message_limit
        traces = self.frames.traces.sort_values("position", kind="stable")
        self.texts = texts
        """Path, title and verdict of every trace (`cyber_agent/notebook/tree_labels.py:TraceText`), paths of the whole tree."""
        root_path = texts[root_trace_id].path
        self._base_depth = 0 if root_path == "root" else root_path.count(".") + 1
        self._rows = {row.trace_id: row for row in traces.itertuples(index=False)}
        self._reports = {row.trace_id: row for row in self.frames.reports.itertuples(index=False)}
        self._children: dict[str, list[str]] = {}
        for trace_id, parent in zip(traces["trace_id"].tolist(), traces["parent_trace_id"].tolist()):
            if isinstance(parent, str) and parent in self._rows and trace_id != root_trace_id:
                self._children.setdefault(parent, []).append(trace_id)
        self._below = self._subtree_counts()
        self._messages: dict[str, list[Message]] = {}
        self.expanded: set[str] = {root_trace_id}
        """Traces whose children are shown."""
        self._selected = root_trace_id
        self.status = ""
        """What the last action did (`12 of 1000 traces shown · 2.1 selected`, `found ...`, `nothing matches ...`)."""
        self._view_html: str | None = None  # the tree view's HTML, built on first display
        self._refresh(select=root_trace_id)

    # ---- the tree ------------------------------------------------------------------------
    def _subtree_counts(self) -> dict[str, tuple[int, int, int]]:
        """(traces below, failed or stopped below, fail verdicts below) of every trace."""
        counts: dict[str, tuple[int, int, int]] = {}
        order: list[str] = list(self._rows)
        for trace_id in reversed(order):  # children come after their parent in frame order
            below, bad, rejected = 0, 0, 0
            for child in self._children.get(trace_id, []):
                n, b, r = counts[child]
                row = self._rows[child]
                below += n + 1
                bad += b + (row.status in ("failed", "stopped"))
                rejected += r + (self.texts[child].verdict == "fail" and row.role == "validator")
            counts[trace_id] = (below, bad, rejected)
        return counts

    @property
    def visible(self) -> list[str]:
        """The trace ids shown, in tree order."""
        out: list[str] = []
        stack = [self.root_trace_id]
        while stack:
            trace_id = stack.pop()
            out.append(trace_id)
            if trace_id in self.expanded:
                stack.extend(reversed(self._children.get(trace_id, [])))
        return out

    def _row_text(self, trace_id: str) -> str:
        text, row = self.texts[trace_id], self._rows[trace_id]
        role = str(row.role)
        depth = (0 if text.path == "root" else text.path.count(".") + 1) - self._base_depth
        has_children = bool(self._children.get(trace_id))
        toggle = ("▾" if trace_id in self.expanded else "▸") if has_children else "·"
        head = text.headline(role) if role != "validator" else f"{text.path} validator"
        detail = text.detail(role)
        line = f"{_INDENT * depth}{toggle} {head}{f' · {detail}' if detail else ''}"
        if row.status != "completed":
            line += f" [{row.status}]"
        below, bad, rejected = self._below[trace_id]
        if has_children and trace_id not in self.expanded:
            notes = [f"{n} {word}" for n, word in ((bad, "failed/stopped"), (rejected, VERDICT_MARKS["fail"])) if n]
            line += f"  (+{below}{': ' + ', '.join(notes) if notes else ''})"
        return line

    def _refresh(self, select: str | None = None) -> None:
        """Rebuild the rows of the visible traces and keep (or set) the selection."""
        wanted = select or self.selected or self.root_trace_id
        visible = self.visible
        self.rows = [(self._row_text(t), t) for t in visible]
        """(row text, trace id) of every trace shown, in tree order (indented with no-break spaces)."""
        self._selected = wanted if wanted in set(visible) else self.root_trace_id
        self.status = f"{len(self.rows)} of {len(self._rows)} traces shown · {self.texts[self._selected].path} selected"
        self._changed()

    def _require(self, trace_id: str | None) -> str:
        trace_id = trace_id or self.selected or self.root_trace_id
        if trace_id not in self._rows:
            raise TraceNotFoundError(trace_id)
        return trace_id

    @property
    def selected(self) -> str:
        """The trace whose page is shown."""
        return self._selected

    def children(self, trace_id: str | None = None) -> list[str]:
        """The child traces (agents and validators) of `trace_id` (default: the selected trace), in creation order."""
        return list(self._children.get(self._require(trace_id), []))

    def expand(self, trace_id: str | None = None) -> None:
        """Show the children of `trace_id` (default: the selected trace)."""
        trace_id = self._require(trace_id)
        if self._children.get(trace_id):
            self.expanded.add(trace_id)
            self._refresh()

    def collapse(self, trace_id: str | None = None) -> None:
        """Hide everything below `trace_id` (default: the selected trace); a hidden selection moves up to it."""
        trace_id = self._require(trace_id)
        self.expanded.discard(trace_id)
        self._refresh(select=self.selected if self.selected in set(self.visible) else trace_id)

    def toggle(self, trace_id: str | None = None) -> None:
        """Expand a collapsed trace, collapse an expanded one."""
        trace_id = self._require(trace_id)
        (self.collapse if trace_id in self.expanded else self.expand)(trace_id)

    def expand_all(self, trace_id: str | None = None) -> None:
        """Expand `trace_id` (default: the selected trace) and everything below it."""
        stack = [self._require(trace_id)]
        while stack:
            current = stack.pop()
            if self._children.get(current):
                self.expanded.add(current)
                stack.extend(self._children[current])
        self._refresh()

    def collapse_all(self) -> None:
        """Show only the root and its children."""
        self.expanded = {self.root_trace_id}
        self._refresh(select=self.root_trace_id)

    def select(self, trace_id: str) -> None:
        """Show `trace_id`'s page, expanding its ancestors so its row is visible."""
        trace_id = self._require(trace_id)
        parent = self._rows[trace_id].parent_trace_id
        while isinstance(parent, str) and parent in self._rows:
            self.expanded.add(parent)
            parent = self._rows[parent].parent_trace_id
        self._refresh(select=trace_id)

    def find(self, text: str) -> str | None:
        """Select the trace whose path or id is `text`; else the next one after the selected trace (tree order,
        wrapping) whose path, title, objective, role, status, verdict or id contains it (call again: the next match)."""
        needle = text.strip().lower()
        if not needle:
            return None
        exact = next((t for t in self._rows if needle in (self.texts[t].path.lower(), t.lower())), None)
        if exact is not None and exact != self.selected:  # "1.2" is that trace, not the first row containing "1.2"
            self.select(exact)
            self.status = f"found {text!r}: {self.texts[exact].path}"
            self._changed()
            return str(exact)
        order = list(self._rows)
        start = order.index(self.selected) + 1 if self.selected in self._rows else 0
        for trace_id in order[start:] + order[:start]:
            text_of = self.texts[trace_id]
            haystack = " ".join((text_of.path, text_of.title, text_of.objective, str(self._rows[trace_id].role),
                                 str(self._rows[trace_id].status), text_of.verdict or "", trace_id)).lower()
            if needle in haystack:
                self.select(trace_id)
                self.status = f"found {text!r}: {text_of.path}"
                self._changed()
                return str(trace_id)
        self.status = f"nothing matches {text!r}"
        self._changed()
        return None

    def to_parent(self) -> None:
        """Select the parent of the selected trace (at the root, nothing moves)."""
        parent = self._rows[self._require(None)].parent_trace_id
        if isinstance(parent, str) and parent in self._rows:
            self.select(parent)

    # ---- the page ------------------------------------------------------------------------
    def messages_of(self, trace_id: str) -> list[Message] | None:
        """The main-path messages of a trace, read from the store once (None when the source has none)."""
        if trace_id not in self._messages:
            if self._reader is None:
                return None
            reader = self._reader
            self._messages[trace_id] = run_sync(reader.get_main_path_messages(trace_id))
        return self._messages[trace_id]

    def page_of(self, trace_id: str | None = None) -> Page:
        """The page of a trace (default: the selected one)."""
        trace_id = self._require(trace_id)
        goals = self.frames.goals[self.frames.goals["trace_id"] == trace_id]
        paths = {t: text.path for t, text in self.texts.items()}
        return trace_page(self._rows[trace_id], self.texts[trace_id], report=self._reports.get(trace_id),
                          validations=self.frames.validations, goals=goals, paths=paths,
                          messages=self.messages_of(trace_id), message_limit=self.message_limit)

    # ---- display ------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"TraceExplorer(root={self.root_trace_id!r}, traces={len(self._rows)}, shown={len(self.rows)})"

    def to_text(self) -> str:
        """The visible rows, then the selected trace's page."""
        rows = [label.replace("\u00a0", " ") for label, _ in self.rows]
        return "\n".join([repr(self), *rows, "", self.page_of().to_text()])

    def tree_view(self) -> TreeView:
        """The tree as the toolkit's tree view (interactive in the browser, an outline without scripts)."""
        return TreeView(self.frames, self.root_trace_id)

    def to_html(self) -> str:
        """The tree view, the selected page (with messages) and the rows opened from Python: what a saved notebook shows."""
        if self._view_html is None:
            self._view_html = self.tree_view().to_html()
        rows = "".join(f"<div>{html.escape(label)}</div>" for label, _ in self.rows)
        path = self.texts[self._selected].path
        return (f'<div class="cyber-agent-explorer">{self._view_html}'
                f'<details open class="cyber-agent-explorer-body"><summary><b>{html.escape(path)}</b> — the selected '
                f"trace's page, with its messages ({html.escape(self.status)})</summary>{self.page_of().to_html()}</details>"
                f'<details class="cyber-agent-explorer-static"><summary>{len(self.rows)} rows as opened from Python'
                f'</summary><div style="font-family:monospace;white-space:pre">{rows}</div></details></div>')

