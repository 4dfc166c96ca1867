"""One tree view for runs: self-contained HTML and an inline script, in a notebook and in a shared file.

    view = TreeView(store, root_id)              # display it: the tree, a node's page, search
    TreeView(store, [root_a, root_b])            # a forest (a sweep's roots)
    TreeView(store, root_id, marks={tid: ["unsupported claim"]})   # badges on nodes ([evidence])
    TreeView(store, root_id, highlight=await explain(store, root_id))   # the chain to the first failure
    tree_view_compare((store, root_a), (other, root_b))                 # two trees, differences coloured
    export_html(store, root_id, "run.html")      # one file, no network: send it, open it anywhere
    live_tree(handle)                            # a running launch, re-read on a timer (tree_view_live.py)

The view is data, not a widget: `to_html()` embeds the tree as compact column-wise JSON beside
the script of `cyber_agent/notebook/tree_view_js.py`, which builds the rows of the expanded levels
only and keeps only those on screen in the DOM (so 100,000 traces cost what 30 do), and a static
outline (`<details>`, the first `STATIC_ROWS` rows) that shows wherever scripts do not run (an
untrusted notebook, GitHub). Node pages (brief, report, verdicts, goals, usage, the last
messages) sit in a second JSON block the script parses on the first click. Nothing needs the
kernel after display, so a saved notebook reopens as it was — never "model not found".

The tree is read straight from the store's records (`TraceReader.read_records`, no messages),
not through pandas: the first paint of 10,000 traces must stay under a second. Pages are built,
and their messages read, for the first `page_limit` nodes (breadth first) only; `export_html`
builds every page; in a kernel a click fetches any other (`cyber_agent/notebook/tree_view_pages.py`).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
from collections import namedtuple
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from cyber_agent.notebook.bridge import run_sync
from cyber_agent.notebook.display import RichDisplay
from cyber_agent.notebook.explorer_pages import Page, _brief, _messages, _report, _usage
from cyber_agent.notebook import frame_rows, protocol_rows
from cyber_agent.notebook.frames import TraceFrames
from cyber_agent.notebook.records import StoreSource, TraceRecord, open_source
from cyber_agent.notebook.tree_compare_view import TreeCompareView, tree_view_compare  # re-exported
from cyber_agent.notebook.tree_columns import VIEW_FIELDS, _columns_from_frames, _columns_from_records, _num, _subtree_totals
from cyber_agent.notebook.tree_labels import VERDICT_MARKS, TraceText
from cyber_agent.notebook.tree_view_js import TREE_CSS, TREE_JS
from cyber_agent.notebook.tree_view_pages import KERNEL_JS, fetch_attrs
from cyber_agent.trace.bulk import gc_paused
from cyber_agent.trace.models import Message
from cyber_agent.trace.protocols import TraceReader

__all__ = [
    "HIGHLIGHT_KINDS", "PAGE_LIMIT", "STATIC_ROWS", "VIEW_FIELDS", "TreeCompareView", "TreeView", "atree_view",
    "export_html", "tree_view_compare", "write_document",
]

STATIC_ROWS = 500
"""Rows of the static outline (what shows without scripts)."""
PAGE_LIMIT = 200
"""Nodes (breadth first) whose page a notebook view embeds by default (`export_html` embeds all)."""
MESSAGES_PER_PAGE = 20
"""Last messages shown on a node's page (`messages=` changes it; 0 reads none)."""
HIGHLIGHT_KINDS: dict[str, str] = {
    "fail": "went wrong here (explain)",
    "path": "on the path to the first failure (explain)",
    "deleted": "only in tree a (deleted)",
    "inserted": "only in tree b (inserted)",
    "relabelled": "same node, changed brief (relabelled)",
    "changed": "matched, outcome / status / verdict changed",
}
"""Highlight kinds the script colours, with the legend's words."""
_VERDICTS = ("", "pass", "fail", "unknown")


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _page(row: Any, text: TraceText, report: Any, checks: Sequence[Any], goals: Sequence[Any],
          paths: Mapping[str, str], messages: Sequence[Message] | None, limit: int) -> Page:
    """The sections of `cyber_agent/notebook/explorer_pages.py:trace_page`, from rows grouped once."""
    role = str(row.role)
    verdict = f" · {VERDICT_MARKS[text.verdict]} {text.verdict}" if text.verdict else ""
    headline = f"{text.path} {role}{f' · {text.title}' if text.title else ''} · {row.status}{verdict}"
    error = [f"error: {row.error_message}"] if _str(row.error_message) else []
    task, result = _str(row.task), _str(row.result_summary)
    brief = _brief(report) or ([f"task: {task if len(task) <= 400 else task[:400].rsplit(' ', 1)[0] + ' …'}"] if task else [])
    done = error + (_report(report) or ([f"result: {result}"] if result else []))
    shown = (_messages(messages, limit) or ["no messages"]) if messages is not None else \
        ["not read for this view (pages beyond page_limit, or messages=0); export_html reads them"]
    sections = (
        ("brief", tuple(brief or ["no brief"])),
        ("report", tuple(done or ["no report"])),
        ("verdicts", tuple(_verdict_lines(row.trace_id, checks, paths) or ["not validated"])),
        ("goals", tuple(_goal_lines(goals) or ["no goals"])),
        ("usage", tuple(_usage(row, messages))),
        ("messages", tuple(shown)),
    )
    return Page(trace_id=row.trace_id, headline=headline, sections=sections)


def _verdict_lines(trace_id: str, rows: Sequence[Any], paths: Mapping[str, str]) -> list[str]:
    lines: list[str] = []
    seen: set[tuple[str, int]] = set()
    for v in rows:
        # An evidence check runs no validator trace: its validator id is missing (NA or None).
        validator = v.validator_trace_id if isinstance(v.validator_trace_id, str) else None
        key = (validator or "", int(_num(v.validation_index)))
        if key not in seen:
            seen.add(key)
            verdict = _str(v.verdict)
            about = (f"of {paths.get(str(v.trace_id), str(v.trace_id))}" if validator == trace_id
                     else f"by {paths.get(validator, validator)}" if validator else "by the evidence check")
            lines.append(f"validation {key[1] + 1} ({v.scope}) {about}: {VERDICT_MARKS.get(verdict, '')} {verdict}".rstrip())
        if isinstance(v.criterion, str):
            mark = VERDICT_MARKS.get(str(v.criterion_verdict), "")
            evidence = f" — {v.criterion_evidence}" if _str(v.criterion_evidence) else ""
            lines.append(f"  {mark} {v.criterion_verdict}: {v.criterion}{evidence}")
    return lines


def _goal_lines(rows: Sequence[Any]) -> list[str]:
    lines = []
    for g in rows:
        summary = f" → {g.summary}" if _str(g.summary) else ""
        subs = f" [{g.n_sub_traces} sub-agents]" if _num(g.n_sub_traces) else ""
        lines.append(f"{'  ' * int(_num(g.depth))}{g.goal_id}. {g.description} ({g.status}){subs}{summary}")
    return lines


def _rows(columns: Mapping[str, list[Any]]) -> list[Any]:
    """Rows (named tuples) of column lists, read like a frame's `itertuples`."""
    names = list(columns)
    if not names:
        return []
    row = namedtuple("_Row", names, rename=True)  # type: ignore[misc]  # noqa: PYI024 - field names come from SCHEMAS
    return [row(*values) for values in zip(*columns.values())]


def _pages(traces: Sequence[Any], reports: Sequence[Any], goals_rows: Sequence[Any], validations: Sequence[Any],
           texts: Mapping[str, TraceText], paths: Mapping[str, str], messages: Mapping[str, Sequence[Any]] | None,
           limit: int) -> dict[str, Page]:
    """Pages of the traces in `texts`, from rows grouped once (a pandas filter per node costs ~40 ms)."""
    by_report = {r.trace_id: r for r in reports}
    goals: dict[str, list[Any]] = {}
    for g in sorted(goals_rows, key=lambda g: int(_num(g.position))):
        goals.setdefault(g.trace_id, []).append(g)
    checks: dict[str, list[Any]] = {}
    for v in validations:
        checks.setdefault(str(v.trace_id), []).append(v)
        if isinstance(v.validator_trace_id, str) and v.validator_trace_id != v.trace_id:
            checks.setdefault(v.validator_trace_id, []).append(v)
    pages: dict[str, Page] = {}
    for row in traces:
        if row.trace_id in texts and row.trace_id not in pages:
            pages[row.trace_id] = _page(row, texts[row.trace_id], by_report.get(row.trace_id), checks.get(row.trace_id, []),
                                        goals.get(row.trace_id, []), paths,
                                        None if messages is None else messages.get(row.trace_id, []), limit)
    return pages


def _record_tables(records: Sequence[TraceRecord]) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """Trace, report, goal and validation rows of `records` (the frames' columns, without pandas)."""
    index = frame_rows.TreeIndex(records)
    return (_rows(frame_rows.trace_rows(records, index, _PAGE_COLUMNS["traces"])),
            _rows(protocol_rows.report_rows(records, index, _PAGE_COLUMNS["reports"])),
            _rows(frame_rows.goal_rows(records, _PAGE_COLUMNS["goals"])),
            _rows(protocol_rows.validation_rows(records, _PAGE_COLUMNS["validations"])))


_PAGE_COLUMNS: dict[str, list[str]] = {  # what a page reads of each frame's rows (`_page`, explorer_pages' helpers)
    "traces": ["trace_id", "role", "status", "error_message", "task", "result_summary", "total_tokens",
               "total_prompt_tokens", "total_completion_tokens", "total_cost", "total_messages", "duration_seconds",
               "model"],
    "reports": ["trace_id", "brief", "outcome", "summary", "outputs", "evidence", "open_issues", "review_decision",
                "review_feedback"],
    "goals": ["trace_id", "goal_id", "depth", "position", "description", "status", "n_sub_traces", "summary"],
    "validations": ["trace_id", "validator_trace_id", "validation_index", "scope", "verdict", "criterion",
                    "criterion_verdict", "criterion_evidence"],
}


async def _read(store: TraceReader, roots: Sequence[str], *, whole: bool = False) -> list[TraceRecord]:
    """The trees' records: every field and goal tree when `whole` (every page is built), else `VIEW_FIELDS`."""
    if whole:
        return await store.read_records(list(roots), messages=False, events=False)
    return await store.read_records(list(roots), messages=False, events=False, goals=False, fields=VIEW_FIELDS)


async def atree_view(source: StoreSource, root_ids: str | Sequence[str], **options: Any) -> TreeView:
    """`TreeView(source, root_ids, **options)` read with `await` (from async code or the toolkit's background loop)."""
    store = open_source(source)
    roots = [root_ids] if isinstance(root_ids, str) else list(root_ids)
    whole = options.get("page_limit", PAGE_LIMIT) is None
    records = await _read(store, roots, whole=whole)
    with gc_paused():
        view = TreeView(records, roots, _pages_later=True, **options)
    view._store, view._projected = store, not whole
    await view._afill_pages()
    return view


async def _read_messages(store: TraceReader, ids: Sequence[str]) -> dict[str, list[Message]]:
    # One pause for all reads: a store read that pauses the collector itself re-enables it on
    # leaving, and the next allocation then walks every record loaded (37 ms per page at 10k traces).
    with gc_paused():
        return {trace_id: await store.get_trace_messages(trace_id) for trace_id in ids}


async def _read_page_inputs(store: TraceReader, record_ids: Sequence[str], message_ids: Sequence[str] | None,
                            ) -> tuple[list[TraceRecord] | None, dict[str, list[Message]] | None]:
    """The whole records of `record_ids` (None when empty) and the messages of `message_ids` (None: not read)."""
    with gc_paused():  # one pause for both reads (see `_read_messages`)
        records = await store.read_records(list(record_ids), messages=False, events=False, subtrees=False) \
            if record_ids else None
        return records, (await _read_messages(store, message_ids) if message_ids else None)


Highlight = Any
"""An `explain` Attribution, a `compare_trees` frame, a {trace_id: kind} mapping, or a list of these."""


class TreeView(RichDisplay):
    """The trees under `root_ids` as one interactive HTML view (see the module docstring).

    `source`: a store (or store URL, directory, export file), loaded `TraceFrames`, or the records
    of `read_records`. `marks`: badges by trace id. `highlight`: an `explain` result (the chain
    from the root to the first failing node), a `compare_trees` frame (`side` "a" or "b": which
    tree of it this view shows; found from the ids when None) or {trace_id: kind} with kinds of
    `HIGHLIGHT_KINDS`, or a list of these. `page_limit`: nodes (breadth first) whose page is
    embedded (None: all); `messages`: last messages read per page (0: none).
    """

    @gc_paused()
    def __init__(self, source: StoreSource | TraceFrames | Sequence[TraceRecord], root_ids: str | Sequence[str], *,
                 marks: Mapping[str, Sequence[str]] | None = None, highlight: Highlight = None,
                 side: Literal["a", "b"] | None = None, page_limit: int | None = PAGE_LIMIT,
                 messages: int = MESSAGES_PER_PAGE, running: Mapping[str, tuple[str | None, float]] | None = None,
                 title: str | None = None, _pages_later: bool = False) -> None:
        roots = [root_ids] if isinstance(root_ids, str) else list(root_ids)
        if not roots or not all(isinstance(r, str) and r for r in roots):
            raise ValueError(f"root_ids must be a trace id or a list of them, got {root_ids!r}")
        if page_limit is not None and page_limit < 0:
            raise ValueError(f"page_limit must be None (every page) or >= 0, got {page_limit!r}")
        self.root_ids = roots
        self.title = title
        self._store: TraceReader | None = None
        self._records: list[TraceRecord] | None = None
        self._projected = False  # records of `VIEW_FIELDS` only: a page reads its trace's whole record
        self._frames: TraceFrames | None = None
        if isinstance(source, TraceFrames):
            self._frames = source
            cols = _columns_from_frames(source)
        else:
            if isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
                self._records = list(source)
            else:
                self._store = open_source(source)
                self._projected = page_limit is not None
                self._records = run_sync(_read(self._store, roots, whole=not self._projected))
            cols = _columns_from_records(self._records)
        self._cols = cols
        self._index = cols.index
        missing = [r for r in roots if r not in self._index]
        if missing:
            raise KeyError(f"no trace {missing[0]!r} in this source; pass a root of it (e.g. to_frames(store).roots)")
        self._sub = _subtree_totals(cols)
        self.badges: dict[int, list[str]] = {}
        """Badges by node index (from `marks` and from highlights)."""
        for trace_id, values in (marks or {}).items():
            if trace_id in self._index:
                self.badges.setdefault(self._index[trace_id], []).extend(str(b) for b in values)
        self.highlights: dict[int, str] = {}
        """Highlight kind (`HIGHLIGHT_KINDS`) by node index."""
        self.pairs: dict[int, str] = {}
        """For a compared tree: node index -> trace id of its counterpart in the other tree."""
        self.focus: int | None = None
        """The node selected when the view opens (an explained failure), else the first root."""
        for item in (highlight if isinstance(highlight, list) else [highlight] if highlight is not None else []):
            self._highlight(item, side)
        self.running: dict[int, tuple[str | None, float]] = {
            self._index[t]: v for t, v in (running or {}).items() if t in self._index}
        """Running nodes: (current tool or None, when it started, epoch seconds)."""
        self.page_limit = page_limit
        self.messages = messages
        self._pages: dict[str, Page] = {}
        if not _pages_later:
            self._fill_pages(self._page_ids())

    # ---- building -----------------------------------------------------------------------
    def _page_ids(self) -> list[str]:
        """The traces whose page is embedded: the first `page_limit` breadth first, and the focus."""
        c = self._cols
        order = sorted(range(len(c.ids)), key=lambda i: c.depth[i])  # stable: depth first within a level
        chosen = order if self.page_limit is None else order[: self.page_limit]
        if self.focus is not None and self.focus not in chosen:
            chosen = [*chosen, self.focus]
        return [c.ids[i] for i in chosen]

    def _page_inputs(self, ids: Sequence[str]) -> tuple[list[str], list[str] | None]:
        """What pages of `ids` read from the store: whole records (of projected views) and messages (None: none)."""
        if self._store is None or not ids:
            return [], None
        records = self._record_ids(ids) if self._projected else []
        return records, (list(ids) if self.messages else None)

    def _fill_pages(self, ids: Sequence[str]) -> None:
        """Build the pages of `ids`, reading what they need through the bridge."""
        record_ids, message_ids = self._page_inputs(ids)
        records, read = run_sync(_read_page_inputs(self._store, record_ids, message_ids)) \
            if self._store is not None and (record_ids or message_ids) else (None, None)
        with gc_paused():
            self._pages.update(self._build_pages(ids, read, records))

    async def _afill_pages(self) -> None:
        """Build the pages `page_limit` embeds, reading what they need with `await`."""
        ids = self._page_ids()
        record_ids, message_ids = self._page_inputs(ids)
        records, read = await _read_page_inputs(self._store, record_ids, message_ids) \
            if self._store is not None and (record_ids or message_ids) else (None, None)
        with gc_paused():
            self._pages.update(self._build_pages(ids, read, records))

    def _record_ids(self, ids: Sequence[str]) -> list[str]:
        """The traces a page of `ids` reads records of: their own, and their parents' (the reviews), in tree order."""
        chosen = {self._index[t] for t in ids}
        chosen |= {p for p in (self._cols.parent[i] for i in list(chosen)) if p >= 0}
        return [self._cols.ids[i] for i in sorted(chosen)]

    def _text(self, i: int) -> TraceText:
        c = self._cols
        verdict: Any = c.verdict[i] or None
        return TraceText(path=c.path[i], title=c.title[i], objective=c.objective[i], verdict=verdict, checks="")

    def _build_pages(self, ids: Sequence[str], read: Mapping[str, Sequence[Message]] | None,
                     records: Sequence[TraceRecord] | None = None) -> dict[str, Page]:
        """Pages of `ids`, with the messages `read` (by trace id; None: not read, unless the frames hold them) and
        the whole `records` of `_record_ids(ids)` (None: the view's own records are whole)."""
        if not ids:
            return {}
        wanted = set(ids)
        texts = {t: self._text(self._index[t]) for t in ids}
        paths = dict(zip(self._cols.ids, self._cols.path))
        msgs: dict[str, Any] | None = None
        if self._frames is not None:
            f = self._frames
            tables = (list(f.traces[f.traces["trace_id"].isin(wanted)].itertuples(index=False)),
                      list(f.reports.itertuples(index=False)), list(f.goals.itertuples(index=False)),
                      list(f.validations.itertuples(index=False)))
            if len(f.messages) and self.messages:
                msgs = {}
                chosen = f.messages[f.messages["trace_id"].isin(wanted)].sort_values(["trace_id", "sequence"])
                for row in chosen.itertuples(index=False):
                    msgs.setdefault(str(row.trace_id), []).append(_FrameMessage(row))
        else:
            assert self._records is not None
            if records is None:
                records = [self._records[self._index[t]] for t in self._record_ids(ids)]
            tables = _record_tables(records)
            msgs = dict(read) if read is not None else None
        return _pages(*tables, texts, paths, msgs, self.messages)

    def _highlight(self, item: Any, side: Literal["a", "b"] | None) -> None:
        if hasattr(item, "chain") and hasattr(item, "trace_id"):  # cyber_agent/analysis/explain.py:Attribution
            for trace_id in item.chain or ():
                if trace_id in self._index:
                    self.highlights.setdefault(self._index[trace_id], "path")
            if item.trace_id in self._index:
                i = self._index[item.trace_id]
                self.highlights[i] = "fail"
                step = f" at step {item.step}" if item.step is not None else ""
                self.badges.setdefault(i, []).insert(0, f"went wrong here: {item.kind}{step}")
                self.focus = i
            return
        if hasattr(item, "columns") and {"kind", "trace_id_a", "trace_id_b"} <= set(item.columns):
            self._highlight_alignment(item, side)
            return
        if isinstance(item, Mapping):
            for trace_id, kind in item.items():
                if kind not in HIGHLIGHT_KINDS:
                    raise ValueError(f"highlight kind {kind!r} of {trace_id!r} is not one of {', '.join(HIGHLIGHT_KINDS)}")
                if trace_id in self._index:
                    self.highlights[self._index[trace_id]] = str(kind)
            return
        raise TypeError(f"highlight= takes an explain() result, a compare_trees() frame or {{trace_id: kind}}, "
                        f"got {type(item).__name__}")

    def _highlight_alignment(self, frame: Any, side: Literal["a", "b"] | None) -> None:
        if side is None:
            hits = {s: sum(1 for t in frame[f"trace_id_{s}"].tolist() if t in self._index) for s in ("a", "b")}
            side = "a" if hits["a"] >= hits["b"] else "b"
        if side not in ("a", "b"):
            raise ValueError(f"side must be 'a' or 'b', got {side!r}")
        other = "b" if side == "a" else "a"
        alone = "deleted" if side == "a" else "inserted"  # a node of this tree the other lacks
        away = "inserted" if side == "a" else "deleted"  # a node of the other tree this one lacks
        rows = frame.to_dict("records")
        for row in rows:
            mine, theirs, kind = row[f"trace_id_{side}"], row[f"trace_id_{other}"], row["kind"]
            if not (isinstance(mine, str) and mine in self._index):
                continue
            i = self._index[mine]
            if isinstance(theirs, str):
                self.pairs[i] = theirs
            if kind == alone:
                self.highlights[i] = alone
            elif kind == "relabelled":
                self.highlights[i] = "relabelled"
            elif kind == "matched":
                changes = [f"{m} {row[f'{m}_a']} → {row[f'{m}_b']}" for m in ("status", "outcome", "verdict")
                           if row.get(f"{m}_changed") is True]
                if changes:
                    self.highlights[i] = "changed"
                    self.badges.setdefault(i, []).append("; ".join(changes))
        # Nodes of the other tree that this one lacks: counted on the nearest ancestor both trees have.
        mine_of = {r[f"trace_id_{other}"]: r[f"trace_id_{side}"] for r in rows
                   if isinstance(r[f"trace_id_{other}"], str) and isinstance(r[f"trace_id_{side}"], str)}
        up = {r[f"trace_id_{other}"]: r[f"parent_{other}"] for r in rows if isinstance(r[f"trace_id_{other}"], str)}
        lacking: dict[str, int] = {}
        for row in rows:
            if row["kind"] != away:
                continue
            parent = row[f"parent_{other}"]
            while isinstance(parent, str) and parent not in mine_of:
                parent = up.get(parent)
            here = mine_of.get(parent) if isinstance(parent, str) else None
            if here is not None and here in self._index:
                lacking[here] = lacking.get(here, 0) + 1
        for here, count in lacking.items():
            self.badges.setdefault(self._index[here], []).append(f"+{count} {away} below in tree {other}")

    # ---- reading ---------------------------------------------------------------------------
    @property
    def nodes(self) -> list[dict[str, Any]]:
        """One dict per trace, parents before children (depth first): what the script draws."""
        c = self._cols
        return [{"id": c.ids[i], "parent": c.parent[i] if c.parent[i] >= 0 else None, "depth": c.depth[i],
                 "path": c.path[i], "role": c.role[i], "status": c.status[i], "verdict": c.verdict[i] or None,
                 "title": c.title[i], "own": [c.cost[i], c.tokens[i], c.calls[i]],
                 "sub": [round(self._sub[i][0], 6), *self._sub[i][1:]], "badges": list(self.badges.get(i, [])),
                 "highlight": self.highlights.get(i)} for i in range(len(c.ids))]

    def __len__(self) -> int:
        return len(self._cols.ids)

    def page(self, trace_id: str) -> Page:
        """The page of any trace of the view (built on demand beyond `page_limit`)."""
        if trace_id not in self._index:
            raise KeyError(f"{trace_id!r} is not in this tree view (roots: {', '.join(self.root_ids)})")
        if trace_id not in self._pages:
            self._fill_pages([trace_id])
        return self._pages[trace_id]

    def find(self, text: str) -> list[str]:
        """Trace ids matching `text` in the script's order: exact path or id first, then substring matches."""
        needle = text.strip().lower()
        if not needle:
            return []
        c = self._cols
        exact = [c.ids[i] for i in range(len(c.ids)) if needle in (c.path[i].lower(), c.ids[i].lower())]
        seen = set(exact)
        rest = [c.ids[i] for i in range(len(c.ids)) if c.ids[i] not in seen and needle in self._haystack(i)]
        return exact + rest

    def _haystack(self, i: int) -> str:
        c = self._cols
        return " ".join([c.path[i], c.role[i], c.title[i], c.status[i], c.verdict[i], c.ids[i],
                         *self.badges.get(i, [])]).lower()

    # ---- rendering -------------------------------------------------------------------------
    def data(self) -> dict[str, Any]:
        """What the script reads (column-wise, see `cyber_agent/notebook/tree_view_js.py`)."""
        c = self._cols
        roles = list(dict.fromkeys(c.role))
        statuses = list(dict.fromkeys(c.status))
        role_code = {r: k for k, r in enumerate(roles)}
        status_code = {s: k for k, s in enumerate(statuses)}
        all_ids = c.ids  # a T2 sub-trace id is its parent's id + "@…": only the tail is sent ("@…")
        ids = [trace_id[len(all_ids[p]):] if p >= 0 and trace_id.startswith(all_ids[p])
               and trace_id[len(all_ids[p]):len(all_ids[p]) + 1] == "@" else trace_id
               for trace_id, p in zip(all_ids, c.parent)]
        verdict_code = {v: k for k, v in enumerate(_VERDICTS)}
        return {
            "v": 2, "ids": ids, "parent": c.parent, "path": c.path, "roles": roles, "role": [role_code[r] for r in c.role],
            "statuses": statuses, "status": [status_code[s] for s in c.status],
            "verdict": [verdict_code[v] for v in c.verdict], "title": c.title,
            "cost": c.cost, "tokens": c.tokens, "calls": c.calls,
            "badges": {str(i): b for i, b in self.badges.items()}, "hl": {str(i): k for i, k in self.highlights.items()},
            "pairs": {str(i): t for i, t in self.pairs.items()},
            "running": {str(i): [tool, round(started, 1)] for i, (tool, started) in self.running.items()},
            "focus": self.focus, "marks": dict(VERDICT_MARKS), "legend": self._legend(),
        }

    def _legend(self) -> list[list[str]]:
        kinds = dict.fromkeys(self.highlights.values())
        return [[k, HIGHLIGHT_KINDS[k], str(sum(1 for v in self.highlights.values() if v == k))] for k in HIGHLIGHT_KINDS
                if k in kinds]

    def pages_data(self) -> dict[str, Any]:
        """Pages by node index: [headline, [[section, lines], ...]]."""
        return {str(self._index[t]): [p.headline, [[name, list(lines)] for name, lines in p.sections]]
                for t, p in self._pages.items()}

    def _static(self) -> str:
        """A nested <details> outline of the first `STATIC_ROWS` rows (depth first), for pages without scripts."""
        c = self._cols
        kids: dict[int, list[int]] = {}
        for i, p in enumerate(c.parent):
            kids.setdefault(p, []).append(i)
        budget = [STATIC_ROWS]

        def item(i: int) -> str:
            budget[0] -= 1
            mark = f" {VERDICT_MARKS[c.verdict[i]]}" if c.verdict[i] else ""
            sub = self._sub[i]
            hl = f" [{self.highlights[i]}]" if i in self.highlights else ""
            label = html.escape(f"{c.path[i]} {c.role[i]}{mark} · {c.title[i]} · {c.status[i]}{hl} · "
                                f"${c.cost[i]:.4f} own, ${sub[0]:.4f} subtree, {sub[3]} traces")
            below = kids.get(i, [])
            if not below:
                return f"<li>{label}</li>"
            inner = "".join(item(k) for k in below if budget[0] > 0)
            more = "" if budget[0] > 0 else "<li>…</li>"
            return f"<li><details{' open' if c.depth[i] == 0 else ''}><summary>{label}</summary><ul>{inner}{more}</ul></details></li>"

        return "<ul>" + "".join(item(r) for r in kids.get(-1, []) if budget[0] > 0) + "</ul>"

    @gc_paused()
    def to_html(self, *, key: str | None = None, fetch: bool = True) -> str:
        """The view as an HTML fragment: data, pages, script and static outline (no random ids: a hash of the data).

        `key` names the view across re-renders (a live view keeps what is expanded and selected).
        `fetch`: in a kernel, let a click fetch a page left out (`cyber_agent/notebook/tree_view_pages.py`).
        """
        payload = _json(self.data())
        pages = _json(self.pages_data())
        box = "ca-tree-" + hashlib.sha1((payload + pages).encode()).hexdigest()[:12]
        keyed = (f' data-key="{html.escape(key)}"' if key else "") + (fetch_attrs(self, key or box) if fetch else "")
        channel = f"<script>{KERNEL_JS}</script>" if "data-kernel" in keyed else ""
        return (f'<div class="ca-tree-box" id="{box}"{keyed}><style>{TREE_CSS}</style>{channel}'
                f'<div class="mathjax_ignore"><div class="ca-static">{self._static()}</div></div>'  # "$" costs: no TeX
                f'<script type="application/json" class="ca-data">{payload}</script>'
                f'<script type="application/json" class="ca-pages">{pages}</script>'
                f'<script data-box="{box}">{TREE_JS}</script></div>')

    def to_document(self, title: str | None = None) -> str:
        """A whole HTML page holding the view (what `export_html` writes)."""
        name = html.escape(title or self.title or f"cyber_agent run {', '.join(self.root_ids)}")
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{name}</title></head>'
                f"<body><h2>{name}</h2>{self.budget_html()}{self.to_html(fetch=False)}</body></html>\n")

    def budget_html(self) -> str:
        """A line per root: traces, cost, tokens and LLM calls of its whole tree."""
        lines = []
        for i, p in enumerate(self._cols.parent):
            if p < 0:
                cost, tokens, calls, count = self._sub[i]
                lines.append(f"<li>{html.escape(self._cols.ids[i])}: {count} traces · ${cost:.4f} · {tokens:,} tokens · "
                             f"{calls:,} LLM calls · {html.escape(self._cols.status[i])}</li>")
        return f'<ul class="ca-budget">{"".join(lines)}</ul>'

    def __repr__(self) -> str:
        return f"TreeView(roots={len(self.root_ids)}, traces={len(self)}, pages={len(self._pages)})"

    def to_text(self) -> str:
        """One line per root with its subtree totals."""
        lines = [repr(self)]
        for i, p in enumerate(self._cols.parent):
            if p < 0:
                cost, tokens, calls, count = self._sub[i]
                lines.append(f"  {self._cols.ids[i]}: {count} traces · ${cost:.4f} · {tokens:,} tokens · {calls:,} LLM calls")
        return "\n".join(lines)


class _FrameMessage:
    """A messages-frame row read like a Message by `explorer_pages._messages` / `_usage`."""

    def __init__(self, row: Any) -> None:
        self.sequence = int(row.sequence)
        self.role = str(row.message_role)
        self.tool_name = row.tool_name if isinstance(row.tool_name, str) else None
        self.text = row.text if isinstance(row.text, str) else ""
        self.content = None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")


def _write(path: str | os.PathLike[str], text: str) -> Path:
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(f"{str(path)!r} is a folder; give a file name, e.g. {str(target / 'run.html')!r}")
    if not target.parent.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target


def write_document(view: TreeView | TreeCompareView, path: str | os.PathLike[str]) -> Path:
    """Write `view` as one self-contained HTML page at `path` (a file name, its folder made if missing)."""
    return _write(path, view.to_document())


def export_html(source: StoreSource | TraceFrames, root_id: str | Sequence[str], path: str | os.PathLike[str], *,
                marks: Mapping[str, Sequence[str]] | None = None, highlight: Highlight = None,
                messages: int = MESSAGES_PER_PAGE) -> Path:
    """Write one self-contained HTML file (no network, no server): the tree view, every node's page, the budget."""
    if Path(path).is_dir():
        raise IsADirectoryError(f"{str(path)!r} is a folder; give a file name, e.g. {str(Path(path) / 'run.html')!r}")
    view = TreeView(source, root_id, marks=marks, highlight=highlight, page_limit=None, messages=messages)
    return _write(path, view.to_document())
