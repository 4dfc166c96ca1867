"""A fork in the tree view (cyber_agent/notebook/fork_view.py): every node says whether it was replayed or ran live."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from pathlib import Path  # noqa: E402

from cyber_agent.cli import DEMO_TASK  # noqa: E402
from cyber_agent.core.config import RunConfig  # noqa: E402
from cyber_agent.core.fork import Brief, fork  # noqa: E402
from cyber_agent.core.runner import AgentRunner  # noqa: E402
from cyber_agent.llm.call_site import tree_position  # noqa: E402
from cyber_agent.llm.demo import DemoModel  # noqa: E402
from cyber_agent.notebook.fork_view import afork_graph, draw_fork_tree  # noqa: E402
from cyber_agent.trace import InMemoryTraceStore  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


async def test_the_fork_tree_marks_the_changed_child_live_and_its_siblings_replayed() -> None:
    store = InMemoryTraceStore()
    config = RunConfig(model="demo", workspace=str(REPO), agent_mode="legacy")
    root = (await AgentRunner(trace_store=store, llm_call=DemoModel()).run_result(
        [{"role": "user", "content": DEMO_TASK}], config)).trace.trace_id
    child = next(t.trace_id for t in await store.list_traces(parent_trace_id=root) if t.trace_id.endswith("-002"))
    result = await fork(store, root, at=child, change=Brief(task="Compute the revenue (units × unit_price) of region "
                                                                 "North in data/sales.csv, in cents."))
    graph = await afork_graph(store, result.trace.trace_id)
    states = {tree_position(node): data["fork_state"] for node, data in graph.nodes(data=True)}
    assert states["root/explore-002"] == "live" and states["root/explore-001"] == "replayed"
    assert states["root"] == "mixed"  # its turns before the delegation replayed, those after it live
    live_node = next(n for n in graph if tree_position(n) == "root/explore-002")
    assert graph.nodes[live_node]["label"].endswith(f"live · {graph.nodes[live_node]['live_calls']} live calls")
    figure = await _draw(store, result.trace.trace_id)
    assert figure.axes and any("replayed" in t.get_text() for t in figure.axes[0].texts)


async def _draw(store: InMemoryTraceStore, fork_id: str):  # type: ignore[no-untyped-def]
    import asyncio

    return await asyncio.to_thread(draw_fork_tree, store, fork_id, labels=True)
