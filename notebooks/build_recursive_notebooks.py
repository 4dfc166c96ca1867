"""Generate the recursive-mode example notebooks (02, 04) with nbformat and execute them with nbclient.

    .venv/bin/python notebooks/build_recursive_notebooks.py            # write and execute both
    .venv/bin/python notebooks/build_recursive_notebooks.py 04         # only notebooks whose name starts with 04
    .venv/bin/python notebooks/build_recursive_notebooks.py --no-run   # write without executing

The notebooks are outputs of this script: edit the cells here, then re-run it. Both run
offline on the `demo` model in a few seconds. Cells marked `# NBVAL_CHECK_OUTPUT` print only
deterministic text (labels, verdicts, figures from data/sales.csv; never trace ids, times or
paths) and are compared by
`pytest --nbval-lax --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg`;
the other cells only have to run without error. Widget cells carry `# NBVAL_IGNORE_OUTPUT`
too, for a strict `--nbval` run. (The legacy notebooks 01, 03, 05, 06 come from
`build_notebooks.py`.)
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

REPO = Path.cwd().parent  # notebooks run with their own folder as working directory
pd.set_option("display.width", 140)
pd.set_option("display.max_columns", 12)
pd.set_option("display.max_colwidth", 70)"""


def recursive_tree() -> list[nbformat.NotebookNode]:
    return [
        md("""
# 02 · A recursive run: the task tree, its validators and a revision

In **recursive mode** nobody grades their own homework. The root agent holds an immutable
*anchor* (objective, completion criteria, hard constraints). It delegates with a **TaskBrief**;
each child may delegate further, and ends with a **TaskReport**. An independent **validator**
re-reads the child's persisted trajectory and judges every completion criterion with evidence;
then the parent **reviews** the report (accept, revise, replan, split, fail). The root's own
answer only completes once the **root validator** accepts it against the anchor.

We run the bundled offline demo — the revenue per region of `data/sales.csv` and the top
region — on the deterministic `demo` model (no key, no network). It goes two levels deep, and
every region's first report is rejected by its validator and revised. This notebook looks at
the run as a tree; notebook 04 steps through the reports and verdicts one by one.
"""),
        code(SETUP),
        md("""
## The anchor

A recursive root cannot start without one. The demo's anchor is the one `cyber-agent demo`
uses:
"""),
        code("""
from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK

print("objective:", DEMO_ANCHOR["objective"])
for criterion in DEMO_ANCHOR["completion_criteria"]:
    print("criterion:", criterion)
for constraint in DEMO_ANCHOR["constraints"]:
    print("constraint:", constraint)""", check=True),
        md("""
## Launch and watch

`launch(..., mode="recursive", root_task_anchor=...)` starts the run on the toolkit's
background loop and returns as soon as the root trace exists; the progress table below the
cell updates live: agents and validators, depth, LLM calls, tokens, and one row per running
agent with the tool it runs now. Traces go to a temporary store, so re-running never collides
with an earlier run.

The demo model answers instantly, so a live view of it would jump straight from start to end.
`model="demo:latency=0.02"` makes each of its replies wait 20 ms, as a provider's would, and the
tree grows slowly enough to watch.
"""),
        code("""
import asyncio

from cyber_agent.notebook import launch

TMP = tempfile.TemporaryDirectory(prefix="cyber-agent-nb02-")  # removed when the kernel exits
STORE = Path(TMP.name)
handle = await launch(DEMO_TASK, mode="recursive", model="demo:latency=0.02", store=STORE, workspace=REPO,
                      root_task_anchor=DEMO_ANCHOR)
ROOT = handle.trace_id""", ignore=True),
        md("""
The cell returned while the tree is still growing, so the kernel is free. `handle.snapshot` is
the latest snapshot, and `handle.progress()` shows the live table again wherever it is called
(Run All has scrolled the first one away by now):
"""),
        code("handle.progress()", ignore=True),
        md("""
The snapshot is plain data; here we print one line each time the shape of the tree changes
(the exact lines depend on timing):
"""),
        code("""
shape = None
while not handle.done:
    snapshot = handle.snapshot
    if (snapshot.agents, snapshot.validators, snapshot.depth) != shape:
        shape = (snapshot.agents, snapshot.validators, snapshot.depth)
        print(snapshot.to_text())
    await asyncio.sleep(0.1)
result = await handle.result()
print(handle.snapshot.to_text())"""),
        md("""
## The answer

It came back only after the root validator passed it:
"""),
        code("""
print(result.status)
print(result.answer)""", check=True),
        md("""
## The trace tree

Every agent and every validator is its own trace. Validators hang under the trace they judged:
one under the root (the root validation), one under the delegate, and **two** under each
explore agent — one per report it submitted. Colour is the status, the marker the role; a
validator is filled with its **verdict** (red: fail, green: pass) and the trace it judged wears
the verdict of its latest validation as a ring. Each label starts with a unique **path**:
`1.3` is the third agent of the first agent, `1.3.v1` its first validator; the second line says
what the agent handled (the words of its objective that differ from its siblings').
"""),
        code("""
from cyber_agent.notebook import draw_trace_tree, to_frames, trace_graph

display(draw_trace_tree(handle.store, ROOT))"""),
        md("""
Every trace completed: a rejected report does not fail a trace, the child simply continues
(its first validator is red, the second green). `trace_graph` is a plain `networkx.DiGraph`
with the path, title and verdict of every node, so the same tree reads as text, in tree order:
"""),
        code("""
frames = to_frames(handle.store, ROOT)
graph = trace_graph(frames, ROOT)
for node, data in graph.nodes(data=True):
    about = data["title"] or data["checks"]
    print(f"{data['path']:<7} {data['role']:<10} {about:<30} {data['status']:<10} {data['verdict'] or ''}")""",
             check=True),
        md("""
## Which validator rejected which report, and how the revision passed

Three sources, joined in pandas: the reports each child submitted (its `submit_report` tool
calls, in order), the validator's verdicts on each report (`frames.validations` of scope
`criteria`; each follows the report's deterministic evidence check, scope `evidence`, which
notebook 04 shows), and the parent's decisions (the `reviews` its `Trace.protocol` keeps, in order).
"""),
        code("""
labels = frames.traces.set_index("trace_id")["label"]

calls = frames.tool_calls
submitted = calls[calls["tool_name"] == "submit_report"].sort_values(["trace_id", "sequence"])
submitted = submitted.assign(round=submitted.groupby("trace_id").cumcount(),
                             report=submitted["arguments"].map(lambda report: report["summary"]))

reviews = pd.DataFrame([review for protocol in frames.traces["protocol"]
                        for review in protocol.get("reviews", [])])
reviews = reviews.rename(columns={"child_trace_id": "trace_id"})
reviews = reviews.assign(round=reviews.groupby("trace_id").cumcount())

checks = frames.validations[frames.validations["scope"] == "criteria"]
# validation_index counts every validation of a trace, the evidence check before each validator included
checks = checks.assign(round=checks.groupby("trace_id")["validation_index"].rank(method="dense").astype(int) - 1)
history = (checks.merge(submitted[["trace_id", "round", "report"]], on=["trace_id", "round"], how="left")
                 .merge(reviews[["trace_id", "round", "decision"]], on=["trace_id", "round"], how="left"))
history = history.assign(agent=history["trace_id"].map(labels), report_no=history["round"] + 1,
                         validator=history["validator_trace_id"].map(labels))
history[["agent", "report_no", "report", "validator", "criterion_verdict", "decision"]]""", check=True),
        md("""
Each explore agent's first report summed only the rows of a truncated read; its validator
recomputed the total from the whole file, said so in its evidence, and the delegate sent the
report back with `revise` and that evidence as feedback. The same child read the whole file,
reported again, a second validator passed it, and the delegate accepted:
"""),
        code("""
east = history[history["agent"] == "explore 1"]
for row in east.itertuples():
    print(f"report {row.report_no}: {row.report}")
    print(f"  {row.validator}: {row.criterion_verdict} — {row.criterion_evidence}")
    print(f"  review: {row.decision}")""", check=True),
        md("""
And the root's candidate answer against the anchor's criteria, judged by the root validator:
"""),
        code("""
root_checks = frames.validations[frames.validations["scope"] == "root"]
root_checks[["criterion", "criterion_verdict", "criterion_evidence"]]""", check=True),
        md("""
## The goal trees

Inside each trace the agent keeps a plan, a goal tree. The root's: goal 1 is the task, goal 2
delegated the work (a square marks an `agent_call` goal) and completed once the delegate's
report was accepted, goal 3 reported the top region. All three are green: completed.
"""),
        code("""
from cyber_agent.notebook import draw_goal_tree

display(draw_goal_tree(handle.store, ROOT, sub_traces=False))"""),
        md("""
`draw_goal_tree` also hangs every sub-agent (a diamond) and its own goals under the goal that
started it. The delegate's plan, with the four explore agents it started and their goals
(`draw_goal_tree(handle.store, ROOT)` draws the whole nesting in one, wider, figure). Validators
do not appear in goal trees: they judge reports, they pursue no goals.
"""),
        code("""
DELEGATE = frames.traces.loc[frames.traces["label"] == "delegate 1", "trace_id"].iloc[0]
display(draw_goal_tree(handle.store, DELEGATE))"""),
        md("""
A goal tree is a plan, not the verdict. Two things are worth checking in any recursive run:
goals that were left open, and goal summaries that disagree with the report the parent finally
accepted (a goal's summary is written when the goal completes; a revised report comes later).
"""),
        code("""
goals = frames.goals.assign(agent=frames.goals["trace_id"].map(labels))
print("open goals:")
print(goals.loc[goals["status"] != "completed", ["agent", "goal_id", "description", "status"]].to_string(index=False)
      if (goals["status"] != "completed").any() else "  none")

accepted = frames.reports.set_index("trace_id")["summary"]
tops = goals[goals["parent_goal_id"].isna() & goals["trace_id"].isin(accepted.index)]
stale = tops[tops["summary"] != tops["trace_id"].map(accepted)]
print("goal summaries that differ from the accepted report:")
for row in stale.itertuples():
    print(f"  {row.agent}: goal says {row.summary!r}, accepted report says {accepted[row.trace_id]!r}")
if stale.empty:
    print("  none")""", check=True),
        md("""
Notebook 04 walks the same protocol step by step; notebook 03 covers the
tree-wide budget a recursive root freezes at creation; notebook 05 loads exported trees
(`data/exports/recursive_demo.jsonl` is this run) into pandas.

The run stays in its temporary store until the kernel shuts down, so every cell above can be
re-run and explored further. To keep a run, pass `store=".trace"` to `launch`, or export it with
`export_traces(handle.store, ROOT, "my_run.jsonl")`.
"""),
    ]


def reports_and_validators() -> list[nbformat.NotebookNode]:
    return [
        md("""
# 04 · Reports and validators, step by step

Auditing a recursive run means answering, for every delegated task: what was the child asked
(its **TaskBrief**), what did it claim (its **TaskReport**), how did an independent validator
judge each completion criterion and on what evidence (**ValidationResult**), and what did the
parent decide (**TaskReview**)? `ReportStepper` walks exactly that, in protocol order. It is
self-contained HTML (no widget), so this notebook reopens as you saved it — with its controls
in JupyterLab, as a list of collapsible steps on GitHub or nbviewer — and every step is also
plain text.

We use the recursive demo (the revenue per region of `data/sales.csv`; two levels deep; every
region's first report rejected and revised; a root validation).
"""),
        code(SETUP),
        md("""
## Load the run (nothing runs)

`data/exports/recursive_demo.jsonl` is an export of that run (`data/make_exports.py` writes
it). `load_export` reads it into a read-only store — every write is refused, so nothing can run
on it. Without the file we run the demo instead; the steps are the same either way, because
the demo model is deterministic.
"""),
        code("""
from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.notebook import launch, load_export, to_frames

EXPORT = REPO / "data" / "exports" / "recursive_demo.jsonl"
if EXPORT.exists():
    source = load_export(EXPORT)
    ROOT = to_frames(source, events=False).traces.query("depth == 0")["trace_id"].iloc[0]
    print("loaded", EXPORT.relative_to(REPO))
else:
    TMP = tempfile.TemporaryDirectory(prefix="cyber-agent-nb04-")  # removed when the kernel exits
    handle = await launch(DEMO_TASK, mode="recursive", model="demo", store=Path(TMP.name), workspace=REPO,
                          root_task_anchor=DEMO_ANCHOR, progress=False)
    await handle.result()
    source, ROOT = handle.store, handle.trace_id
    print("ran the recursive demo")
frames = to_frames(source, ROOT)
frames"""),
        md("""
One row per delegated task in `frames.reports`: the brief's objective, the report that stood
in the end, and the parent's last decision.
"""),
        code("""
frames.reports.assign(agent=frames.reports["trace_id"].map(frames.traces.set_index("trace_id")["label"]))[
    ["agent", "depth", "objective", "outcome", "summary", "review_decision"]]""", check=True),
        md("""
## The stepper

Use **◀ prev** / **next ▶** or the slider to move; the **trace** dropdown jumps to the first step
of an agent (and follows the step shown); the **verdict** dropdown keeps only the criterion
verdicts that passed, failed or stayed unknown. The order is the protocol's: a trace's brief,
then its children's steps, then each round of report → verdicts → review. A report sent back
with `revise` and submitted again is a second round, so a rejection and its revision read in
order. The root's anchor opens the walk; its answer and the root validator's verdicts close it.
"""),
        code("""
from cyber_agent.notebook import ReportStepper

stepper = ReportStepper(frames, ROOT)
stepper""", ignore=True),
        md("""
The stepper's state is plain Python: `next`, `prev`, `go`, `jump_to` and `filter_verdict` do
what the buttons and dropdowns do, so code can drive it too — and the stepper above moves along. Jump to the
first explore agent (region East) and walk its seven steps:
"""),
        code("""
east = next(trace for text, trace in stepper.trace_options if text.startswith("explore 1 "))
stepper.jump_to(east)
for _ in range(7):
    print(stepper.label)
    print(stepper.current.to_text(), end="\\n\\n")
    stepper.next()""", check=True),
        md("""
The first report summed one row of region East (a truncated read: `read_file` with
`limit: 12`); validator 1 recomputed 152.00 from the whole file and failed the criterion; the
delegate's review quoted that evidence back with `revise`; the second report read the whole
file, validator 2 passed it, and the delegate accepted.

## Only the rejections

The verdict filter keeps the criterion verdicts of one kind — here every `fail` of the tree:
"""),
        code("""
stepper.filter_verdict("fail")
print(stepper.label)
for item in stepper.visible:
    print("-", item.title)
    print("   ", item.lines[0])""", check=True),
        code("""
stepper.filter_verdict("all")
stepper.go(len(stepper.items) - 1)  # the last step: the root validator on the final answer
print(stepper.to_text())""", check=True),
        md("""
## Text fallback

Without a notebook frontend (a terminal, a CI log) the same steps are
text: `stepper.show()` prints the current step outside a notebook, `StepItem.to_text()` renders
one step, and the titles alone are an outline of the whole protocol:
"""),
        code("""
import textwrap

for number, item in enumerate(stepper.items, start=1):
    print(f"{number:>2}. [{item.kind:<10}] {textwrap.shorten(item.title, 100, placeholder=' …')}")""", check=True),
        md("""
## The same records as frames

For counting rather than reading: one row per judged criterion, pivoted to report rounds.
Every first report failed, every second one passed, and the delegate and root passed at once.
"""),
        code("""
labels = frames.traces.set_index("trace_id")["label"]
verdicts = frames.validations.assign(agent=frames.validations["trace_id"].map(labels),
                                     report=frames.validations["validation_index"] + 1)
verdicts.pivot_table(index=["scope", "agent"], columns="report", values="criterion_verdict", aggfunc="first")""",
             check=True),
        md("""
And every decision a parent took, in order, with its feedback — a `revise` carries the
validator's evidence back to the child:
"""),
        code("""
reviews = pd.DataFrame([{"parent": labels[parent], **review}
                        for parent, protocol in zip(frames.traces["trace_id"], frames.traces["protocol"])
                        for review in protocol.get("reviews", [])])
reviews.assign(child=reviews["child_trace_id"].map(labels))[["parent", "child", "decision", "feedback"]]""",
             check=True),
        md("""
## A fabricating child, caught before any validator

Every claim of a report cites its evidence: a tool call and the span of its result it quotes
(with the arithmetic it did on the result's numbers), a child's report, a message, an artifact.
A **deterministic evidence check** runs before the validator, on the persisted records only: a
cited id that does not exist, a number that is not in the cited result, a claim about a child
that never returned, results after zero tool calls, ... fail the report at once, and no
validator call is spent (docs/recursive-protocol.md lists each check with an example).

The export above predates claims, so its reports carry uncited claims (their outputs) and no
evidence checks. Here is a fresh run of the same task by `FabricatingModel`: the demo model
whose children lie at a seeded rate in named ways. With seed 21 one child, region East, changes
the number of its first report; everything else is honest.
"""),
        code("""
from cyber_agent.llm.fabricating import FabricatingModel

lying = FabricatingModel(0.3, seed=21, kinds=("changed_number", "invented_id"), first_attempt_only=True)
LIES = tempfile.TemporaryDirectory(prefix="cyber-agent-nb04-lies-")
run = await launch(DEMO_TASK, mode="recursive", llm_call=lying, store=Path(LIES.name), workspace=REPO,
                   root_task_anchor=DEMO_ANCHOR, progress=False)
await run.result()
lied = to_frames(run.store, run.trace_id)
print([(f.objective.split(" of ")[-1], f.attempt, f.kind) for f in lying.ledger if f.kind])"""),
        md("""
`frames.claims` has one row per claim an evidence check judged: the claim, its citations,
the check's verdict, the reason and where it looked. East's first claim says a number that its
cited `read_file` result does not support (the sum of its rows is another number); its
revision, and every other child, passed:
"""),
        code("""
lied_labels = lied.traces.set_index("trace_id")["label"]
lied.claims.assign(agent=lied.claims["trace_id"].map(lied_labels))[
    ["agent", "validation_index", "claim", "check_verdict", "code", "reason"]]""", check=True),
        md("""
The stepper shows each claim with its cited excerpt and its verdict. East's first round is
report → evidence check (fail) → review `revise` — no validator ran on it:
"""),
        code("""
caught = ReportStepper(lied, run.trace_id)
caught.jump_to(next(trace for text, trace in caught.trace_options if text.startswith("explore 1 ")))
for _ in range(4):
    print(caught.current.to_text(), end="\\n\\n")
    caught.next()""", check=True),
        md("""
The tree drawing marks a child whose report had unsupported claims with a red cross:
"""),
        code("""
from cyber_agent.notebook import draw_trace_tree

display(draw_trace_tree(run.store, run.trace_id))"""),
        md("""
The same check runs over any stored trace, legacy and imported ones included —
`check_claims(store, trace_id)` reads only persisted records (for a trace without a report, the
numbers and quoted names of its final answer are looked up in its own tool results):
"""),
        code("""
from cyber_agent.protocol.evidence_check import check_claims, render_evidence

east = next(t for t in lied.traces.itertuples() if t.label == "explore 1")
print(render_evidence(await check_claims(run.store, east.trace_id)).replace(east.trace_id, "<explore 1>"))""", check=True),
    ]


NOTEBOOKS = {
    "02_recursive_tree.ipynb": recursive_tree,
    "04_reports_and_validators.ipynb": reports_and_validators,
}


def main(argv: list[str] | None = None) -> int:
    """Write (and execute) the recursive notebooks with the legacy builder's machinery."""
    return build_all(argv, NOTEBOOKS)


if __name__ == "__main__":
    sys.exit(main())
