"""Generate notebook 08 (legacy vs recursive, a sweep) with nbformat and execute it with nbclient.

    .venv/bin/python notebooks/build_sweep_notebook.py            # write and execute it
    .venv/bin/python notebooks/build_sweep_notebook.py --no-run   # write without executing

The notebook is an output of this script: edit the cells here, then re-run it. It runs
offline on the fallible model (`fallible:RATE`) in well under a minute. Cells marked
`# NBVAL_CHECK_OUTPUT` print only what the seeds decide (scores, answers, token counts, costs
of the made-up price; never trace ids or times) and are compared by
`pytest --nbval-lax --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg`.
"""

from __future__ import annotations

import sys

import nbformat
from build_notebooks import code, md
from build_notebooks import main as build_all

SETUP = """\
from pathlib import Path

import pandas as pd
from IPython.display import display

REPO = Path.cwd().parent  # notebooks run with their own folder as working directory
pd.set_option("display.width", 140)
pd.set_option("display.max_columns", 14)
pd.set_option("display.max_colwidth", 60)
pd.set_option("display.float_format", "{:.4g}".format)"""


def legacy_vs_recursive() -> list[nbformat.NotebookNode]:
    return [
        md("""
# 08 · Legacy vs recursive: a sweep

Does **recursive mode** — briefs, independent validators, parent reviews, a root validator —
beat **legacy mode** on accuracy, and what does it cost? One run answers nothing; a sweep over
tasks × models × modes × repeats does. This notebook runs a small sweep offline and reads it as
pandas:

- **tasks**: the 16 bundled tasks of `data/tasks/` (8 arithmetic, 8 revenue lookups in small
  CSV tables), each with its expected answer and a numeric scorer;
- **models**: the *fallible* offline model at two error rates. It answers like the demo model,
  but at each answer (a final text, a child's report) it changes the result number with the
  given probability — deterministically for a seed. Validators are never fallible;
- **modes**: legacy and recursive; **repeats**: 3 (each repeat its own seed).

Everything is stored with the runs, so the sweep resumes after a crash and a second run does
nothing (the end of this notebook shows it).
"""),
        code(SETUP),
        md("## The tasks"),
        code("""
from cyber_agent.experiments import load_tasks

tasks = load_tasks(REPO / "data" / "tasks" / "tasks.jsonl")
pd.DataFrame([{"id": t.id, "type": t.type, "prompt": t.prompt, "expected": t.expected} for t in tasks]).iloc[[0, 1, 8, 9]]""",
             check=True),
        md("""
## The grid

`Sweep` is the grid. Each cell — (task, model, mode, config, repeat) — has a stable key (a hash
of what changes its run), and attempt *n* of a cell is the root trace `uuid5(key/n)`: a re-run
finds what ran before by id.
"""),
        code("""
from cyber_agent.experiments import Sweep

grid = Sweep(name="legacy-vs-recursive", tasks=tasks, models=["fallible:0.1", "fallible:0.3"],
             modes=["legacy", "recursive"], repeats=3, workspace=str(REPO))
cells = grid.cells()
print(len(cells), "cells:", len(grid.tasks), "tasks ×", len(grid.entries), "models ×", len(grid.modes), "modes ×",
      grid.repeats, "repeats")""", check=True),
        md("""
## Run it

`run_sweep` runs the cells on this kernel's event loop — 8 at a time by default, each behind
its provider's adaptive rate limiter — and reports progress to an observer. The view below
updates while the sweep runs: cells done, running and failed, and the spend so far (at the
fallible model's made-up price of 1 USD per million tokens).
"""),
        code("""
from cyber_agent.experiments import run_sweep
from cyber_agent.notebook.sweep_view import SweepProgressView
from cyber_agent.trace import InMemoryTraceStore

store = InMemoryTraceStore()  # sqlite:///sweep.db (open_store) keeps it across kernels
view = SweepProgressView()
display(view)
report = await run_sweep(grid, store, on_progress=view)""", ignore=True),
        md("The view keeps the last snapshot; shown again, it is the sweep's final state:"),
        code("view", ignore=True),
        code("print(report.progress.done, 'cells run,', report.progress.failed, 'failed after retries')", check=True),
        md("""
## One row per cell

`report.frame()` (or `sweep_frame(store, grid)`, read from the store) has one row per cell:
status, score, answer, tokens, cost, LLM calls, agents, duration and the root trace id.
"""),
        code("""
frame = report.frame()
columns = ["task", "model", "mode", "repeat", "status", "score", "answer", "tokens", "llm_calls", "agents"]
frame[columns].head(6)""", check=True),
        md("""
Every cell is an ordinary trace tree, so the notebook's frames read them too: `sweep_roots`
lists the finished cells' roots for `ato_frames` (`to_frames` in a script). Agents, validators
and messages of all cells, per mode:
"""),
        code("""
from cyber_agent.experiments import sweep_roots
from cyber_agent.notebook import ato_frames

frames = await ato_frames(store, await sweep_roots(store, grid))
modes = frame.set_index("trace_id")["mode"]
traces = frames.traces.assign(mode=frames.traces["root_trace_id"].map(modes))
messages = frames.messages.assign(mode=frames.messages["trace_id"].map(traces.set_index("trace_id")["mode"]))
pd.DataFrame({"traces": traces.groupby("mode").size(), "validators": traces.groupby("mode")["is_validator"].sum(),
              "messages": messages.groupby("mode").size()})""", check=True),
        md("""
## Accuracy and cost per mode

`summarize` takes each repeat's mean over the tasks as one sample, so `score_std` and
`cost_std` are the spread across the three repeats (the error bars below).
"""),
        code("""
from cyber_agent.experiments import summarize

summary = summarize(frame)
summary[["mode", "model", "score_mean", "score_std", "cost_mean", "cost_std", "llm_calls_mean", "cells"]]""",
             check=True),
        code("""
from cyber_agent.experiments import plot_metric

plot_metric(frame, "score", by="mode", hue="model", title="Accuracy per mode (error bars: 1 s.d. across repeats)")"""),
        code("""
plot_metric(frame, "cost", by="mode", hue="model", title="Cost per cell per mode")"""),
        md("Both at once — what each point of accuracy costs:"),
        code("""
from cyber_agent.experiments import plot_score_vs_cost

plot_score_vs_cost(frame)"""),
        md("""
## Where the difference comes from

In legacy mode a wrong number is the answer. In recursive mode each report goes to an
independent validator that recomputes it from the source; a wrong one fails, the parent sends
it back with the validator's evidence, and the next attempt draws again. Count the verdicts and
revisions of the recursive cells:
"""),
        code("""
traces = await store.list_traces(limit=None)
recursive_roots = set(frame[frame["mode"] == "recursive"]["trace_id"])
in_recursive = [t for t in traces if t.root_id in recursive_roots]
verdicts = pd.Series([v.verdict for t in in_recursive for v in t.protocol.validations if v.scope != "evidence"]).value_counts()
checks = pd.Series([v.verdict for t in in_recursive for v in t.protocol.validations if v.scope == "evidence"]).value_counts()
revisions = sum(r.decision == "revise" for t in in_recursive for r in t.protocol.reviews)
print("validator verdicts:", {verdict: int(count) for verdict, count in verdicts.items()})
print("evidence checks (before any validator):", {verdict: int(count) for verdict, count in checks.items()})
print("revisions asked by parents:", revisions)""", check=True),
        md("The same task and seed in both modes, where legacy mode went wrong:"),
        code("""
pairs = frame.pivot_table(index=["task", "model", "repeat"], columns="mode", values="score", aggfunc="first")
fixed = pairs[(pairs["legacy"] == 0) & (pairs["recursive"] == 1)].reset_index()
example = fixed.iloc[0]
rows = frame[(frame["task"] == example["task"]) & (frame["model"] == example["model"]) & (frame["repeat"] == example["repeat"])]
print(len(fixed), "cells wrong in legacy mode and right in recursive mode; for example:")
rows[["task", "model", "mode", "repeat", "answer", "score", "llm_calls"]]""", check=True),
        md("""
## Resume: a second run does nothing

The results are in the store. Running the same sweep again finds every cell finished and runs
none — after a crash it would run only the missing ones (an attempt cut off mid-run runs again;
nothing finished runs twice).
"""),
        code("""
again = await run_sweep(grid, store)
print(again.progress.skipped, "cells skipped,", again.progress.done, "run")
print("same frame:", again.frame().equals(frame))""", check=True),
        md("""
## Take-aways

- At both error rates recursive mode is more accurate: its validators catch most wrong
  numbers and the revisions fix them; the cells it still gets wrong are those whose every
  attempt erred.
- It costs several times more per cell (more calls: validators, reviews, revisions), and the
  cost grows with the error rate — each caught error buys another round.
- The spread across repeats is the honest error bar of a sweep this small; add repeats (seeds)
  to narrow it. Swap the fallible model for real providers (`openai:...`, `anthropic:...`) in
  the same grid to ask the question of real models.
"""),
    ]


NOTEBOOKS = {"08_legacy_vs_recursive.ipynb": legacy_vs_recursive}


def main(argv: list[str] | None = None) -> int:
    """Write (and execute) notebook 08 with the legacy builder's machinery."""
    return build_all(argv, NOTEBOOKS)


if __name__ == "__main__":
    sys.exit(main())
