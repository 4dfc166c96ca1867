"""Generate notebook 09 (runs made by other tools: a ReDel tree and an Inspect log) and execute it.

    .venv/bin/python notebooks/build_import_notebook.py            # write and execute it
    .venv/bin/python notebooks/build_import_notebook.py --no-run   # write without executing

The notebook is an output of this script: edit the cells here, then re-run it. It runs offline:
the ReDel trees are the real sample in `tests/data/redel/`, the Inspect log comes from a real
`inspect_ai` eval on its `mockllm` model run in the notebook, and the native run is the `demo`
model. Cells marked `# NBVAL_CHECK_OUTPUT` print only counts, names and verdicts (never ids,
paths or times) and are compared by `pytest --nbval-lax` with `notebooks/sanitize.cfg`.
"""

from __future__ import annotations

import sys

import nbformat
from build_notebooks import code, md
from build_notebooks import main as build_all

SETUP = """\
from pathlib import Path

import pandas as pd

REPO = Path.cwd().parent  # notebooks run with their own folder as working directory
pd.set_option("display.width", 140)
pd.set_option("display.max_columns", 12)
pd.set_option("display.max_colwidth", 50)"""

INSPECT_TASK = '''\
from inspect_ai import Task, eval_async
from inspect_ai.agent import as_tool, react
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageTool, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import tool


@tool
def add():
    async def execute(x: int, y: int) -> int:
        """Add two numbers.

        Args:
            x: First number.
            y: Second number.
        """
        return x + y
    return execute


def scripted(reply):
    """A mockllm script: reply(input) -> ModelOutput, with usage set (no tokenizer needed offline)."""
    def generate_output(input, tools, tool_choice, config):
        output, prompt, completion = reply(input)
        output.usage = ModelUsage(input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion)
        return output
    return get_model("mockllm/model", custom_outputs=generate_output)


def main_reply(input):
    if not any(isinstance(m, ChatMessageTool) for m in input):
        return ModelOutput.for_tool_call("mockllm/model", "helper", {"input": "add 1 and 2"}), 10 * len(input), 5
    return ModelOutput.from_content("mockllm/model", "The answer is 3"), 10 * len(input), 5


def helper_reply(input):
    if not any(isinstance(m, ChatMessageTool) for m in input):
        return ModelOutput.for_tool_call("mockllm/model", "add", {"x": 1, "y": 2}), 7 * len(input), 3
    return ModelOutput.for_tool_call("mockllm/model", "submit", {"answer": "3"}), 7 * len(input), 3


helper = react(name="helper", description="Adds numbers", tools=[add()], model=scripted(helper_reply))
task = Task(dataset=[Sample(input="What is 1 + 2?", target="3", id="easy"),
                     Sample(input="What is 1 + 2, really?", target="4", id="trick")],
            solver=[use_tools(as_tool(helper)), generate()], scorer=includes(), name="addition")
log_dir = Path(tempfile.mkdtemp(prefix="inspect-logs-"))'''


def imported_runs() -> list[nbformat.NotebookNode]:
    return [
        md("""
# 09 · Runs made by other tools: a ReDel tree and an Inspect log

Researchers rarely run one framework. `load_runs` reads runs that other tools wrote —
**ReDel** recursive trees (`state.json`), **Inspect AI** eval logs (`.eval`, `.json`) and
**OpenTelemetry** GenAI spans (OTLP/JSON) — into a trace store, so the same helpers that study
a native run (trees, frames, budgets, the explorer, the stepper) study them too.

Every imported trace keeps the source's own ids and says what the source did not record
(`missing`): a ReDel `state.json` has no token counts or times, so its traces show *unknown*,
never a made-up zero. The mapping, format by format, is in `docs/importers.md`.
"""),
        code(SETUP + "\nimport tempfile"),
        md("""
## One store for everything

A native run first — the offline `demo` model on the sales task — into a store in memory.
The imported runs go into the same store.
"""),
        code("""
from cyber_agent.notebook import launch
from cyber_agent.trace import InMemoryTraceStore

store = InMemoryTraceStore()  # or open_store("sqlite:///runs.db"): importers write through the store API
handle = await launch("Report the revenue (units × unit_price) per region from data/sales.csv and name the top region.",
                      store=store, workspace=REPO, progress=False)
native = await handle.result()
print(native.trace.status, "—", native.trace.total_messages, "messages")""", check=True),
        md("""
## A ReDel tree

`tests/data/redel/` holds four real gpt-4o trees from the ReDel paper's FanOutQA runs (MIT with
the Commons Clause; the licence is beside them). `load_runs` detects the format, imports every
run of the folder with a progress bar and says what it skipped and why.
"""),
        code("""
from cyber_agent.notebook import aload_runs

redel = await aload_runs(REPO / "tests" / "data" / "redel", store, progress=False)
print(redel.to_text().replace(str(REPO) + "/", ""))""", check=True),
        md("""
The biggest tree: the root delegated five look-ups, three helpers delegated once more. Depth
and parent are exactly the file's; each `delegate` call is linked to the helper it started.
"""),
        code("""
from cyber_agent.notebook import draw_trace_tree, to_frames

frames = to_frames(store, redel.roots)
sizes = frames.traces.groupby("root_trace_id").size()
tree = sizes.idxmax()
draw_trace_tree(store, tree)"""),
        code("""
redel_traces = frames.traces[frames.traces["root_trace_id"] == tree]
redel_traces[["name", "depth", "status", "total_messages", "total_tokens", "source", "missing"]]""", check=True),
        md("""
The budget view says what ReDel did not record: no tokens, cost or times (—), and limits
*unknown* rather than "none".
"""),
        code("""
from cyber_agent.notebook import budget_table

budget_table(store, tree)""", check=True),
        md("""
The explorer navigates it like a native tree (into a helper and back):
"""),
        code("""
from cyber_agent.notebook import TraceExplorer

TraceExplorer(store, tree)""", ignore=True),
        md("""
## An Inspect AI log

A real Inspect eval, run here offline: its `mockllm` model calls a `helper` sub-agent
(`as_tool(react(...))`) that adds two numbers with a tool. Two samples; the scorer passes one
and fails the other (its target is wrong on purpose).
"""),
        code(INSPECT_TASK),
        md("Inspect shows its own progress and results while it runs:"),
        code("[log] = await eval_async(task, model=scripted(main_reply), log_dir=str(log_dir))", ignore=True),
        code('print(log.status, "—", len(log.samples), "samples,", Path(log.location).suffix, "log")', check=True),
        code("""
inspect = await aload_runs(log.location, store, progress=False)
print(inspect)""", check=True),
        md("""
One tree per sample: the helper is a child trace, linked to the tool call that started it,
with its own model calls' usage. The tokens add up to Inspect's own `model_usage`:
"""),
        code("""
frames = to_frames(store, inspect.roots)
frames.traces[["name", "depth", "total_prompt_tokens", "total_completion_tokens", "source"]]""", check=True),
        code("""
per_sample = frames.traces.groupby("root_trace_id")["total_prompt_tokens"].sum().tolist()
print("imported:", per_sample, "— Inspect's model_usage:",
      [s.model_usage["mockllm/model"].input_tokens for s in log.samples])""", check=True),
        md("""
The scores are verdicts, so the frames of validations and the stepper show them:
"""),
        code("""
frames.verdicts[["scope", "verdict", "summary"]]""", check=True),
        code("""
from cyber_agent.notebook import ReportStepper

ReportStepper(store, inspect.roots[0])""", ignore=True),
        md("""
## All sources side by side

The traces frame names each trace's `source` and `provenance` — for native traces the store
they were read from — so frames of several stores and tools concatenate and stay apart:
"""),
        code("""
everything = to_frames(store)
everything.traces.groupby("source").agg(traces=("trace_id", "size"), messages=("total_messages", "sum"),
                                        tokens=("total_tokens", "sum"))""", check=True),
        md("""
## What to take away

- `load_runs(path, store=...)` (or `cyber-agent import --from inspect|otel|redel PATH --store URL`)
  imports into any store; a file that is not its format is named with the first thing that did
  not fit, and a folder's summary lists what was skipped and why.
- What the source records maps onto traces, messages, tool calls, usage and verdicts; what it
  does not is flagged `missing` and shown as unknown — ReDel's trees have their shape and text
  but no tokens without `events.jsonl`.
- Every helper of this toolkit then works on them, so a ReDel tree, an Inspect sample and a
  native run are compared with the same code.
"""),
    ]


NOTEBOOKS = {"09_imported_runs.ipynb": imported_runs}


def main(argv: list[str] | None = None) -> int:
    """Write (and execute) notebook 09 with the legacy builder's machinery."""
    return build_all(argv, NOTEBOOKS)


if __name__ == "__main__":
    sys.exit(main())
