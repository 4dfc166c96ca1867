"""The nodes of a tree view, column by column: ids, parents, paths, roles, statuses, verdicts, titles, totals.

`cyber_agent/notebook/tree_view.py:TreeView` builds them from store records (`_columns_from_records`,
reading only `VIEW_FIELDS`) or from loaded frames (`_columns_from_frames`); both give the paths,
titles and verdicts of `cyber_agent/notebook/tree_labels.py:trace_texts`. Built column-wise (list
comprehensions, NumPy for the subtree totals): a 100,000-trace forest took 1.6 s row by row.
"""

from __future__ import annotations

import math
from functools import lru_cache
from operator import itemgetter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cyber_agent.notebook.tree_labels import VERDICT_MARKS, TraceText, distinct_titles, trace_objective, trace_texts
from cyber_agent.trace.records import TraceRecord

if TYPE_CHECKING:
    from cyber_agent.notebook.frames import TraceFrames

__all__ = ["VIEW_FIELDS"]

VIEW_FIELDS = ("parent_trace_id", "status", "total_cost", "total_tokens", "total_messages", "task", "agent_type",
               "lineage.created_by_tool", "protocol.brief.objective", "protocol.validations.verdict",
               "protocol.validations.validator_trace_id", "protocol.validations.target_trace_id")
"""What the tree's columns read of each trace (`_columns_from_records`): the first paint reads only these."""


def _num(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if math.isnan(number) else number


@lru_cache(maxsize=8192)
def _titles(objectives: tuple[str, ...]) -> tuple[str, ...]:
    """`distinct_titles` of one sibling group (remembered: a live view re-reads the same groups every second)."""
    return tuple(distinct_titles(list(objectives)))


def _title(objective: str) -> str:
    """`distinct_titles([objective])[0]` (an only child's title), without the group's bookkeeping."""
    return distinct_titles([objective])[0]


class _Columns:
    """The nodes of a forest, column by column, parents before children (depth first)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.parent: list[int] = []  # -1: a root
        self.path: list[str] = []
        self.role: list[str] = []
        self.status: list[str] = []
        self.verdict: list[str] = []  # "" when none
        self.title: list[str] = []
        self.objective: list[str] = []
        self.cost: list[float] = []
        self.tokens: list[int] = []
        self.calls: list[int] = []
        self.depth: list[int] = []
        self.index: dict[str, int] = {}  # trace id -> node index

    def finish(self, parents: Sequence[str | None], objectives: Sequence[str]) -> None:
        """Parent indices, depths, paths and sibling-distinct titles from the parent ids (frame order)."""
        self.index = index = {trace_id: i for i, trace_id in enumerate(self.ids)}
        n = len(self.ids)
        # A parent after its child is not a tree order: that node counts as a root.
        self.parent = [p if p < i else -1 for i, p in enumerate(
            [index.get(parent_id, -1) if parent_id else -1 for parent_id in parents])]
        depth, path, role = [0] * n, ["root"] * n, self.role
        agents, validators = [0] * n, [0] * n  # children numbered so far, per parent
        siblings: dict[int, list[int]] = {}
        for i, p in enumerate(self.parent):
            validator = role[i] == "validator"
            if p >= 0:
                depth[i] = depth[p] + 1
                base = path[p]
                base = "" if base == "root" else base + "."
                if validator:
                    validators[p] += 1
                    path[i] = f"{base}v{validators[p]}"
                else:
                    agents[p] += 1
                    path[i] = f"{base}{agents[p]}"
            if not validator:
                group = siblings.get(p)
                if group is None:
                    siblings[p] = [i]
                else:
                    group.append(i)
        self.depth, self.path = depth, path
        self.objective = list(objectives)
        self.title = [""] * n
        title = self.title
        for group in siblings.values():
            if len(group) == 1:  # `distinct_titles` of one text: the text, shortened
                i = group[0]
                title[i] = _title(objectives[i])
                continue
            for i, text in zip(group, _titles(tuple(objectives[i] for i in group))):
                title[i] = text


def _subtree_totals(cols: _Columns) -> list[tuple[float, int, int, int]]:
    """(cost, tokens, calls, traces) of every node's subtree, level by level from the deepest (NumPy).

    Each parent adds its children's totals in decreasing index order, as a loop from the last node
    up would, so the float sums are the same to the last bit.
    """
    import numpy as np

    n = len(cols.ids)
    cost = np.array(cols.cost, dtype=np.float64)
    tokens = np.array(cols.tokens, dtype=np.int64)
    calls = np.array(cols.calls, dtype=np.int64)
    count = np.ones(n, dtype=np.int64)
    parent = np.array(cols.parent, dtype=np.int64)
    depth = np.array(cols.depth, dtype=np.int64)
    for level in range(int(depth.max()) if n else 0, 0, -1):
        nodes = np.flatnonzero(depth == level)[::-1]
        up = parent[nodes]
        for column in (cost, tokens, calls, count):
            np.add.at(column, up, column[nodes])
    return list(zip(cost.tolist(), tokens.tolist(), calls.tolist(), count.tolist()))


_META_FIELDS = ("trace_id", "parent_trace_id", "status", "total_cost", "total_tokens", "total_messages", "task",
                "protocol", "agent_type", "lineage")
_META = itemgetter(*_META_FIELDS)


def _columns_from_records(records: Sequence[TraceRecord]) -> _Columns:
    """Node columns from store records (no pandas): the same paths, titles and verdicts as the frames give.

    Column by column (list comprehensions over the fields `_META` takes in one C call per record):
    a 100,000-trace forest took 1.6 s row by row.
    """
    cols = _Columns()
    metas = [record.trace for record in records]
    try:  # a native record has every field
        rows = list(map(_META, metas))
    except KeyError:  # an imported or older record: field by field
        rows = [tuple(meta.get(k) for k in _META_FIELDS) for meta in metas]
    if not rows:
        cols.finish([], [])
        return cols
    ids, parents, statuses, costs, totals, counts, tasks, protocols, agent_types, lineages = (list(c) for c in zip(*rows))
    cols.ids = ids
    cols.role = ["validator" if isinstance(lineage, dict) and lineage.get("created_by_tool") == "validator"
                 else str(agent_type or "agent") for lineage, agent_type in zip(lineages, agent_types)]  # frame_rows.trace_role
    cols.status = [status if type(status) is str else str(status) for status in statuses]
    cols.cost = [round(cost, 6) if isinstance(cost, float) else round(_num(cost), 6) for cost in costs]
    cols.tokens = [total if isinstance(total, int) else int(_num(total)) for total in totals]
    cols.calls = [(count if isinstance(count, int) else int(_num(count))) // 2 for count in counts]
    objectives = [trace_objective(task, protocol) for task, protocol in zip(tasks, protocols)]
    own: dict[str, str] = {}  # validator -> its verdict (the first validation it wrote)
    latest: dict[str, tuple[int, str]] = {}  # judged trace -> (index, verdict) of its latest validation
    for trace_id, protocol in zip(ids, protocols):
        validations = protocol.get("validations") if isinstance(protocol, dict) else None
        if not validations:
            continue
        for number, validation in enumerate(validations):
            verdict = validation.get("verdict") if isinstance(validation, dict) else None
            if not isinstance(verdict, str):
                continue
            validator = validation.get("validator_trace_id")
            if isinstance(validator, str):
                own.setdefault(validator, verdict)
            target = validation.get("target_trace_id") or trace_id
            if target not in latest or number >= latest[target][0]:
                latest[target] = (number, verdict)
    none = (0, "")
    verdicts = [own.get(trace_id, "") if role == "validator" else latest.get(trace_id, none)[1]
                for trace_id, role in zip(ids, cols.role)]
    cols.verdict = [verdict if verdict in VERDICT_MARKS else "" for verdict in verdicts]
    cols.finish(parents, objectives)
    return cols


def _columns_from_frames(frames: TraceFrames) -> _Columns:
    """Node columns from loaded frames (paths, titles and verdicts of `trace_texts`)."""
    traces = frames.traces
    texts: dict[str, TraceText] = {}
    for _, group in traces.groupby("root_trace_id", sort=False):
        texts.update(trace_texts(group, frames.validations))
    usage = dict(zip(frames.usage["trace_id"].tolist(), frames.usage["llm_calls"].tolist())) if len(frames.usage) else {}
    cols = _Columns()
    parents: list[str | None] = []
    for row in traces.itertuples(index=False):
        cols.ids.append(row.trace_id)
        parents.append(row.parent_trace_id if isinstance(row.parent_trace_id, str) else None)
        cols.role.append(str(row.role))
        cols.status.append(str(row.status))
        cols.cost.append(round(_num(row.total_cost), 6))
        cols.tokens.append(int(_num(row.total_tokens)))
        calls = _num(usage.get(row.trace_id))
        cols.calls.append(int(calls) if calls else int(_num(row.total_messages)) // 2)
        cols.verdict.append(texts[row.trace_id].verdict or "")
    cols.finish(parents, [texts[t].objective for t in cols.ids])
    return cols
