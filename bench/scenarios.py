"""Offline runs shared by the counting benches (`recursive_writes.py`, `store_calls.py`).

- `run_demo(store, mode)`: the `cyber-agent demo` run (DemoModel on data/sales.csv), legacy
  or recursive (the recursive one with the demo's root anchor), as `cyber_agent/cli/_run.py` sets it up;
- `run_tree(store, agents, workspace)`: the `bench/recursive_tree.py` tree (`agents` agents,
  fanout 6, sequential children, zero model latency);
- `call_site(skip)`: the innermost cyber_agent frame of the current stack, for "who called this".

Call `prepare(agents)` once before running: a clean AGENT_* environment (the tree's budget set
to its size) and the repository as the working directory (the demo task names data/sales.csv
relative to it).
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

ROOT_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT_DIR))
sys.path.insert(0, str(ROOT_DIR / "bench"))

from recursive_tree import ROOT, TreeModel, clean_environment, plan_tree, tree_config  # noqa: E402

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK  # noqa: E402
from cyber_agent.core.config import RunConfig  # noqa: E402
from cyber_agent.core.runner import AgentRunner  # noqa: E402
from cyber_agent.trace.protocols import TraceStore  # noqa: E402

__all__ = ["ROOT_DIR", "call_site", "prepare", "run_demo", "run_tree"]


def prepare(agents: int) -> None:
    """A clean AGENT_* environment sized for a tree of up to `agents` agents; cwd = the repository."""
    clean_environment(agents)
    os.chdir(ROOT_DIR)


async def run_demo(store: TraceStore, mode: str = "recursive") -> tuple[str, str]:
    """Run the offline demo on `store`; return the root trace id and its status."""
    runner = AgentRunner(trace_store=store, workspace=str(ROOT_DIR))
    config = RunConfig(model="demo", max_iterations=30, workspace=str(ROOT_DIR), agent_mode=mode,  # type: ignore[arg-type]
                       root_task_anchor=DEMO_ANCHOR if mode == "recursive" else None)
    result = await runner.run_result([{"role": "user", "content": DEMO_TASK}], config)
    return result.trace.trace_id, result.status


async def run_tree(store: TraceStore, agents: int, workspace: str) -> tuple[str, str]:
    """Run the recursive_tree.py tree of `agents` agents (sequential, no latency); return root id and status."""
    model = TreeModel(plan_tree(agents, 6), 0.0)
    runner = AgentRunner(trace_store=store, llm_call=model.llm, workspace=workspace)
    result = await runner.run_result([{"role": "user", "content": ROOT}], tree_config("sequential"))
    return result.trace.trace_id, result.status


def call_site(skip: tuple[str, ...] = ()) -> str:
    """`module.py:function` of the innermost frame inside cyber_agent/ whose path contains none of `skip`."""
    bench = str(ROOT_DIR / "bench").replace(os.sep, "/") + "/"
    for frame in reversed(traceback.extract_stack()):
        path = frame.filename.replace(os.sep, "/")
        if "/cyber_agent/" in path and not path.startswith(bench) and not any(part in path for part in skip):
            return f"{path.rsplit('/cyber_agent/', 1)[1]}:{frame.name}"
    return "?"
