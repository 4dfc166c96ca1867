"""Generate notebook 07 (exploring a big run) with nbformat and execute it with nbclient.

    .venv/bin/python notebooks/build_explorer_notebook.py            # write and execute it
    .venv/bin/python notebooks/build_explorer_notebook.py --no-run   # write without executing

The notebook is an output of this script: edit the cells here, then re-run it. It runs offline
in a few seconds: the tree it explores is written by `cyber_agent/notebook/sample_tree.py`
(seeded, so its text is the same on every run). Cells marked `# NBVAL_CHECK_OUTPUT` print only
deterministic text (paths, titles, verdicts, counts; trace ids are sanitized) and are compared by
`pytest --nbval-lax --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg`; widget cells
carry `# NBVAL_IGNORE_OUTPUT`. (Notebooks 01–06 come from `build_notebooks.py` and
`build_recursive_notebooks.py`.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from build_notebooks import code, md
from build_notebooks import main as build_all

HERE = Path(__file__).resolve().parent

SETUP = """\
import tempfile
from pathlib import Path

import pandas as pd
from IPython.display import display

pd.set_option("display.width", 140)
pd.set_option("display.max_columns", 12)
pd.set_option("display.max_colwidth", 60)"""


def explore_a_run() -> list[nbformat.NotebookNode]:
    return [
        md("""
# 07 · Exploring a big run: folded trees and the trace explorer

A recursive run of a real task easily spawns hundreds of agents and validators. A drawing of
every trace at once is a grey smear, and a table of 800 rows hides the one branch that failed.
This notebook shows the two tools for big trees: **drawings that fold** what does not fit into
count nodes, and the **trace explorer**, a tree you open a branch at a time.

We need a big run, and we do not want to wait for one: `write_sample_tree` writes a seeded
recursive-mode tree — a revenue audit, regions → products → months → invoice batches —
straight into a store, through the same store API a run uses. Nothing runs; the numbers
(tokens, simulated costs, verdicts) are made up but shaped like a real run: a fifth of the first
reports fail their validation and are revised, a few agents fail or stop.
"""),
        code(SETUP),
        code("""
from cyber_agent.notebook.sample_tree import write_sample_tree

TMP = tempfile.TemporaryDirectory(prefix="cyber-agent-nb07-")  # removed when the kernel exits
STORE = Path(TMP.name)
sample = write_sample_tree(STORE, traces=300, seed=7)
ROOT = sample.root_trace_id
print(f"{sample.traces} traces: {sample.agents} agents and {sample.validators} validators, {sample.depth} levels deep")
print(f"{sample.failed} agents failed, {sample.stopped} stopped")""", check=True),
        md("""
## The whole tree, folded

`draw_trace_tree` fits the tree into a figure a notebook shows at full size (at most 15 × 26
inches). It shows levels from the root while they fit; where they stop fitting, each parent
keeps its first children and a grey **`+N traces`** count node stands for the rest, saying how
many of them failed, stopped or got a failing verdict (`✗`) — a red ring means something went
wrong in there. Every label starts with a unique **path**: `2.3` is the third agent of the second
agent, `2.3.v1` its first validator; then what the agent handled, the words of its objective that
differ from its siblings'.
"""),
        code("""
from cyber_agent.notebook import draw_trace_tree

draw_trace_tree(STORE, ROOT)"""),
        md("""
`max_depth` and `max_nodes` choose how much to show (more nodes take longer to render: about
5–10 ms a label); `fold=False` draws every trace, labelling only what does not overlap:
"""),
        code("""
draw_trace_tree(STORE, ROOT, max_depth=1)"""),
        md("""
## The explorer

`TraceExplorer` shows the run as the toolkit's tree view: click a row to expand it and see its
page — brief, report and the parent's review, verdicts, goals, usage —, search by path or text.
Below it, the selected trace's page with its last messages (read from the store when you first
select the trace). It is HTML, not a widget: saved, this notebook reopens as you left it, in
JupyterLab, on GitHub and in nbviewer (where the tree is a collapsible outline).
"""),
        code("""
from cyber_agent.notebook import TraceExplorer

explorer = TraceExplorer(STORE, ROOT)
explorer""", ignore=True),
        md("""
The explorer's state is plain Python — rows you open a branch at a time (**▸** a collapsed
agent, with what lies below it: `+57: 3 failed/stopped, 4 ✗`; **▾** an expanded one; **·** a
leaf) and a selected trace — so you can steer it from a cell (and the page above follows). Where did an agent fail? `find` selects the next match and opens its
ancestors:
"""),
        code("""
failed = explorer.find("failed")
page = explorer.page_of()
print(page.headline)
for line in page.section("report"):
    print(" ", line)""", check=True),
        md("And a trace whose first report was rejected, then revised and accepted:"),
        code("""
checks = explorer.frames.validations.drop_duplicates("validator_trace_id")
rounds = checks.groupby("trace_id")["verdict"].apply(" → ".join)  # the verdicts of each trace's reports, in order
revised = rounds[rounds == "fail → pass"].index[0]
explorer.select(revised)
for name in ("brief", "verdicts"):
    print(f"[{name}]")
    for line in explorer.page_of().section(name):
        print(" ", line)""", check=True),
        md("The rows now open, as text (`explorer.to_text()` prints them with the page):"),
        code("""
for label, _ in explorer.rows[:14]:
    print(label.replace("\\u00a0", " "))""", check=True),
        md("""
## Where the failures are, in pandas

`explorer.frames` holds the tree's frames and `explorer.texts` every trace's path and title,
so the explorer's names join any analysis:
"""),
        code("""
traces = explorer.frames.traces.assign(path=lambda t: t["trace_id"].map(lambda i: explorer.texts[i].path),
                                       title=lambda t: t["trace_id"].map(lambda i: explorer.texts[i].title))
traces.loc[traces["status"].isin(["failed", "stopped"]), ["path", "role", "title", "status", "error_message"]]""",
             check=True),
        md("""
## A branch's goals, and who used the tokens

Goal trees fold the same way. Here the goals of the second delegate and of every agent below it;
failed and stopped agents leave their plans open, and those goals are drawn in the agent's colour:
"""),
        code("""
from cyber_agent.notebook import draw_goal_tree, plot_usage_by_agent

second = explorer.children(ROOT)[1]
draw_goal_tree(STORE, second)"""),
        md("""
`plot_usage_by_agent` keeps the 25 biggest agents (by tokens) in tree order and sums the rest
into one bar, so even a 1,000-trace run gives a chart you can read:
"""),
        code("plot_usage_by_agent(STORE, ROOT)"),
        md("""
On your own runs: `TraceExplorer(".trace", root_trace_id)` opens a store directory,
`TraceExplorer("run.jsonl.gz", root_trace_id)` an export. The temporary store of this notebook
stays until the kernel exits, so you can keep exploring it.
"""),
    ]


NOTEBOOKS = {"07_explore_a_run.ipynb": explore_a_run}


def main(argv: list[str] | None = None) -> int:
    """Write (and execute) notebook 07 with the legacy builder's machinery."""
    return build_all(argv, NOTEBOOKS)


if __name__ == "__main__":
    sys.exit(main())
