"""Generate the example notebooks with nbformat and execute them once with nbclient.

    .venv/bin/python notebooks/build_notebooks.py            # write and execute every notebook
    .venv/bin/python notebooks/build_notebooks.py 03         # only notebooks whose name starts with 03
    .venv/bin/python notebooks/build_notebooks.py --no-run   # write without executing

The notebooks are source-controlled outputs of this script: edit the cells here, then
re-run it. Each runs offline on the `demo` model in seconds; cells marked
`# NBVAL_CHECK_OUTPUT` are compared by `pytest --nbval-lax` (their output is deterministic),
the others only have to run without error.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
"""The notebooks' kernelspec: ipykernel's own (`jupyter kernelspec list`), as JupyterLab records it."""
CHECK = "# NBVAL_CHECK_OUTPUT\n"
IGNORE = "# NBVAL_IGNORE_OUTPUT\n"

SETUP = """\
import tempfile
from pathlib import Path

import pandas as pd

REPO = Path.cwd().parent  # notebooks run with their own folder as working directory
pd.set_option("display.width", 120)
pd.set_option("display.max_columns", 12)
pd.set_option("display.max_colwidth", 60)"""


def md(text: str) -> nbformat.NotebookNode:
    return new_markdown_cell(text.strip())


def code(text: str, *, check: bool = False, ignore: bool = False) -> nbformat.NotebookNode:
    return new_code_cell((CHECK if check else "") + (IGNORE if ignore else "") + text.strip())


def quickstart() -> list[nbformat.NotebookNode]:
    return [
        md("""
# 01 · Quickstart: a legacy run, its trees and its answer

We give an agent a small research task — *the revenue per region of `data/sales.csv`, and the
top region* — and watch what it does. The run uses the bundled offline `demo` model, so this
notebook needs no API key and no network; swap `model="demo"` for a real provider later
(notebook 06).

**Legacy mode** is the classic tool loop: the main agent plans with goals, reads the file, and
fans the work out to one level of sub-agents (`explore`), then merges their answers.
"""),
        code(SETUP),
        md("""
## Launch

`launch` starts the run on a background event loop and returns a `RunHandle` as soon as the
root trace exists, so the cell returns at once. The progress table below it updates live:
agents (and how deep), LLM calls, tokens, cost, and one row per running agent with the tool it
runs now. `handle.progress()` shows it again in any later cell.

The demo model would answer instantly; `model="demo:latency=0.05"` makes each reply wait 50 ms,
as a provider's would, so there is something to watch. Traces go to a temporary store here, so
repeated runs never collide; pass `store=".trace"` to keep them.
"""),
        code("""
from cyber_agent.cli import DEMO_TASK
from cyber_agent.notebook import launch

TMP = tempfile.TemporaryDirectory(prefix="cyber-agent-nb01-")  # removed when the kernel exits
STORE = Path(TMP.name)
handle = await launch(DEMO_TASK, mode="legacy", model="demo:latency=0.05", store=STORE, workspace=REPO)
print(DEMO_TASK)""", ignore=True),
        md("""
## Wait for the answer

`await handle.result()` waits without blocking the kernel (in a plain script use
`handle.wait()`; `handle.stop()` stops a run early).
"""),
        code("""
result = await handle.result()
print(result.status)
print(result.answer)""", check=True),
        md("The handle now shows the final progress and the answer:"),
        code("handle"),
        md("""
## The trace tree

Every agent is its own **trace**; sub-agents hang under the agent that started them. Colour is
the status, the marker the role; each label starts with a unique path (`3` is the root's third
agent) and says what the agent handled. The drawing is a plain `matplotlib.figure.Figure` with a
tidy tree layout, readable up to thousands of nodes (big subtrees fold into count nodes).
"""),
        code("""
from cyber_agent.notebook import draw_trace_tree, trace_graph

draw_trace_tree(handle.store, handle.trace_id)"""),
        md("The same tree as a `networkx.DiGraph`, for your own analysis:"),
        code("""
graph = trace_graph(handle.store, handle.trace_id)
for node, data in graph.nodes(data=True):
    print(f"{data['path']:<5} {data['role']:<8} {data['title']:<32} {data['status']}")""", check=True),
        md("""
## The goal tree

Inside each trace the agent keeps a plan: a **goal tree**. Goal 3 delegated its work
(an `agent_call`), so the four sub-agents and their own goals hang under it; each goal shows
its outcome summary.
"""),
        code("""
from cyber_agent.notebook import draw_goal_tree

draw_goal_tree(handle.store, handle.trace_id)"""),
        md("""
## What happened, as tables

`to_frames` loads the tree into pandas (traces, messages, tool calls, goals, events, usage)
without running anything. Which tools did the agents call?
"""),
        code("""
from cyber_agent.notebook import to_frames

frames = to_frames(handle.store, handle.trace_id)
frames"""),
        code("""
frames.tool_calls.groupby("tool_name").size().rename("calls")""", check=True),
        md("""
Notebook 03 charts the budget of this run, 05 analyses exported traces in pandas, and 06
switches to a real model. Recursive runs (`mode="recursive"`) use the same helpers; they add
task reports, validators and a tree-wide budget.
"""),
    ]


def budgets() -> list[nbformat.NotebookNode]:
    return [
        md("""
# 03 · Budgets: tokens, cost and LLM calls of a run

How much did a run consume, which agent spent it, and when? We run the offline legacy demo
again and look at its usage as pandas frames and charts. `model="demo:price_as=gpt-4o-mini"`
prices the demo's (estimated) tokens at gpt-4o-mini's list price, so the costs below are
simulated — every message says so in `cost_estimated` — but not flat zero.
"""),
        code(SETUP),
        code("""
from cyber_agent.cli import DEMO_TASK
from cyber_agent.notebook import launch

TMP = tempfile.TemporaryDirectory(prefix="cyber-agent-nb03-")  # removed when the kernel exits
STORE = Path(TMP.name)
handle = await launch(DEMO_TASK, model="demo:price_as=gpt-4o-mini", store=STORE, workspace=REPO, progress=False)
result = await handle.result()
ROOT = handle.trace_id
print(result.status)""", check=True),
        md("""
## The budget frame

One row per resource of a task tree (the A10 resources): agents, LLM calls, tokens, cost,
wall time, and the validators' tool calls and material; then the child quota. A **legacy**
tree has no limits, so `limit`, `remaining` and `percent` are NaN and the usage is counted from
the traces. `budget_frame` is data; `budget_table` shows it in its units, with the refusal of
each row and, under it, why a run stopped:
"""),
        code("""
from cyber_agent.notebook import budget_frame, budget_table

budget = budget_frame(handle.store, ROOT)
budget_table(budget)"""),
        md("The counts are exact and deterministic on the demo model (the duration is not):"),
        code("""
budget.loc[["agents", "llm_calls", "tokens", "validation_tool_calls"], ["used", "unit"]]""", check=True),
        code("""
from cyber_agent.notebook import plot_budget

plot_budget(budget)"""),
        md("""
## Recursive limits

A **recursive** root freezes its limits when it is created, from `AGENT_MAX_TOTAL_AGENTS` (50),
`AGENT_MAX_LLM_CALLS` (150), `AGENT_MAX_TOTAL_TOKENS` (1.5M), `AGENT_MAX_TOTAL_COST_USD` (15),
`AGENT_MAX_DURATION_SECONDS` (3600), `AGENT_MAX_VALIDATION_TOOL_CALLS` (300),
`AGENT_MAX_VALIDATION_MATERIAL_CHARS` (1M) and `AGENT_RESERVED_FINAL_CALLS` (8, kept for the
root validator). `budget_frame` then reads the limits from `trace.context["resource_budget"]`
and the live usage from the root's `resource_usage.json`, and shows the reason of a refusal.

To see where this legacy run would stand under the default recursive budget, pass limits:
"""),
        code("""
from cyber_agent.core.resource_budget import ResourceBudget

what_if = budget_frame(handle.store, ROOT, limits=ResourceBudget().model_dump())
what_if.loc[["agents", "llm_calls", "tokens"], ["used", "limit", "percent"]].round(2)""", check=True),
        code("plot_budget(what_if)"),
        md("""
## Who spent it

One row per agent (trace): its parent, depth, role, LLM calls, tokens and cost.
"""),
        code("""
from cyber_agent.notebook import plot_usage_by_agent, usage_by_agent

by_agent = usage_by_agent(handle.store, ROOT)
by_agent[["label", "role", "depth", "status", "llm_calls", "tool_calls", "total_tokens"]]""", check=True),
        code("plot_usage_by_agent(by_agent)"),
        md("""
## When

One row per LLM call in time order: the call's tokens and cost, then cumulative calls, tokens,
cost and agents started:
"""),
        code("""
from cyber_agent.notebook import plot_usage_over_time, usage_over_time

over_time = usage_over_time(handle.store, ROOT)
over_time[["elapsed_seconds", "role", "total_tokens", "cost", "cumulative_llm_calls", "cumulative_cost",
           "cumulative_agents"]].tail()"""),
        code("plot_usage_over_time(over_time)"),
    ]


def exports() -> list[nbformat.NotebookNode]:
    return [
        md("""
# 05 · Pandas analysis of trace exports

An export is one portable JSON Lines file holding whole task trees: every trace with its
meta, goal tree, messages, events and budget usage. `load_export` reads it into a read-only
store (nothing can run on it) and `to_frames` turns it into pandas frames with stable column
names and dtypes. The samples in `data/exports/` were written by `data/make_exports.py`.
"""),
        code(SETUP),
        code("""
from cyber_agent.notebook import TraceFrames, load_export, to_frames

paths = sorted((REPO / "data" / "exports").glob("*.json*"))
for path in paths:
    store = load_export(path)
    print(f"{path.name}: {len(await store.list_traces(limit=None))} traces, read-only: {type(store).__name__}")""", check=True),
        code("""
frames = TraceFrames.concat([to_frames(path) for path in paths])
frames"""),
        md("""
## The traces

One row per agent. `agent_mode` tells legacy trees from recursive ones; validators have
`role == "validator"`.
"""),
        code("""
frames.traces.groupby(["agent_mode", "role"]).agg(
    traces=("trace_id", "size"), messages=("total_messages", "sum"), tokens=("total_tokens", "sum")
)""", check=True),
        md("""
## Messages and tokens

Who talks most? Messages per role and the tokens the model calls consumed, per kind of agent:
"""),
        code("""
roles = frames.traces.set_index("trace_id")["role"]
messages = frames.messages.assign(agent=frames.messages["trace_id"].map(roles))
pd.crosstab(messages["agent"], messages["message_role"], margins=True)""", check=True),
        code("""
calls = messages[messages["message_role"] == "assistant"]
calls.groupby("agent")[["prompt_tokens", "completion_tokens"]].agg(["sum", "mean"]).round(1)""", check=True),
        md("""
## Tool calls

Each row is one call joined to its result message: arguments (a dict), whether the result was
an error, and how big it was.
"""),
        code("""
tools = frames.tool_calls
tools.groupby("tool_name").agg(
    calls=("call_id", "size"), errors=("is_error", "sum"), mean_result_chars=("result_chars", "mean")
).round(1).sort_values("calls", ascending=False)""", check=True),
        md("Which files did the agents read, and what did they compute?"),
        code("""
args = pd.json_normalize(tools["arguments"].tolist()).set_index(tools.index)
pd.concat([tools["tool_name"], args[["path", "expression"]]], axis=1).dropna(how="all", subset=["path", "expression"]).head(8)"""),
        md("""
## One agent's conversation

The main path of the legacy demo's first explore agent, message by message:
"""),
        code("""
legacy = frames.traces[frames.traces["agent_mode"] == "legacy"]
explorer = legacy[legacy["role"] == "explore"].iloc[0]["trace_id"]
conversation = frames.messages[(frames.messages["trace_id"] == explorer) & frames.messages["on_main_path"]]
conversation[["sequence", "message_role", "tool_call_names", "tool_name", "description"]]""", check=True),
        md("""
## Events and protocol records

Events are the stream a watcher follows (goal changes, messages, sub-traces). In recursive
trees, `reports` and `validations` hold the task protocol: what each child reported and how
its validator judged every completion criterion.
"""),
        code("""
frames.events.groupby("type").size().sort_values(ascending=False)""", check=True),
        md("""
`validations` has one row per judged criterion, `verdicts` one row per validation (count
verdicts there):
"""),
        code("""
frames.validations.groupby(["scope", "criterion_verdict"]).size()"""),
        code("""
frames.verdicts.groupby(["scope", "verdict"]).size()""", check=True),
        code("""
frames.reports[["depth", "role", "outcome", "review_decision", "summary"]]"""),
        md("""
## Flags and costs

The costs in these exports are simulated (the demo model priced as gpt-4o-mini), and every
message says so; a provider that reports no usage or has no price is flagged the same way,
and shortened tool results are flagged too:
"""),
        code("""
frames.messages[["usage_estimated", "cost_estimated", "cost_unpriced", "truncated", "summarized"]].sum()""", check=True),
        code("""
frames.usage.groupby("role")[["total_tokens", "total_cost", "estimated_calls"]].sum().round(4)""", check=True),
        md("""
## Parquet

`TraceFrames.to_parquet(folder)` writes every frame of a whole export as Parquet files (with
pyarrow installed: `pip install 'cyber-agent[parquet]'`), and `read_parquet` reads them back
with the same dtypes:
"""),
        code("""
from cyber_agent.errors import ConfigurationError
from cyber_agent.notebook import read_parquet

try:
    with tempfile.TemporaryDirectory() as tmp:
        again = read_parquet(frames.to_parquet(Path(tmp) / "exports"))
    print("read back:", again.counts() == frames.counts())
except ConfigurationError as error:  # pyarrow is not installed
    print(error)"""),
        md("""
Your own exports: `export_traces(store, [root_id], "my_run.jsonl")` (add `.gz` to compress).
Exports written by newer versions load too: unknown fields are ignored; a truncated file is
refused with an error naming it.
"""),
    ]


def real_provider() -> list[nbformat.NotebookNode]:
    return [
        md("""
# 06 · Real providers: OpenAI-compatible servers and Anthropic

The demo model is a stand-in. A real model is one string away: `model="openai:MODEL"` for
OpenAI or any OpenAI-compatible server (vLLM, llama.cpp, Ollama, LM Studio, ...), or
`model="anthropic:MODEL"`. Both are reached over httpx and configured by the environment:

| variable | meaning |
| --- | --- |
| `OPENAI_API_KEY` | key for api.openai.com (not needed for a local server) |
| `OPENAI_BASE_URL` | e.g. `http://localhost:11434/v1` for a local OpenAI-compatible server |
| `ANTHROPIC_API_KEY` | key for api.anthropic.com |
| `ANTHROPIC_BASE_URL` | another Anthropic-compatible endpoint |
| `CYBER_AGENT_MODEL` | the model spec this notebook uses, e.g. `openai:gpt-4o-mini` |
| `CYBER_AGENT_LIVE` | set to `1` to let this notebook call the network |

This notebook only calls a provider when `CYBER_AGENT_LIVE=1` **and** a key or a local base
URL is set, so the test run (which executes every notebook) never reaches the network.
"""),
        code(SETUP),
        code("""
import os

MODEL = os.environ.get("CYBER_AGENT_MODEL") or (
    "anthropic:claude-3-5-haiku-latest" if os.environ.get("ANTHROPIC_API_KEY") else "openai:gpt-4o-mini"
)
configured = bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")
                  or os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_BASE_URL"))
LIVE = configured and os.environ.get("CYBER_AGENT_LIVE") == "1"
print("model:", MODEL, "| live calls:", "on" if LIVE else "off")"""),
        md("""
## Configuration errors come before any call

Resolving a model checks its configuration without touching the network: a missing key is
reported with the variable to set.
"""),
        code("""
from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.resolve import resolve_llm

try:
    resolved = resolve_llm(MODEL)
    print("configured:", resolved.provider, resolved.model)
except ConfigurationError as exc:
    print("not configured:", exc.setting)"""),
        md("""
## A live run (skipped without a key)

The same helpers as with the demo model: launch, wait, draw. Without `CYBER_AGENT_LIVE=1`
and a key this cell explains itself and does nothing.
"""),
        code("""
from cyber_agent.cli import DEMO_TASK
from cyber_agent.notebook import draw_trace_tree, launch

TMP = tempfile.TemporaryDirectory(prefix="cyber-agent-nb06-")  # removed when the kernel exits
STORE = Path(TMP.name)
if not LIVE:
    print("Skipped: no live provider. Set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server) or "
          "ANTHROPIC_API_KEY, and CYBER_AGENT_LIVE=1, then re-run this notebook.")
else:
    live = await launch(DEMO_TASK, model=MODEL, store=STORE, workspace=REPO, max_iterations=20)
    live_result = await live.result()
    print(live_result.status, live_result.answer)
    display(draw_trace_tree(live.store, live.trace_id))""", check=True),
        md("""
## Record once, replay offline

A run against a paid model can be recorded (every request and response, as JSON lines) and
replayed later without a network, e.g. to re-analyse it or to test a change to the tools.
Here we record the demo model on a one-agent task; with a real provider pass
`resolve_llm(MODEL, record_to=...)`. A replayed request must match the recorded one exactly,
so the replayed run takes exactly the same steps.
"""),
        code("""
TASK = "What is 17 * 23 + 4?"
RECORDING = STORE / "recording.jsonl"
recorded = resolve_llm("demo", record_to=RECORDING)
first = await launch(TASK, llm_call=recorded.llm_call, store=STORE, workspace=REPO, progress=False)
original = await first.result()

replayer = resolve_llm(f"replay:{RECORDING}")
second = await launch(TASK, llm_call=replayer.llm_call, store=STORE, workspace=REPO, progress=False)
replayed = await second.result()
print(len(RECORDING.read_text().splitlines()), "exchanges recorded")
print("replayed:", replayed.status, "|", replayed.answer)
print("same answer:", replayed.answer == original.answer)""", check=True),
    ]


NOTEBOOKS = {
    "01_quickstart_legacy.ipynb": quickstart,
    "03_budgets.ipynb": budgets,
    "05_pandas_analysis_of_exports.ipynb": exports,
    "06_real_provider.ipynb": real_provider,
}


def build(name: str, cells: Callable[[], list[nbformat.NotebookNode]], *, run: bool) -> Path:
    """Write the notebook `name` from its cells, executing it first unless `run` is False."""
    nb = new_notebook(cells=cells())
    # What JupyterLab writes for the ipykernel spec, so opening a notebook does not rewrite (and autosave) it;
    # nbclient fills language_info from the kernel, as JupyterLab does.
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    path = HERE / name
    if run:
        # No widget state to store: every live output is display-id HTML (cyber_agent/notebook/display.py:LiveDisplay),
        # and RunHandle.result re-sends the final progress in its cell, which nbclient records.
        NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=False,
                       resources={"metadata": {"path": str(HERE)}}).execute()
    nbformat.write(nb, path)
    return path


def main(argv: list[str] | None = None, notebooks: dict[str, Callable[[], list[nbformat.NotebookNode]]] = NOTEBOOKS) -> int:
    """Write (and execute) the notebooks; build_recursive_notebooks.py reuses this with its own set."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="name prefixes of the notebooks to build (default: all)")
    parser.add_argument("--no-run", action="store_true", help="write the notebooks without executing them")
    args = parser.parse_args(argv)
    for name, cells in notebooks.items():
        if not args.only or any(name.startswith(p) for p in args.only):
            started = time.monotonic()
            path = build(name, cells, run=not args.no_run)
            print(f"built {path.relative_to(HERE.parent)} in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
