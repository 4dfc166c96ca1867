"""Import time of `cyber_agent.notebook`, before (#34) and after, side by side in fresh interpreters.

    .venv/bin/python bench/notebook_import.py              # 9 fresh interpreters per row, alternating before/after
    .venv/bin/python bench/notebook_import.py --quick      # 5
    .venv/bin/python bench/notebook_import.py --json out.json

Each sample is a new `python -c` that times one import statement from inside (the interpreter's
own start is not in it) and lists the heavy libraries it left loaded. Rows: `import
cyber_agent.notebook` (target <= 0.6 s), and the first use of a few helpers (`from
cyber_agent.notebook import launch` / `to_frames` / `draw_trace_tree`: what a first cell pays,
reported, no target). The floor is `import cyber_agent` (the package root, itself lazy). `before`
imports `cyber_agent` from `bench/targets.py:BEFORE_REF`, extracted into a temporary folder;
before and after samples alternate, so machine load hits both alike. Medians are printed.
(`bench/import_speed.py` is another bench: the importers of outside runs.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from targets import before_tree, env_for, target  # noqa: E402

HEAVY = ("pandas", "matplotlib", "networkx", "ipywidgets", "pyarrow", "httpx", "pydantic_ai", "langgraph",
         "cyber_agent.core.runner")
PROBE = """
import sys, time
started = time.perf_counter()
{statement}
seconds = time.perf_counter() - started
print(seconds, ",".join(m for m in {heavy!r} if m in sys.modules))
"""
STATEMENTS = {
    "notebook": "import cyber_agent.notebook",
    "floor": "import cyber_agent",
    "launch": "from cyber_agent.notebook import launch",
    "to_frames": "from cyber_agent.notebook import to_frames",
    "draw_trace_tree": "from cyber_agent.notebook import draw_trace_tree",
}


def sample(statement: str, tree: Path | None) -> tuple[float, str]:
    ran = subprocess.run([sys.executable, "-c", PROBE.format(statement=statement, heavy=HEAVY)], env=env_for(tree),
                         capture_output=True, text=True, cwd="/", timeout=300, check=True)
    seconds, _, heavy = ran.stdout.strip().splitlines()[-1].partition(" ")
    return float(seconds), heavy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 interpreters per row")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    reps = args.reps or (5 if args.quick else 9)
    trees = {"before": before_tree(), "after": None}
    times: dict[tuple[str, str], list[float]] = {}
    loaded: dict[tuple[str, str], str] = {}
    for _ in range(reps):
        for name, statement in STATEMENTS.items():
            for side, tree in trees.items():  # alternate: load hits both sides alike
                if name == "floor" and side == "before":
                    continue
                seconds, heavy = sample(statement, tree)
                times.setdefault((name, side), []).append(seconds)
                loaded[(name, side)] = heavy
    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"median of {reps} fresh interpreters each; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'statement':<52} {'before':>8} {'after':>8}  heavy modules loaded after")
    for name, statement in STATEMENTS.items():
        before = median.get((name, "before"))
        print(f"{statement:<52} {'-' if before is None else f'{before:.3f}':>8} {median[(name, 'after')]:>8.3f}  "
              f"{loaded[(name, 'after')] or '-'}")
    after, floor = median[("notebook", "after")], median[("floor", "after")]
    rows = [target("34.import.notebook", after=after, before=median[("notebook", "before")], floor=floor,
                   floor_name="import cyber_agent", unit="s", limit="<= 0.6 s", met=after <= 0.6,
                   note=f"heavy modules loaded after: {loaded[('notebook', 'after')] or 'none'}")]
    if args.json:
        Path(args.json).write_text(json.dumps({
            "bench": "notebook_import", "reps": reps, "load": os.getloadavg()[0], "issue_targets": rows,
            "rows": [{"statement": STATEMENTS[name], "side": side, "median_s": value, "samples": times[(name, side)],
                      "heavy_loaded": loaded[(name, side)]} for (name, side), value in median.items()],
        }, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
