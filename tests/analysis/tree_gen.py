"""Generated trees with planted differences (insert, delete, relabel k nodes) and the truth of each."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from cyber_agent.analysis.tree import Tree, TreeNode, build_tree

VOCAB = [f"w{i}" for i in range(400)]


def brief(rng: random.Random) -> str:
    """Six distinct random words: unrelated briefs share (almost) none."""
    return " ".join(rng.sample(VOCAB, 6))


def random_tree(rng: random.Random, size: int, *, max_children: int = 6, prefix: str = "a",
                validators: bool = True) -> Tree:
    nodes = {f"{prefix}0": TreeNode(trace_id=f"{prefix}0", parent=None, role="root", brief=brief(rng))}
    ids = [f"{prefix}0"]
    counts = {f"{prefix}0": 0}
    while len(nodes) < size:
        parent = rng.choice(ids)
        if counts[parent] >= max_children:
            continue
        trace_id = f"{prefix}{len(nodes)}"
        role = "validator" if validators and rng.random() < 0.15 else "child"
        nodes[trace_id] = TreeNode(trace_id=trace_id, parent=parent, role=role, brief=brief(rng),
                                   tokens=rng.randrange(1000), cost=rng.random(), llm_calls=rng.randrange(5))
        counts[parent] += 1
        counts[trace_id] = 0
        ids.append(trace_id)
    return build_tree(f"{prefix}0", nodes)


@dataclass
class Planted:
    tree_b: Tree
    matched: dict[str, str] = field(default_factory=dict)
    relabelled: dict[str, str] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    inserted: set[str] = field(default_factory=set)


def _subtree(tree: Tree, trace_id: str) -> set[str]:
    out, stack = set(), [trace_id]
    while stack:
        current = stack.pop()
        out.add(current)
        stack.extend(tree.nodes[current].children)
    return out


def plant(tree_a: Tree, rng: random.Random, *, inserts: int, deletes: int, relabels: int) -> Planted:
    """Tree B: tree A with `deletes` subtrees removed, `relabels` briefs changed by one word and
    `inserts` new leaves; every other node kept (ids prefixed `b`)."""
    non_root = [n for n in tree_a.preorder() if n.trace_id != tree_a.root]
    deleted: set[str] = set()
    while len({d for d in deleted if tree_a.nodes[d].parent not in deleted}) < deletes:
        pick = rng.choice(non_root)
        if pick.trace_id not in deleted and len(_subtree(tree_a, pick.trace_id)) <= 4:
            deleted |= _subtree(tree_a, pick.trace_id)
    kept = [n for n in tree_a.preorder() if n.trace_id not in deleted]
    relabelled = set(rng.sample([n.trace_id for n in kept if n.trace_id != tree_a.root], relabels))
    nodes: dict[str, TreeNode] = {}
    out = Planted(tree_b=tree_a)
    for node in kept:
        new_id = "b" + node.trace_id[1:]
        text = node.brief
        if node.trace_id in relabelled:
            words = text.split()
            words[rng.randrange(len(words))] = f"changed{rng.randrange(10**6)}"
            text = " ".join(words)
            out.relabelled[node.trace_id] = new_id
        else:
            out.matched[node.trace_id] = new_id
        parent = None if node.parent is None else "b" + node.parent[1:]
        nodes[new_id] = TreeNode(trace_id=new_id, parent=parent, role=node.role, brief=text,
                                 tokens=node.tokens + 7, cost=node.cost, llm_calls=node.llm_calls)
    # Inserts: new leaves placed at random positions among a kept parent's children.
    order: dict[str, list[str]] = {}
    for node in nodes.values():
        if node.parent is not None:
            order.setdefault(node.parent, []).append(node.trace_id)
    parents = list(nodes)
    for number in range(inserts):
        parent = rng.choice(parents)
        new_id = f"bnew{number}"
        nodes[new_id] = TreeNode(trace_id=new_id, parent=parent, role="child", brief=brief(rng))
        siblings = order.setdefault(parent, [])
        siblings.insert(rng.randrange(len(siblings) + 1), new_id)
        out.inserted.add(new_id)
    ordered = {"b0": nodes["b0"]}
    for siblings in order.values():
        for trace_id in siblings:
            ordered[trace_id] = nodes[trace_id]
    out.tree_b = build_tree("b0", ordered)
    out.deleted = deleted
    return out
