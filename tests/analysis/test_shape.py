"""Delegation shape: on the real ReDel trees it equals ReDel's definitions computed on the raw files."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tree_gen import random_tree

from cyber_agent.analysis.shape import SHAPE_COLUMNS, delegation_shape, shape_of
from cyber_agent.analysis.tree import TreeNode, build_tree
from cyber_agent.errors import ConfigurationError
from cyber_agent.importers import import_runs
from cyber_agent.importers._plan import import_trace_id
from cyber_agent.trace import open_store

REAL = Path(__file__).resolve().parents[1] / "data" / "redel"
RUNS = sorted(p for p in REAL.iterdir() if (p / "state.json").is_file())


def _raw_shape(raw: dict, *, over: int = 2, chain: int = 3, narrow: int = 1) -> dict:
    """ReDel's commitment heuristics and the tree's size, straight from a state.json."""
    nodes = {n["id"]: n for n in raw["state"]}
    [root] = [n for n in raw["state"] if n["parent"] is None]

    def longest(node: dict, run: int) -> int:  # consecutive nodes with <= narrow children, root to leaf
        here = run + 1 if len(node["children"]) <= narrow else 0
        return max([here] + [longest(nodes[c], here) for c in node["children"]])

    fanouts = [len(n["children"]) for n in raw["state"] if n["children"]]
    calls = {n["id"]: sum(m["role"] == "assistant" for m in n["chat_history"]) for n in raw["state"]}
    tools = {n["id"]: [c["function"]["name"] for m in n["chat_history"] for c in (m.get("tool_calls") or ())]
             for n in raw["state"]}
    return {
        "trace_id": import_trace_id("redel", f"{raw['id']}/{root['id']}"), "nodes": len(nodes),
        "max_depth": max(n["depth"] for n in raw["state"]), "parents": len(fanouts),
        "max_fanout": max(fanouts, default=0), "longest_chain": longest(root, 0),
        "own_calls": calls[root["id"]], "subtree_calls": sum(calls.values()) - calls[root["id"]],
        "overcommitted": len(nodes) <= over, "undercommitted": longest(root, 0) >= chain,
        "delegated_without_work": bool(root["children"]) and all(t == "delegate" for t in tools[root["id"]]),
        "mean_fanout": sum(fanouts) / len(fanouts) if fanouts else None,
    }


async def test_shape_of_the_real_redel_trees_equals_the_definitions_on_the_raw_files():
    store = open_store("memory:")
    summary = await import_runs([REAL], store, source="redel")
    frame = await delegation_shape(store, summary.roots)
    assert list(frame.columns) == list(SHAPE_COLUMNS) and len(frame) == len(RUNS)
    by_root = frame.set_index("trace_id")
    for folder in RUNS:
        raw = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        for params in ({}, {"over": 3, "chain": 2, "narrow": 1}, {"over": 1, "chain": 3, "narrow": 5}):
            expected = _raw_shape(raw, **params)
            options = {"over_max_nodes": params.get("over", 2), "chain_min": params.get("chain", 3),
                       "chain_max_children": params.get("narrow", 1)}
            row = by_root.loc[expected["trace_id"]] if not params else \
                (await delegation_shape(store, expected["trace_id"], **options)).iloc[0]
            for column, value in expected.items():
                if column == "trace_id":
                    continue
                got = row[column]
                if value is None:
                    assert got != got, (folder.name, column)  # NaN: no parent
                else:
                    assert got == value, (folder.name, column, params, got, value)
    # the sample spans the heuristics: a one-node tree is overcommitted, the 9-node tree is not
    assert by_root["overcommitted"].sum() >= 1 and (~by_root["overcommitted"]).sum() >= 1


def _chain(depth: int, extra_leaves: int = 0) -> dict:
    nodes = {"n0": TreeNode(trace_id="n0", parent=None, role="root", brief="")}
    for i in range(1, depth):
        nodes[f"n{i}"] = TreeNode(trace_id=f"n{i}", parent=f"n{i - 1}", role="child", brief="",
                                  llm_calls=1, tool_names=["agent"])
    for j in range(extra_leaves):
        nodes[f"x{j}"] = TreeNode(trace_id=f"x{j}", parent="n0", role="child", brief="", llm_calls=3)
    nodes["n0"].llm_calls, nodes["n0"].tool_names = 2, ["agent", "bash"]
    return shape_of(build_tree("n0", nodes))


def test_chains_commitment_and_work_on_hand_made_trees():
    single = _chain(1)
    assert single["overcommitted"] and not single["undercommitted"] and single["root_did_the_work"]
    assert not single["delegated_without_work"] and single["max_fanout"] == 0
    chain = _chain(4)  # n0 -> n1 -> n2 -> n3: four consecutive nodes with <= 1 child
    assert chain["undercommitted"] and chain["longest_chain"] == 4 and chain["idle_delegators"] == 2
    wide = _chain(3, extra_leaves=2)  # n0 has 3 children: the chain n1 -> n2 is only 2 long
    assert not wide["undercommitted"] and wide["longest_chain"] == 2 and wide["max_fanout"] == 3
    assert wide["own_calls"] == 2 and wide["subtree_calls"] == 2 + 6 and not wide["root_did_the_work"]


def test_validators_are_left_out_unless_asked_and_bad_thresholds_are_refused():
    tree = random_tree(random.Random(3), 60)
    validators = sum(n.role == "validator" for n in tree.nodes.values())
    assert validators and shape_of(tree, validators=True)["nodes"] == 60
    assert shape_of(tree)["nodes"] < 60


async def test_bad_thresholds_name_the_setting():
    store = open_store("memory:")
    with pytest.raises(ConfigurationError, match="chain_min"):
        await delegation_shape(store, ["x"], chain_min=0)
    with pytest.raises(ConfigurationError, match="work"):
        await delegation_shape(store, ["x"], work="money")  # type: ignore[arg-type]
