"""Regenerate the bundled sweep task set in data/tasks/ (deterministic; no model is run).

    .venv/bin/python data/tasks/make_tasks.py            # rewrites data/tasks/*.csv and tasks.jsonl
    .venv/bin/python data/tasks/make_tasks.py --out DIR  # somewhere else

Writes three small sales tables (`shop_a.csv`, `shop_b.csv`, `shop_c.csv`: date, region,
product, units, unit_price — the layout of data/sales.csv) and `tasks.jsonl`, one task per
line with its expected answer, the completion criteria a recursive root is anchored on, and a
numeric scorer:

- 8 `arithmetic` tasks ("What is 17 * 23 + 4?"), expected value computed here;
- 8 `lookup` tasks ("Compute the revenue (units × unit_price) of region North in
  data/tasks/shop_a.csv."), expected value summed from the table written here.

The offline `demo` and `fallible` models answer both kinds (docs/experiments.md). Paths in the
tasks are relative to the repository root, the workspace a sweep runs in. The same seed gives
byte-identical files (`tests/experiments/test_tasks.py` checks the committed ones).
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 19
REGIONS = ("North", "South", "East", "West")
PRODUCTS = {"Widget": 2.50, "Gadget": 4.00, "Gizmo": 7.25, "Doohickey": 1.75}
SHOPS = ("shop_a", "shop_b", "shop_c")
ROWS = 20
NUMERIC = r"(?:=|revenue)\s*(-?\d+(?:\.\d+)?)"
"""The result a numeric scorer reads: the number after `=` (arithmetic) or after `revenue` (lookups)."""


def _table(rng: random.Random) -> list[dict[str, object]]:
    start = date(2026, 1, 1)
    rows = []
    for i in range(ROWS):
        product = rng.choice(sorted(PRODUCTS))
        rows.append({"date": (start + timedelta(days=3 * i)).isoformat(), "region": rng.choice(REGIONS),
                     "product": product, "units": rng.randint(1, 40), "unit_price": PRODUCTS[product]})
    return rows


def _csv(rows: list[dict[str, object]]) -> str:
    lines = ["date,region,product,units,unit_price"]
    lines += [f"{r['date']},{r['region']},{r['product']},{r['units']},{r['unit_price']:.2f}" for r in rows]
    return "\n".join(lines) + "\n"


def _arithmetic(rng: random.Random, number: int) -> dict[str, object]:
    a, b, c, d = (rng.randint(2, 60) for _ in range(4))
    # No leading parenthesis: the demo model reads an expression from its first digit.
    expression = rng.choice([f"{a} * {b} + {c}", f"{a} * ({b} + {c}) - {d}", f"{a} * {b} - {c} * {d}",
                             f"{a} + {b} * {c} + {d}"])
    value = eval(expression)  # noqa: S307 - an expression this script just built from integers
    return {
        "id": f"arithmetic-{number:02d}", "type": "arithmetic", "prompt": f"What is {expression}?",
        "expected": str(value), "criteria": [f"the answer states the value of {expression}"],
        "scorer": {"kind": "numeric", "pattern": NUMERIC, "tolerance": 1e-9},
    }


def _lookup(shop: str, rows: list[dict[str, object]], region: str, number: int) -> dict[str, object]:
    path = f"data/tasks/{shop}.csv"
    total = sum(int(r["units"]) * float(r["unit_price"]) for r in rows if r["region"] == region)  # type: ignore[call-overload]
    return {
        "id": f"lookup-{number:02d}", "type": "lookup",
        "prompt": f"Compute the revenue (units × unit_price) of region {region} in {path}.",
        "expected": f"{total:.2f}",
        "criteria": [f"the revenue of region {region} equals the sum of units × unit_price over every row of region {region} in {path}"],
        "scorer": {"kind": "numeric", "pattern": NUMERIC, "tolerance": 0.005},
    }


def build(out: Path) -> list[Path]:
    """Write the tables and tasks.jsonl into `out`; return the paths written."""
    rng = random.Random(SEED)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    tables = {}
    for shop in SHOPS:
        tables[shop] = _table(rng)
        path = out / f"{shop}.csv"
        path.write_text(_csv(tables[shop]), encoding="utf-8")
        written.append(path)
    tasks = [_arithmetic(rng, n) for n in range(1, 9)]
    pairs = [(shop, region) for shop in SHOPS for region in REGIONS]
    rng.shuffle(pairs)
    present = [(s, r) for s, r in pairs if any(row["region"] == r for row in tables[s])]
    tasks += [_lookup(shop, tables[shop], region, n) for n, (shop, region) in enumerate(present[:8], start=1)]
    path = out / "tasks.jsonl"
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    return [*written, path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="directory to write (default: data/tasks/)")
    args = parser.parse_args(argv)
    for path in build(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
