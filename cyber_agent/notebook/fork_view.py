"""A fork in the tree view: each node of the fork's tree labelled replayed or live against its origin.

`fork_graph(store, fork_id)` is the fork's `trace_graph` with the diff of
`cyber_agent/core/fork_diff.py:fork_diff_rows` on every node (`fork_state`, `replayed_calls`,
`live_calls`, `report_differs`, `answer_differs`, `cost_paid`) and a last label line such as
`live · 4 calls` or `replayed`; `draw_fork_tree` draws it (colour = status, as every tree).
"""

from __future__ import annotations

from typing import Any

import networkx as nx
from matplotlib.figure import Figure

from cyber_agent.core.fork_diff import fork_diff_rows
from cyber_agent.llm.call_site import tree_position
from cyber_agent.notebook.bridge import run_sync
from cyber_agent.notebook.frames import ato_frames
from cyber_agent.notebook.trees import draw_trace_tree, trace_graph
from cyber_agent.trace.protocols import TraceStore

__all__ = ["afork_graph", "draw_fork_tree", "fork_graph"]


def _state_line(row: dict[str, Any]) -> str:
    state = str(row["state"])
    if row["live_calls"]:
        state += f" · {row['live_calls']} live call{'s' if row['live_calls'] != 1 else ''}"
    if row["report_differs"] and row["in_origin"]:
        state += " · report differs"
    return state


async def afork_graph(store: TraceStore, fork_id: str, origin_id: str | None = None) -> nx.DiGraph:
    """The fork's trace graph with its diff against the origin on every node."""
    rows = {row["position"]: row for row in await fork_diff_rows(store, fork_id, origin_id)}
    graph = trace_graph(await ato_frames(store, fork_id, messages=False, events=False), fork_id)
    for node, data in graph.nodes(data=True):
        row = rows.get(tree_position(str(node)))
        if row is None:
            continue
        data.update(fork_state=row["state"], replayed_calls=row["replayed_calls"], live_calls=row["live_calls"],
                    report_differs=row["report_differs"], answer_differs=row["answer_differs"], cost_paid=row["cost_paid"])
        data["label"] = f"{data.get('label', '')}\n{_state_line(row)}".strip()
    return graph


def fork_graph(store: TraceStore, fork_id: str, origin_id: str | None = None) -> nx.DiGraph:
    """`afork_graph` from sync code (a notebook cell)."""
    return run_sync(afork_graph(store, fork_id, origin_id))


def draw_fork_tree(store: TraceStore, fork_id: str, origin_id: str | None = None, **options: Any) -> Figure:
    """Draw the fork's tree, each node labelled replayed / live (`draw_trace_tree`'s options)."""
    return draw_trace_tree(fork_graph(store, fork_id, origin_id), **options)
