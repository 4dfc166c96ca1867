"""The offline sample tree: written through the store API, deterministic, shaped like a recursive run."""

from __future__ import annotations

from collections import Counter

import pytest

from cyber_agent.notebook import goal_graph, to_frames, trace_graph
from cyber_agent.notebook.sample_tree import awrite_sample_tree, write_sample_tree
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore


@pytest.fixture(scope="module")
def sample():
    store = InMemoryTraceStore()
    return store, write_sample_tree(store, traces=300, seed=11)


def test_the_tree_has_exactly_the_traces_asked_for(sample):
    store, written = sample
    frames = to_frames(store)
    traces = frames.traces
    assert len(traces) == written.traces == 300 and frames.roots == [written.root_trace_id]
    assert written.agents + written.validators == 300
    assert int(traces["is_validator"].sum()) == written.validators
    assert (traces["status"] == "failed").sum() == written.failed > 0
    assert (traces["status"] == "stopped").sum() == written.stopped
    assert int(traces["depth"].max()) >= 3 and traces["agent_mode"].eq("recursive").all()
    assert (traces["total_tokens"] > 0).all() and traces["total_cost"].sum() > 0  # priced, not $0
    agents = traces[~traces["is_validator"] & traces["parent_trace_id"].notna()]
    assert len(frames.reports) == len(agents)  # every agent below the root has a brief and a report


def test_validators_judge_with_every_verdict_and_revisions(sample):
    store, written = sample
    validations = to_frames(store, messages=False).validations.drop_duplicates("validator_trace_id")
    assert set(validations["verdict"]) == {"pass", "fail", "unknown"}
    per_target = Counter(validations["trace_id"])
    assert max(per_target.values()) == 2  # a rejected first report was revised and judged again
    graph = trace_graph(store, written.root_trace_id)
    paths = [data["path"] for _, data in graph.nodes(data=True)]
    assert len(set(paths)) == 300
    children = {}
    for node in graph:
        for child in graph.successors(node):
            if graph.nodes[child]["role"] != "validator":
                children.setdefault(node, []).append(graph.nodes[child]["title"])
    assert all(len(set(titles)) == len(titles) for titles in children.values())  # siblings tell apart


def test_a_failed_agent_leaves_its_plan_open_and_the_goal_tree_shows_it(sample):
    store, written = sample
    frames = to_frames(store, messages=False)
    failed = frames.traces.loc[frames.traces["status"] == "failed", "trace_id"].iloc[0]
    goals = frames.goals[frames.goals["trace_id"] == failed].sort_values("position")
    assert goals["status"].tolist() == ["in_progress", "completed", "in_progress", "pending"]
    graph = goal_graph(frames, written.root_trace_id, sub_traces=True)
    drawn = [graph.nodes[f"{failed}/{goal}"]["status"] for goal in goals["goal_id"]]
    assert drawn == ["failed", "completed", "failed", "failed"]
    kinds = Counter(d["kind"] for _, d in graph.nodes(data=True))
    assert kinds == {"goal": 4 * written.agents, "trace": written.agents - 1}  # an objective and three steps each
    delegated = [n for n, d in graph.nodes(data=True) if d.get("role") == "agent_call"]
    assert all(graph.nodes[child]["kind"] == "trace" for n in delegated for child in graph.successors(n))


async def test_the_same_seed_writes_the_same_tree(tmp_path):
    first, second = InMemoryTraceStore(), FileSystemTraceStore(tmp_path)
    a = await awrite_sample_tree(first, traces=40, seed=3)
    b = await awrite_sample_tree(second, traces=40, seed=3)
    assert a == b
    columns = ["trace_id", "parent_trace_id", "role", "status", "task", "total_tokens", "total_cost", "created_at"]
    left = to_frames(first, messages=False).traces[columns]
    right = to_frames(str(tmp_path), messages=False).traces[columns]
    assert left.equals(right)
    assert (await awrite_sample_tree(InMemoryTraceStore(), traces=40, seed=4)).root_trace_id != a.root_trace_id


def test_a_directory_becomes_a_file_store(tmp_path):
    written = write_sample_tree(tmp_path / "sample", traces=12)
    assert len(to_frames(tmp_path / "sample", messages=False).traces) == written.traces == 12


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"traces": 0}, "traces must be an int of at least 1, got 0"),
    ({"max_depth": 0}, "max_depth must be from 1 to 5, got 0"),
    ({"max_depth": 6}, "max_depth must be from 1 to 5, got 6: .* longer than 220 characters"),
    ({"traces": 128, "max_depth": 2}, "traces=128 does not fit in a tree 2 levels deep: .* at most 127 traces"),
])
def test_bad_sizes_are_refused_saying_why(kwargs, message):
    with pytest.raises(ValueError, match=message):
        write_sample_tree(InMemoryTraceStore(), **kwargs)


def test_the_deepest_tree_the_ids_allow_is_written(sample):
    """Depth 5: the validator of a depth-5 agent has the longest id that fits (a depth-6 one would not)."""
    store = InMemoryTraceStore()
    written = write_sample_tree(store, traces=1500, seed=2, max_depth=5)
    traces = to_frames(store, messages=False).traces
    assert written.traces == len(traces) == 1500 and written.depth == 5 == int(traces.loc[~traces["is_validator"], "depth"].max())
    assert traces["trace_id"].str.len().max() <= 220


@pytest.mark.parametrize(("traces", "max_depth"), [(120, 2), (300, 3), (300, 5)])
def test_it_writes_exactly_what_is_asked_with_at_most_six_children_per_agent(traces, max_depth):
    """A shallow tree must be filled up past the shape first drawn: still exactly `traces`, within the recursive quota."""
    store = InMemoryTraceStore()
    written = write_sample_tree(store, traces=traces, seed=5, max_depth=max_depth)
    frame = to_frames(store, messages=False).traces
    assert written.traces == len(frame) == traces and written.depth <= max_depth
    agents = frame[~frame["is_validator"]]
    children = agents["parent_trace_id"].value_counts()
    assert children.max() <= 6, children.head()
    per_agent = frame[frame["is_validator"]]["parent_trace_id"].value_counts()
    assert per_agent.max() <= 2


def test_a_seed_whose_tree_cannot_hold_the_traces_says_so():
    """127 traces at depth 2 needs every agent completed and judged twice: this seed's draw holds fewer."""
    with pytest.raises(ValueError, match=r"traces=127: seed 5 draws a tree of at most \d+ traces at max_depth=2"):
        write_sample_tree(InMemoryTraceStore(), traces=127, seed=5, max_depth=2)
