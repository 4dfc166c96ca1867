"""Run every bench in one go, print one table of medians, ratios and targets, write bench/results/latest.json.

    python bench/run_all.py                 # the whole suite (~8-11 min on a busy 2-core machine)
    python bench/run_all.py --quick         # fewer repetitions and smaller sizes (~1.5-5 min)
    python bench/run_all.py --only tree,store --dir /dev/shm

Each bench runs as its own child process, one after the other (never side by side: they would
slow each other down), with a time limit; the child writes its results as JSON and this script
reads them. A bench that is missing, times out or fails becomes a row marked so, never a crash:

| key       | script                                | what                                                                   |
| --------- | ------------------------------------- | ---------------------------------------------------------------------- |
| overhead  | bench/overhead.py                     | per-step overhead vs pydantic-ai and LangGraph (peers missing: skipped) |
| store     | bench/store_scale.py                  | add_message rate and main-path load at 10k and 100k messages           |
| tree      | bench/recursive_tree.py (file, memory)| a 50-agent recursive tree, sequential vs parallel(2)                    |
| notebook  | bench/notebook.py                     | to_frames of 100k messages vs raw read+parse; 1,000-node tree drawing   |
| trees     | bench/notebook_trees.py               | fitted tree figures (25/100/1,000 traces, ~1,000 goals), explorer open  |
| calls     | bench/store_calls.py                  | TraceStore calls and file writes per model call (demo runs, a tree)     |
| latency   | bench/tool_latency.py                 | a live server's GET latency while the worst tool calls run (< 0.5 s)    |
| sweeps    | bench/sweeps.py                       | sweep cells/s per backend at concurrency 64, before and after #34       |
| import    | bench/notebook_import.py              | `import cyber_agent.notebook`, before and after #34 (<= 0.6 s)          |
| frames    | bench/frames.py                       | the columnar frames path (#34; engineer `frames`)                       |

Issue targets: a bench that measures a target an issue states writes rows made by
`bench/targets.py:target` under `"issue_targets"` in its JSON. After the benches this script
prints one table per issue — measure, before, after, floor, ratio, target, met — matched by id
against the issue's declared list (`bench/targets.py:ISSUE_34`): a declared target no bench
measured shows as NOT MEASURED. `--markdown FILE` writes that table as Markdown (for
docs/performance.md). A new bench registers in `EXTRA_BENCHES` (key, script, extra arguments,
time limits); its rows in the main table come from its `issue_targets`.

The exit status is 1 if a cyber_agent bench failed or timed out, else 0: a target that is not
met is a finding to read in the table, not a crash.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from targets import ISSUE_34, Declared  # noqa: E402

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results" / "latest.json"
VERDICT = {True: "MET", False: "NOT MET", None: "-"}


@dataclass(kw_only=True)
class Outcome:
    """What one bench child process produced."""

    key: str
    command: list[str]
    status: str = "ok"
    """ok | failed | timeout | not available."""
    seconds: float = 0.0
    data: dict[str, Any] | None = None
    """The bench's JSON (or what was parsed from its output)."""
    detail: str = ""
    stdout: str = field(default="", repr=False)


def _run(key: str, args: list[str], timeout: float, json_path: Path | None) -> Outcome:
    """Run one bench script, echo its output indented, and load its JSON."""
    command = [sys.executable, *args]
    print(f"\n=== {key}: {' '.join(Path(a).name if a.endswith('.py') else a for a in args)} (limit {timeout:.0f}s)",
          flush=True)
    outcome = Outcome(key=key, command=command)
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines: list[str] = []

    def echo() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            print(f"  {lines[-1]}", flush=True)

    reader = threading.Thread(target=echo, daemon=True)
    reader.start()
    try:
        # The child's own time budgets keep it short; the limit is the backstop for a hang.
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        outcome.status, outcome.detail = "timeout", f"killed after {timeout:.0f}s"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=10)
    outcome.seconds = time.perf_counter() - started
    outcome.stdout = "\n".join(lines)
    if outcome.status == "ok" and proc.returncode != 0:
        tail = next((line for line in reversed(lines) if line.strip()), "")
        outcome.status, outcome.detail = "failed", f"exit status {proc.returncode}: {tail[:200]}"
    if json_path is not None and json_path.exists():
        try:
            outcome.data = json.loads(json_path.read_text())
        except ValueError as exc:
            outcome.status, outcome.detail = "failed", f"unreadable JSON: {exc}"
    elif json_path is not None and outcome.status == "ok":
        outcome.status, outcome.detail = "failed", "wrote no JSON"
    return outcome


def _supports(script: Path, flag: str) -> bool:
    try:
        help_text = subprocess.run([sys.executable, str(script), "--help"], cwd=REPO, capture_output=True, text=True,
                                   timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return flag in help_text


# ---- notebook.py prints, it does not write JSON: read its verdict lines ------------------------
_DRAW = re.compile(r"^\s*(?P<name>.+?)\s+nodes=\s*(?P<nodes>\d+)\s+draw=(?P<draw>[\d.]+) s\s+draw\+png=(?P<total>[\d.]+) s")
_FRAMES = re.compile(r"^\s*(?P<clock>wall|cpu): raw read\+json\.loads=(?P<raw>[\d.]+) s\s+to_frames=(?P<frames>[\d.]+) s"
                     r"\s+ratio=(?P<ratio>[\d.]+)x")
_FRAMES_HEAD = re.compile(r"frames of (?P<messages>[\d,]+) messages")


def parse_notebook(stdout: str) -> dict[str, Any]:
    """The figures bench/notebook.py prints, as data (empty lists if its format changed)."""
    draws, frames, messages = [], [], None
    for line in stdout.splitlines():
        if match := _DRAW.match(line):
            draws.append({"tree": match["name"].strip(), "nodes": int(match["nodes"]), "draw_s": float(match["draw"]),
                          "draw_png_s": float(match["total"])})
        elif match := _FRAMES.match(line):
            frames.append({"clock": match["clock"], "raw_s": float(match["raw"]), "frames_s": float(match["frames"]),
                           "ratio": float(match["ratio"])})
        elif match := _FRAMES_HEAD.search(line):
            messages = int(match["messages"].replace(",", ""))
    return {"bench": "notebook", "draw": draws, "frames": frames, "frames_messages": messages}


# ---- the table ----------------------------------------------------------------------------------
Row = dict[str, Any]


def _row(bench: str, measure: str, value: str, ratio: float | None = None, limit: str = "",
         met: bool | None = None) -> Row:
    return {"bench": bench, "measure": measure, "value": value,
            "ratio": None if ratio is None else round(ratio, 3), "target": limit, "verdict": VERDICT[met]}


def _missing(outcome: Outcome, bench: str) -> list[Row]:
    return [_row(bench, outcome.status, outcome.detail or "-")]


def rows_overhead(outcome: Outcome) -> list[Row]:
    """Per-step medians of every framework and the overhead targets."""
    data = outcome.data
    if not data:
        return _missing(outcome, "overhead")
    rows = []
    for r in data["results"]:
        name = f"{r['framework']} ({r['store']}) N={r['n']}"
        if r.get("skipped"):
            rows.append(_row("overhead", name, f"skipped: {r['skipped']}"))
        elif r.get("error"):
            rows.append(_row("overhead", name, f"FAILED: {r['error']}"))
        elif r["median_us_per_step"] is not None:
            rows.append(_row("overhead", name, f"{r['median_us_per_step']:.0f} us/step", r["ratio_vs_langgraph"]))
    for t in data["targets"]:
        label = t["name"] if "flatness" in t["name"] else f"{t['name']} at N={t['n']}"
        value = "-" if t["value"] is None else f"{t['value']:.3f}"
        rows.append(_row("overhead", label, value, t["value"], f"<= {t['limit']}", t["met"]))
    return rows


def rows_store(outcome: Outcome) -> list[Row]:
    """us/add and main-path loads per store and size, and the flatness checks."""
    data = outcome.data
    if not data:
        return _missing(outcome, "store")
    rows = []
    for result in data["results"]:
        for size, r in sorted(result["sizes"].items(), key=lambda kv: int(kv[0])):
            cold = f", cold {r['path_cold_s']:.2f} s" if r["path_cold_s"] is not None else ""
            rows.append(_row("store", f"{result['store']} store at {int(size):,} messages",
                             f"{r['us_per_add']:.0f} us/add; main path warm {r['path_warm_s']:.2f} s{cold}"))
        if result["stopped_at"] is not None:
            rows.append(_row("store", f"{result['store']} store", f"fill budget ran out at {result['stopped_at']:,} messages"))
    for t in data["targets"]:
        value = "-" if t["value"] is None else f"{t['value']:.2f}"
        rows.append(_row("store", t["name"], value, t["value"], f"<= {t['limit']}", t["met"]))
    return rows


def rows_tree(outcome: Outcome, store: str) -> list[Row]:
    """Sequential and parallel medians and the ratio target."""
    data = outcome.data
    bench = f"tree ({store})"
    if not data:
        return _missing(outcome, bench)
    config, med = data["config"], data["median_s"]
    rows = [_row(bench, f"{mode}, {config['agents']} agents, {config['latency_s'] * 1000:.0f} ms/call",
                 f"{med[mode]:.2f} s" if med[mode] is not None else "-") for mode in ("sequential", "parallel")]
    if data.get("error"):
        rows.append(_row(bench, "FAILED", data["error"][:200]))
    target = data["targets"][0]
    agents = "same agent count" if data["same_agent_count"] else "AGENT COUNTS DIFFER"
    rows.append(_row(bench, f"{target['name']} ({agents})", "-" if target["value"] is None else f"{target['value']:.3f}",
                     target["value"], f"<= {target['limit']}", target["met"]))
    return rows


def rows_notebook(outcome: Outcome, quick: bool) -> list[Row]:
    """Frames vs raw read (target <= 1.5x) and tree drawing (target < 1 s)."""
    data = outcome.data
    if not data or (not data["frames"] and not data["draw"]):
        return _missing(outcome, "notebook") if outcome.status != "ok" else [_row("notebook", "unparsed", "no figures found")]
    rows = []
    size = data["frames_messages"]
    note = " [--quick size]" if quick and size and size < 100_000 else ""
    for f in data["frames"]:
        rows.append(_row("notebook", f"to_frames / raw read+parse, {size:,} msgs, {f['clock']} clock{note}",
                         f"{f['frames_s']:.2f} s vs {f['raw_s']:.2f} s", f["ratio"], "<= 1.5", f["ratio"] <= 1.5))
    for d in data["draw"]:
        rows.append(_row("notebook", f"draw {d['tree']} ({d['nodes']} nodes) + PNG", f"{d['draw_png_s']:.3f} s",
                         None, "< 1 s", d["draw_png_s"] < 1.0))
    return rows


def rows_trees(outcome: Outcome) -> list[Row]:
    """Big trees: graph + draw < 0.5 s within the caps at 1,000 traces / goals; the explorer opens in < 1 s."""
    data = outcome.data
    if not data:
        return _missing(outcome, "trees")
    rows = []
    for t in data["trees"]:
        big = (t["goals"] or t["traces"]) >= 1000
        rows.append(_row("trees", f"{t['tree']}: graph + draw ({t['pixels'][0]}x{t['pixels'][1]} px, {t['nodes_drawn']} drawn; "
                         f"PNG {t['png_s']:.3f} s)", f"{t['graph_draw_s']:.3f} s", None, "< 0.5 s" if big else "",
                         (t["graph_draw_s"] < 0.5 and t["within_caps"]) if big else None))
    for e in data["explorer"]:
        rows.append(_row("trees", f"explorer opens {e['traces']} traces ({e['store']} store)", f"{e['open_s']:.3f} s", None,
                         "< 1 s", e["open_s"] < 1.0))
    return rows


def rows_calls(outcome: Outcome) -> list[Row]:
    """get_trace, update_trace, all store calls and file writes per model call, per scenario (counts, no target)."""
    data = outcome.data
    if not data:
        return _missing(outcome, "calls")
    rows = []
    for summary in data["scenarios"]:
        stores = summary["stores"]
        s = stores.get("file") or stores["memory"]
        per = s["per_model_call"]
        writes = f", writes {per['all_writes']:.2f}" if "all_writes" in per else ""
        rows.append(_row("calls", f"{summary['scenario']}: per model call ({s['model_calls']} calls, {s['traces']} traces)",
                         f"get_trace {per.get('get_trace', 0):.2f}, update {per.get('update_trace', 0):.2f}, "
                         f"all {per['total_calls']:.2f}{writes}"))
        for note in summary["notes"]:
            rows.append(_row("calls", f"{summary['scenario']}: note", note))
    return rows


def rows_latency(outcome: Outcome) -> list[Row]:
    """Worst GET latency of a live server while each hostile tool call runs (target < 0.5 s)."""
    data = outcome.data
    if not data:
        return _missing(outcome, "latency")
    return [_row("latency", f"GET while {c['call']} runs ({c['gets']} GETs, median {c['median_get_s']:.4f} s)",
                 f"worst {c['max_get_s']:.4f} s", None, "< 0.5 s", c["max_get_s"] < 0.5) for c in data["calls"]]


def rows_report(outcome: Outcome) -> list[Row]:
    """The "does delegation pay" report of a 1,000-cell sweep: frame, shape, report, chart (target < 2 s)."""
    data = outcome.data
    if not data:
        return _missing(outcome, "report")
    m = data["median_s"]
    return [_row("report", f"sweep report of {data['cells']} cells (frame {m['frame']:.2f} + shape {m['shape']:.2f} + "
                           f"report {m['report']:.2f} + chart {m['chart']:.2f} s)", f"{m['total']:.3f} s", None,
                 f"< {data['target_s']} s", data["met"])]


@dataclass(frozen=True, kw_only=True)
class ExtraBench:
    """A bench whose only rows in the table are its `issue_targets` (see bench/targets.py)."""

    key: str
    script: str
    extra: tuple[str, ...] = ()
    timeout: float = 600
    timeout_quick: float = 300
    takes_dir: bool = False
    """Whether the script accepts `--dir` (passed on from run_all's own)."""


EXTRA_BENCHES: tuple[ExtraBench, ...] = (
    ExtraBench(key="sweeps", script="sweeps.py", extra=("--only", "asyncio,process,ray"), timeout=1800, timeout_quick=900,
               takes_dir=True),
    ExtraBench(key="import", script="notebook_import.py", timeout=600, timeout_quick=300),
    ExtraBench(key="frames", script="frames.py", timeout=900, timeout_quick=400),
)


def issue_targets(outcomes: dict[str, Outcome]) -> dict[str, dict[str, Any]]:
    """Every measured target row (bench/targets.py:target) of every bench, by id."""
    found: dict[str, dict[str, Any]] = {}
    for key, outcome in outcomes.items():
        for row in (outcome.data or {}).get("issue_targets", []) if isinstance(outcome.data, dict) else []:
            if isinstance(row, dict) and "id" in row:
                found[row["id"]] = {**row, "bench_key": key}
    return found


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("s", "GB", "x"):
        return f"{value:.3g} {unit}" if unit != "x" else f"{value:.3f}x"
    return f"{value:,.0f} {unit}" if abs(value) >= 100 else f"{value:.3g} {unit}"


def issue_table(declared: tuple[Declared, ...], found: dict[str, dict[str, Any]],
                outcomes: dict[str, Outcome]) -> list[Row]:
    """One row per declared target: what the benches measured, or why nothing was."""
    rows = []
    for item in declared:
        row = found.get(item.id)
        if row is None:
            outcome = outcomes.get(item.bench)
            why = "bench not run" if outcome is None else f"bench {outcome.status}" if outcome.status != "ok" else "no row"
            rows.append({"id": item.id, "measure": item.measure, "before": "-", "after": "-", "floor": "-", "ratio": "-",
                         "target": item.limit, "verdict": f"NOT MEASURED ({why})", "note": ""})
            continue
        unit = row.get("unit", "")
        floor = _figure(row.get("floor"), unit)
        if row.get("floor_name") and floor != "-":
            floor = f"{floor} ({row['floor_name']})"
        ratio = "-" if row.get("ratio") is None else f"{row['ratio']:.2f}x"
        if row.get("ratio_of") and ratio != "-":
            ratio = f"{ratio} ({row['ratio_of']})"
        rows.append({"id": item.id, "measure": item.measure, "before": _figure(row.get("before"), unit),
                     "after": _figure(row.get("after"), unit), "floor": floor, "ratio": ratio, "target": row["limit"],
                     "verdict": VERDICT[row.get("met")], "note": row.get("note", "")})
    return rows


def issue_markdown(title: str, rows: list[Row], env: dict[str, Any]) -> str:
    """The issue table as Markdown, with the run's date, commit and load."""
    lines = [f"### {title}", "",
             f"`bench/run_all.py`, {env['date']}, commit `{(env['git_commit'] or '?')[:10]}`"
             f"{' (dirty)' if env['git_dirty'] else ''}; {env['nproc']} CPUs, load average "
             f"{env['load_average'][0]:.1f} at the start.", "",
             "| measure | before | after | floor | ratio | target | met | note |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append("| " + " | ".join(str(r[k]).replace("|", "/") for k in
                                        ("measure", "before", "after", "floor", "ratio", "target", "verdict", "note")) + " |")
    return "\n".join(lines) + "\n"


def print_issue_table(title: str, rows: list[Row]) -> None:
    """Print an issue's table (one line per target)."""
    print(f"\n{title}")
    for r in rows:
        print(f"  {r['measure'][:64]:<64} before {r['before']:>14}  after {r['after']:>14}  floor {r['floor'][:28]:>28}  "
              f"ratio {r['ratio'][:8]:>8}  {r['target']:<18} {r['verdict']}")


def print_table(rows: list[Row]) -> None:
    """Print the consolidated table."""
    widths = {k: max(len(k), *(len(str(r[k] if r[k] is not None else "-")) for r in rows)) for k in rows[0]}
    widths["measure"] = min(widths["measure"], 70)
    widths["value"] = min(widths["value"], 60)
    header = "  ".join(k.ljust(widths[k]) for k in rows[0])
    print("\n" + header + "\n" + "-" * len(header))
    for r in rows:
        cells = []
        for k in r:
            text = "-" if r[k] is None else (f"{r[k]:.3f}x" if k == "ratio" else str(r[k]))
            cells.append(text[: widths[k]].ljust(widths[k]))
        print("  ".join(cells).rstrip())


# ---- environment --------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    """Date, machine size, load and git commit, for the JSON and the docs."""
    memory = None
    try:
        with open("/proc/meminfo") as handle:
            kib = int(next(line for line in handle if line.startswith("MemTotal")).split()[1])
        memory = round(kib / 1024 / 1024, 1)
    except (OSError, StopIteration, ValueError):
        pass

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                                  timeout=20).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            return None

    return {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "nproc": os.cpu_count(), "memory_gib": memory,
            "python": platform.python_version(), "platform": platform.platform(), "git_commit": git("rev-parse", "HEAD"),
            "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "load_average": list(os.getloadavg())}


def main(argv: list[str] | None = None) -> int:
    """Run the selected benches, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every bench in its --quick form")
    parser.add_argument("--only", help="comma-separated subset of: overhead,store,tree,notebook,trees,calls,latency,report,"
                                           + ",".join(b.key for b in EXTRA_BENCHES))
    parser.add_argument("--dir", help="directory for file stores' temporary traces (default: system temp)")
    parser.add_argument("--out", default=str(RESULTS), help=f"where to write the JSON (default {RESULTS.relative_to(REPO)})")
    parser.add_argument("--markdown", help="also write the issue target tables as Markdown here")
    args = parser.parse_args(argv)
    keys = ["overhead", "store", "tree", "notebook", "trees", "calls", "latency", "report", *(b.key for b in EXTRA_BENCHES)]
    wanted = keys if not args.only else [k for k in keys if k in args.only.split(",")]
    quick = ["--quick"] if args.quick else []
    where = ["--dir", args.dir] if args.dir else []
    env = machine()
    print(f"cyber_agent benches{' (--quick)' if args.quick else ''}: {env['nproc']} CPUs, {env['memory_gib']} GiB, "
          f"load average {env['load_average'][0]:.2f}, commit {(env['git_commit'] or '?')[:10]}"
          f"{' (dirty)' if env['git_dirty'] else ''}")
    started = time.perf_counter()
    outcomes: dict[str, Outcome] = {}
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-run-all-") as tmp_name:
        tmp = Path(tmp_name)

        def bench(key: str, script: str, extra: list[str], timeout: float, render: Callable[[Outcome], list[Row]]) -> None:
            path = BENCH / script
            if not path.exists():
                outcome = Outcome(key=key, command=[], status="not available", detail=f"bench/{script} does not exist")
            else:
                out = tmp / f"{key}.json"
                outcome = _run(key, [str(path), *quick, *extra, "--json", str(out)], timeout, out)
            outcomes[key] = outcome
            rows.extend(render(outcome))

        if "overhead" in wanted:
            # --quick: one round after the warm-up on a busy machine (pydantic-ai at N=400 alone takes ~20 s).
            bench("overhead", "overhead.py", [*where, *(["--budget", "45"] if args.quick else [])],
                  240 if args.quick else 420, rows_overhead)
        if "store" in wanted:
            bench("store", "store_scale.py", where, 240 if args.quick else 600, rows_store)
        if "tree" in wanted:
            for store in ("file", "memory"):
                extra = ["--store", store, *(where if store == "file" else [])]
                bench(f"tree_{store}", "recursive_tree.py", extra, 180 if args.quick else 420,
                      lambda o, s=store: rows_tree(o, s))
        if "notebook" in wanted:
            script = BENCH / "notebook.py"
            if not script.exists():
                outcome = Outcome(key="notebook", command=[], status="not available",
                                  detail="bench/notebook.py does not exist")
            elif _supports(script, "--json"):
                out = tmp / "notebook.json"
                outcome = _run("notebook", [str(script), *quick, *where, "--json", str(out)], 240 if args.quick else 600, out)
            else:
                outcome = _run("notebook", [str(script), *quick, *where], 240 if args.quick else 600, None)
                outcome.data = parse_notebook(outcome.stdout)
            outcomes["notebook"] = outcome
            rows.extend(rows_notebook(outcome, args.quick))
        if "trees" in wanted:
            bench("trees", "notebook_trees.py", where, 240 if args.quick else 420, rows_trees)
        if "calls" in wanted:
            bench("calls", "store_calls.py", where, 120, rows_calls)
        if "latency" in wanted:
            bench("latency", "tool_latency.py", [], 180, rows_latency)
        if "report" in wanted:
            bench("report", "sweep_report.py", [], 300 if args.quick else 900, rows_report)
        for extra in EXTRA_BENCHES:
            if extra.key in wanted:
                bench(extra.key, extra.script, [*extra.extra, *(where if extra.takes_dir else [])],
                      extra.timeout_quick if args.quick else extra.timeout,
                      lambda o, k=extra.key: _missing(o, k) if o.status != "ok" else [])
    seconds = time.perf_counter() - started
    found = issue_targets(outcomes)
    for row in found.values():  # every issue target in the main table too
        rows.append(_row(row["bench_key"], row["id"], _figure(row.get("after"), row.get("unit", "")), row.get("ratio"),
                         row.get("limit", ""), row.get("met")))
    issue_34 = issue_table(ISSUE_34, found, outcomes)
    print_table(rows)
    print_issue_table("issue #34 [speed]: every target, measured in this run", issue_34)
    env["load_average_at_end"] = list(os.getloadavg())
    print(f"\n(suite took {seconds:.0f}s; load average {env['load_average'][0]:.2f} at start, "
          f"{env['load_average_at_end'][0]:.2f} at end, on {env['nproc']} CPUs)")
    payload = {
        "schema": 1, "quick": args.quick, "machine": env, "seconds": round(seconds, 1), "table": rows,
        "issues": {"34": issue_34},
        "benches": {k: {"status": o.status, "detail": o.detail, "seconds": round(o.seconds, 1), "command": o.command[1:],
                        "results": o.data} for k, o in outcomes.items()},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=1))
    print(f"results written to {out}")
    if args.markdown:
        Path(args.markdown).write_text(issue_markdown("Issue #34 [speed]: the targets, measured in one run", issue_34, env),
                                       encoding="utf-8")
        print(f"issue tables written to {args.markdown}")
    broken = [o.key for o in outcomes.values() if o.status in ("failed", "timeout")]
    if broken:
        print(f"benches that failed or timed out: {', '.join(broken)}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
