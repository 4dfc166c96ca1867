"""Is the `demo` model linear in its input? Median seconds of one reply per task size and shape.

The default model of `cyber-agent serve` decides on the event loop for small requests and in a
worker thread above 4,096 characters (`cyber_agent/llm/demo.py:DemoModel`). Its CSV-path pattern
used to restart its scan at every character of a long token: 40 KB of letters took ~16 s. This
prints the reply time for task sizes 10 k … 160 k characters of a few shapes (the ratio of the
largest to the smallest stays far below 16, the input ratio: interpreter overhead dominates), and the old pattern's search time
on the letters case side by side (10 k → 40 k: about 16 times slower, quadratic).

    .venv/bin/python bench/demo_scaling.py        # ~10 s
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time

from cyber_agent.llm.demo import DemoModel

SIZES = (10_000, 20_000, 40_000, 80_000, 160_000)
SHAPES = {
    "letters": lambda n: "a" * n,
    "words": lambda n: ("the quick brown fox jumps 12 " * n)[:n],
    "digits": lambda n: ("1 2 + 3 " * n)[:n],
    "paths": lambda n: ("data/sales.cs " * n)[:n],
}
OLD_CSV = re.compile(r"[\w./-]+\.csv")


def _median(action, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    model = DemoModel()
    print("median seconds of one demo reply (task of N characters)")
    print(f"{'shape':<9}" + "".join(f"{n:>10}" for n in SIZES) + "   ratio")
    for shape, build in SHAPES.items():
        row = [_median(lambda t=build(n): asyncio.run(model([{"role": "user", "content": t}], "demo", []))) for n in SIZES]
        print(f"{shape:<9}" + "".join(f"{v:>10.4f}" for v in row) + f"   {row[-1] / max(row[0], 1e-9):.1f}")
    old = [_median(lambda t="a" * n: OLD_CSV.search(t), repeats=1) for n in SIZES[:3]]
    print(f"{'old csv':<9}" + "".join(f"{v:>10.4f}" for v in old) + " " * 20 + f"   {old[-1] / old[0]:.1f} (10k→40k)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
