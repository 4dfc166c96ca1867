"""Benchmark tree alignment: two 10,000-node trees with planted differences, aligned into a frame.

    python bench/compare_trees.py                  # 10,000 nodes, 20 inserts/deletes/relabels, 5 reps
    python bench/compare_trees.py --nodes 2000 --reps 3 --json out.json

Trees are generated here (tests/analysis/tree_gen.py): a random recursive tree (each new node
under a random earlier node with fewer than `--fanout` children; 15 % validators), and a copy
with `--k` subtrees deleted, `--k` briefs changed by one word and `--k` leaves inserted.
Measured, median over `--reps`: `align` (`align_trees`, the pandas frame included; target < 1 s)
and `shape` (`tree_shape` of both trees), side by side in one run. The alignment found is
checked against the planted truth on every rep.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "analysis"))

from tree_gen import plant, random_tree  # noqa: E402

from cyber_agent.analysis import align_trees  # noqa: E402
from cyber_agent.analysis.shape import tree_shape  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--fanout", type=int, default=8)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(33)
    tree_a = random_tree(rng, args.nodes, max_children=args.fanout)
    planted = plant(tree_a, rng, inserts=args.k, deletes=args.k, relabels=args.k)
    align_s, shape_s = [], []
    for _ in range(args.reps):
        start = time.perf_counter()
        frame = align_trees(tree_a, planted.tree_b)
        align_s.append(time.perf_counter() - start)
        relabelled = frame[frame["kind"] == "relabelled"]
        assert dict(zip(relabelled["trace_id_a"], relabelled["trace_id_b"])) == planted.relabelled
        assert set(frame.loc[frame["kind"] == "inserted", "trace_id_b"]) == planted.inserted
        assert set(frame.loc[frame["kind"] == "deleted", "trace_id_a"]) == planted.deleted
        start = time.perf_counter()
        tree_shape([tree_a, planted.tree_b])
        shape_s.append(time.perf_counter() - start)
    result = {"nodes_a": len(tree_a), "nodes_b": len(planted.tree_b), "k": args.k, "reps": args.reps,
              "align_median_s": statistics.median(align_s), "shape_median_s": statistics.median(shape_s)}
    print(f"align two trees of {len(tree_a):,} / {len(planted.tree_b):,} nodes: median {result['align_median_s']:.3f} s "
          f"(target < 1 s); shape of both: median {result['shape_median_s']:.3f} s; {args.reps} reps")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
