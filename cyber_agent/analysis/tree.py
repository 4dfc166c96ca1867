"""One stored tree as plain nodes: the shared input of alignment, delegation shape and attribution.

`load_tree` reads a root and its descendants through the TraceStore API (`read_records`), so any
store works, imported trees included. Each node carries its label (`node_label`): the role
(`root`, `child` or `validator`), the position among its siblings and the normalised brief.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cyber_agent.errors import ConfigurationError, TraceNotFoundError
from cyber_agent.trace.protocols import TraceReader
from cyber_agent.trace.records import TraceRecord, parse_time

__all__ = [
    "NodeRole",
    "Tree",
    "TreeNode",
    "build_tree",
    "load_tree",
    "load_trees",
    "node_label",
    "normalise_brief",
    "tree_from_records",
    "trees_from_records",
]

NodeRole = Literal["root", "child", "validator"]

_SPACE = re.compile(r"\s+")
_EDGE_PUNCTUATION = ".,;:!?\"'`()[]{}<>"
BRIEF_CHARS = 500
"""Normalised briefs are cut to this many characters (long tails rarely tell siblings apart)."""


def normalise_brief(text: str | None) -> str:
    """Case-folded, whitespace collapsed, punctuation stripped at the ends, cut to `BRIEF_CHARS`."""
    if not text:
        return ""
    return _SPACE.sub(" ", text).strip().strip(_EDGE_PUNCTUATION).casefold()[:BRIEF_CHARS]


@dataclass(eq=False, slots=True)
class TreeNode:
    """One trace of a tree with what comparison, shape and attribution read from it."""

    trace_id: str
    parent: str | None
    role: NodeRole
    brief: str
    """The normalised brief: the TaskBrief objective when there is one, else the trace's task."""
    depth: int = 0
    position: int = 0
    """Index among its parent's children (creation order)."""
    children: list[str] = field(default_factory=list)
    status: str | None = None
    outcome: str | None = None
    """The child's TaskReport outcome (None without a report)."""
    verdict: str | None = None
    """The latest verdict on this node (a validator: its own verdict), None without validation."""
    tokens: int = 0
    cost: float = 0.0
    llm_calls: int = 0
    """Assistant messages (0 when messages were not read)."""
    duration_s: float | None = None
    size: int = 1
    """Nodes in the subtree rooted here (itself included)."""
    tool_names: list[str] = field(default_factory=list)
    """Names of the tools its assistant messages called, in order (empty when messages were not read)."""

    @property
    def label(self) -> str:
        return node_label(self)


def node_label(node: TreeNode) -> str:
    """`role[position]: brief` — what the alignment matches on (role and brief; position by order)."""
    return f"{node.role}[{node.position}]: {node.brief}"


@dataclass(eq=False)
class Tree:
    """A root and its descendants, parents before children, siblings in creation order."""

    root: str
    nodes: dict[str, TreeNode]

    def __len__(self) -> int:
        return len(self.nodes)

    def preorder(self) -> list[TreeNode]:
        out: list[TreeNode] = []
        stack = [self.root]
        while stack:
            node = self.nodes[stack.pop()]
            out.append(node)
            stack.extend(reversed(node.children))
        return out


def _role(meta: Mapping[str, Any]) -> NodeRole:
    if not meta.get("parent_trace_id"):
        return "root"
    lineage = meta.get("lineage") or {}
    return "validator" if lineage.get("created_by_tool") == "validator" else "child"


def _brief_text(meta: Mapping[str, Any]) -> str | None:
    protocol = meta.get("protocol") or {}
    brief = protocol.get("brief") or {}
    if isinstance(brief, Mapping) and brief.get("objective"):
        return str(brief["objective"])
    validator = protocol.get("validator") or {}
    if isinstance(validator, Mapping) and validator.get("scope"):
        return f"validate {validator['scope']}"
    return meta.get("task")


def _verdict(meta: Mapping[str, Any]) -> str | None:
    protocol = meta.get("protocol") or {}
    own = protocol.get("validation")
    if isinstance(own, Mapping) and own.get("verdict"):
        return str(own["verdict"])
    validations = protocol.get("validations") or []
    return str(validations[-1]["verdict"]) if validations else None


def _duration(meta: Mapping[str, Any]) -> float | None:
    start, end = meta.get("created_at"), meta.get("completed_at") or meta.get("updated_at")
    if not start or not end:
        return None
    return (parse_time(end) - parse_time(start)).total_seconds()


def _tool_names(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    names: list[str] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, Mapping):
            names.extend(str(call.get("name")) for call in content.get("tool_calls") or ())
    return names


def _node(record: TraceRecord) -> TreeNode:
    meta = record.trace
    protocol = meta.get("protocol") or {}
    report = protocol.get("report") or {}
    lineage = meta.get("lineage") or {}
    return TreeNode(
        trace_id=record.trace_id, parent=meta.get("parent_trace_id"), role=_role(meta),
        brief=normalise_brief(_brief_text(meta)), depth=int(lineage.get("depth") or 0),
        status=meta.get("status"), outcome=report.get("outcome") if isinstance(report, Mapping) else None,
        verdict=_verdict(meta), tokens=int(meta.get("total_tokens") or 0), cost=float(meta.get("total_cost") or 0.0),
        llm_calls=sum(1 for m in record.messages if m.get("role") == "assistant"), duration_s=_duration(meta),
        tool_names=_tool_names(record.messages),
    )


def tree_from_records(records: Sequence[TraceRecord], root_id: str) -> Tree:
    """The tree of `root_id` among `records` (records of other trees are ignored)."""
    nodes = {r.trace_id: _node(r) for r in records}
    if root_id not in nodes:
        raise TraceNotFoundError(root_id)
    nodes[root_id].parent = None  # a subtree compared on its own: its top is the root
    nodes[root_id].role = "root"
    return build_tree(root_id, nodes)


def trees_from_records(records: Sequence[TraceRecord], root_ids: Sequence[str]) -> list[Tree]:
    """The tree of each of `root_ids` among `records` (one pass: records are grouped by their root first)."""
    nodes = {r.trace_id: _node(r) for r in records}
    wanted = set(root_ids)
    top: dict[str, str] = {}  # trace id -> the wanted root above it (records come parents first)
    groups: dict[str, dict[str, TreeNode]] = {root: {} for root in root_ids}
    for record in records:
        trace_id, parent = record.trace_id, record.trace.get("parent_trace_id")
        owner = trace_id if trace_id in wanted else top.get(parent) if isinstance(parent, str) else None
        if owner is None:
            continue
        top[trace_id] = owner
        groups[owner][trace_id] = nodes[trace_id]
    trees = []
    for root in root_ids:
        if root not in groups[root]:
            raise TraceNotFoundError(root)
        groups[root][root].parent = None
        groups[root][root].role = "root"
        trees.append(build_tree(root, groups[root]))
    return trees


def build_tree(root_id: str, nodes: dict[str, TreeNode]) -> Tree:
    """Link `nodes` (children in the order given) under `root_id`; depth, position and size are set here."""
    for node in nodes.values():
        node.children = []
    for node in nodes.values():
        if node.trace_id != root_id and node.parent in nodes:
            nodes[node.parent].children.append(node.trace_id)
    kept: dict[str, TreeNode] = {}
    order: list[TreeNode] = []
    stack = [(root_id, 0, 0)]
    while stack:
        trace_id, depth, position = stack.pop()
        node = nodes[trace_id]
        node.depth, node.position = depth, position
        kept[trace_id] = node
        order.append(node)
        stack.extend((child, depth + 1, index) for index, child in reversed(list(enumerate(node.children))))
    for node in reversed(order):
        node.size = 1 + sum(kept[c].size for c in node.children)
    return Tree(root=root_id, nodes=kept)


async def load_tree(store: TraceReader, root_id: str, *, messages: bool = True) -> Tree:
    """The tree under `root_id` in `store` (any store; `messages=False` skips reading them: llm_calls are 0)."""
    if not isinstance(root_id, str) or not root_id:
        raise ConfigurationError("root_id", f"must be a trace id string, got {root_id!r}; pass the root's trace_id")
    records = await store.read_records([root_id], messages=messages, events=False)
    return tree_from_records(records, root_id)


async def load_trees(store: TraceReader, root_ids: Sequence[str], *, messages: bool = True) -> list[Tree]:
    """The trees under each of `root_ids` in `store`, read in one `read_records` call (same order as `root_ids`)."""
    roots = list(dict.fromkeys(root_ids))
    for root in roots:
        if not isinstance(root, str) or not root:
            raise ConfigurationError("root_ids", f"every root must be a trace id string, got {root!r}")
    if not roots:
        return []
    records = await store.read_records(roots, messages=messages, events=False)
    by_root = {tree.root: tree for tree in trees_from_records(records, roots)}
    return [by_root[root] for root in root_ids]
