"""The delegation-shape columns of the traces and usage frames (`columns.py:SHAPE`).

A tree's top row (a trace whose parent is not among the loaded records: a root, or the top of a
selected subtree) holds the shape of the tree below it, exactly what
`cyber_agent/analysis/shape.py:delegation_shape` returns for it (default thresholds, validators
left out); every other row is empty. Without messages (`to_frames(..., messages=False)`) the
columns that count LLM calls or tool names are empty too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cyber_agent.analysis.shape import shape_of
from cyber_agent.analysis.tree import NodeRole, TreeNode, build_tree
from cyber_agent.notebook.columns import SHAPE
from cyber_agent.trace.records import TraceRecord

__all__ = ["shape_columns"]

# Columns that need the messages (LLM calls, tool names): empty when they were not read.
_NEEDS_MESSAGES = ("own_calls", "subtree_calls", "own_share", "delegated_without_work", "idle_delegators",
                   "root_did_the_work")


def shape_columns(records: Sequence[TraceRecord], llm_calls: Sequence[int] | None,
                  tool_names: Mapping[str, list[str]] | None) -> dict[str, list[Any]]:
    """The `SHAPE` columns, one value per record (`llm_calls`: assistant messages of each record, in
    record order; `tool_names`: trace id -> the tools its assistant messages called; both None when
    the messages were not read)."""
    loaded = {record.trace_id for record in records}
    top: dict[str, str] = {}
    trees: dict[str, dict[str, TreeNode]] = {}
    for number, record in enumerate(records):  # parents come before their children
        meta, trace_id = record.trace, record.trace_id
        parent = meta.get("parent_trace_id")
        lineage = record.lineage
        role: NodeRole
        if parent in loaded and parent in top:
            head, role = top[parent], "validator" if lineage.get("created_by_tool") == "validator" else "child"
        else:
            head, role, parent = trace_id, "root", None
        top[trace_id] = head
        trees.setdefault(head, {})[trace_id] = TreeNode(
            trace_id=trace_id, parent=parent, role=role, brief="", tokens=int(meta.get("total_tokens") or 0),
            llm_calls=llm_calls[number] if llm_calls is not None else 0,
            tool_names=list(tool_names.get(trace_id, ())) if tool_names is not None else [])
    shapes = {head: shape_of(build_tree(head, nodes)) for head, nodes in trees.items()}
    columns: dict[str, list[Any]] = {column.name: [] for column in SHAPE}
    for record in records:
        shape = shapes.get(record.trace_id)
        for name, values in columns.items():
            if shape is None or (llm_calls is None and name in _NEEDS_MESSAGES):
                values.append(None)
            else:
                values.append(shape[name])
    return columns
