"""`bench/overhead.py --before REF`: the same bench on the code of a git ref and on this checkout, in one run.

Each side runs in a child process (`overhead.py --json`), `before` importing `cyber_agent` from
REF's tree (`targets.py:before_tree`, extracted once per commit) and `after` from this checkout
(or, with `--after REF2`, from REF2's tree, so the working tree may change meanwhile);
the children alternate (before, after, before, after, ...), so a change in machine load hits both
sides alike. The bench script itself is this checkout's on both sides: the harness is the same,
only the library differs. The table gives, per case and N, the median over the children of each
side's median µs/step and of its ratio to LangGraph measured in the same child.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from targets import REPO, before_tree  # bench/targets.py, beside this file

CODE_ENV = "OVERHEAD_BENCH_CODE"
"""The folder whose `cyber_agent` a child imports (put first on `sys.path` by overhead.py)."""


def _resolve(ref: str) -> str:
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"--before {ref!r}: not a commit of {REPO} ({out.stderr.strip()})")
    return out.stdout.strip()


def _child(code: Path, args: list[str], out: Path, timeout: float) -> dict[str, Any]:
    env = dict(os.environ)
    env[CODE_ENV] = str(code)
    env["PYTHONPATH"] = str(code) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, str(Path(__file__).with_name("overhead.py")), *args, "--json", str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if not out.exists():
        raise SystemExit(f"child on {code} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    payload: dict[str, Any] = json.loads(out.read_text())
    used = payload["environment"].get("cyber_agent_from")
    if used is not None and Path(used) != code.resolve():
        raise SystemExit(f"a child meant to import cyber_agent from {code} imported it from {used}")
    return payload


def _medians(children: list[dict[str, Any]]) -> dict[tuple[str, str, int], dict[str, float]]:
    """Per (framework, store, N): median over children of µs/step and of the ratio to LangGraph in memory, and of
    each child's fastest run and its ratio to LangGraph's fastest (steadier than medians on a loaded machine)."""
    per: dict[tuple[str, str, int], dict[str, list[float]]] = {}
    for child in children:
        for row in child["results"]:
            if row.get("median_us_per_step") is None:
                continue
            slot = per.setdefault((row["framework"], row["store"], row["n"]), {"us": [], "ratio": [], "min": [], "min_ratio": []})
            slot["us"].append(row["median_us_per_step"])
            slot["min"].append(row["min_us_per_step"])
            if row.get("ratio_vs_langgraph") is not None:
                slot["ratio"].append(row["ratio_vs_langgraph"])
            if row.get("ratio_of_mins_vs_langgraph") is not None:
                slot["min_ratio"].append(row["ratio_of_mins_vs_langgraph"])
    return {key: {name: statistics.median(values) for name, values in slot.items() if values}
            for key, slot in per.items()}


def run_pairs(ref: str, pairs: int, args: list[str], *, after_ref: str | None = None,
              timeout: float = 900.0) -> dict[str, Any]:
    """Run `pairs` (before, after) children with the bench arguments `args`; print and return the table.

    `after_ref`: the after side is that commit's tree too (default: this checkout as it is), so the
    working tree may change while the bench runs."""
    commit = _resolve(ref)
    before = before_tree(commit)
    after_commit = _resolve(after_ref) if after_ref else None
    after = before_tree(after_commit) if after_commit else REPO
    sides: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="overhead-pairs-") as tmp:
        for i in range(pairs):
            for side, code in (("before", before), ("after", after)):
                out = Path(tmp) / f"{side}-{i}.json"
                sides[side].append(_child(code, args, out, timeout))
                print(f"pair {i + 1}/{pairs}: {side} done (load {os.getloadavg()[0]:.2f})", flush=True)
    old, new = _medians(sides["before"]), _medians(sides["after"])
    rows = []
    for key in sorted(set(old) | set(new), key=lambda k: (k[2], k[0], k[1])):
        a, b = old.get(key, {}), new.get(key, {})
        rows.append({"framework": key[0], "store": key[1], "n": key[2],
                     "before_us_per_step": a.get("us"), "after_us_per_step": b.get("us"),
                     "before_ratio": a.get("ratio"), "after_ratio": b.get("ratio"),
                     "before_min_us_per_step": a.get("min"), "after_min_us_per_step": b.get("min"),
                     "before_min_ratio": a.get("min_ratio"), "after_min_ratio": b.get("min_ratio")})
    where = f"{after_ref} ({after_commit[:10]})" if after_ref and after_commit else "this checkout"
    print(f"\nbefore = {ref} ({commit[:10]}), after = {where}; {pairs} alternating pair(s) of child runs "
          f"({' '.join(args)}); medians over the children\n")
    print("| case | N | before µs/step | after µs/step | after / before | before vs LangGraph | after vs LangGraph "
          "| min before / after µs | min ratio before / after |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        us_a, us_b = row["before_us_per_step"], row["after_us_per_step"]
        change = f"{us_b / us_a:.2f}" if us_a and us_b else "-"
        print(f"| {row['framework']} ({row['store']}) | {row['n']} | {_f(us_a, '.0f')} | {_f(us_b, '.0f')} | {change} "
              f"| {_f(row['before_ratio'], '.3f')}× | {_f(row['after_ratio'], '.3f')}× "
              f"| {_f(row['before_min_us_per_step'], '.0f')} / {_f(row['after_min_us_per_step'], '.0f')} "
              f"| {_f(row['before_min_ratio'], '.3f')}× / {_f(row['after_min_ratio'], '.3f')}× |")
    return {"ref": ref, "commit": commit, "after_ref": after_ref, "after_commit": after_commit, "pairs": pairs,
            "args": args, "rows": rows, "before": sides["before"], "after": sides["after"]}


def _f(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)
