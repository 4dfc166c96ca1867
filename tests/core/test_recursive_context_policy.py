"""Recursive context policy (SPEC A3, A9): root anchor, TaskBrief normalization, context refs."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_helpers import (
    ANCHOR,
    ROOT_TASK,
    brief,
    call,
    clean_agent_env,  # noqa: F401 - autouse fixture
    make_runner,
    new_brain,
    recursive_config,
    run_root,
    text,
)

from cyber_agent.core.config import RunConfig
from cyber_agent.core.context_policy import grant_context_refs, normalize_task_brief, task_briefs_match
from cyber_agent.core.task_protocol import RootTaskAnchor, TaskBrief, TaskReport
from cyber_agent.errors import ConfigurationError, InvalidUpdateError, RunError, ToolArgumentError
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.trace_id import new_sub_trace_id

GO_ON = [{"role": "user", "content": "continue"}]


# ---- RootTaskAnchor on a recursive root -----------------------------------------------------

@pytest.mark.parametrize("via_env", [False, True])
async def test_recursive_root_without_anchor_is_refused_before_any_call(monkeypatch, via_env):
    store = InMemoryTraceStore()
    with ScriptedModel([]) as model:
        runner = make_runner(model, store=store)
        if via_env:
            monkeypatch.setenv("AGENT_MODE", "recursive")
            config = RunConfig()
        else:
            config = RunConfig(agent_mode="recursive")
        with pytest.raises(ConfigurationError, match="root_task_anchor"):
            await runner.run_result([{"role": "user", "content": ROOT_TASK}], config)
    assert model.requests == []
    assert await store.list_traces(limit=None) == []


@pytest.mark.parametrize("anchor", [
    {"objective": "x", "completion_criteria": []},
    {"objective": "x", "completion_criteria": ["   "]},
    {"objective": "   ", "completion_criteria": ["done"]},
    {"objective": "x"},
    {"objective": "x", "completion_criteria": ["done"], "root_completion_criteria": ["done"]},
])
async def test_an_anchor_without_usable_criteria_or_objective_is_refused(anchor):
    store = InMemoryTraceStore()
    with ScriptedModel([]) as model:
        with pytest.raises(ConfigurationError, match="root_task_anchor"):
            await make_runner(model, store=store).run_result(
                [{"role": "user", "content": "t"}], RunConfig(agent_mode="recursive", root_task_anchor=anchor))
    assert await store.list_traces(limit=None) == []


def test_root_completion_criteria_is_an_explicit_error_pointing_at_the_anchor():
    with pytest.raises(ValueError, match=r"root_completion_criteria.*removed.*root_task_anchor"):
        RunConfig(agent_mode="recursive", root_completion_criteria=["the answer is 42"])
    with pytest.raises(ValueError, match="root_completion_criteria"):
        RunConfig.model_validate({"root_completion_criteria": []})


async def test_the_root_stores_the_normalized_anchor_its_hash_and_a_budget_snapshot():
    brain = new_brain(levels=0)
    spaced = {"objective": "  Compute the launch checksum ", "completion_criteria": ["the  checksum is stated", "the checksum is stated"]}
    result = await run_root(make_runner(brain), recursive_config(spaced))
    setup = result.trace.root_setup
    assert setup is not None
    anchor = RootTaskAnchor.model_validate(spaced)
    assert setup.anchor.model_dump() == {"objective": "Compute the launch checksum",
                                         "completion_criteria": ["the checksum is stated"], "constraints": []}
    canonical = json.dumps(setup.anchor.model_dump(), sort_keys=True).encode()
    assert setup.anchor_hash == anchor.content_hash() == hashlib.sha256(canonical).hexdigest()
    assert RootTaskAnchor(objective="Compute the launch checksum!", completion_criteria=["the checksum is stated"]
                          ).content_hash() != anchor.content_hash()
    assert setup.resource_budget.max_llm_calls == 150
    # The root's own model sees the anchor, criteria included, as part of its task.
    root_request = brain.first_requests[0][0][0]
    assert "the checksum is stated" in root_request[-1]["content"]


def _no_setup(setup):
    return None


def _edit_objective(setup):
    return setup.model_copy(update={"anchor": setup.anchor.model_copy(update={"objective": "something else entirely"})})


def _edit_hash(setup):
    return setup.model_copy(update={"anchor_hash": "0" * 64})


@pytest.mark.parametrize("mutate", [_no_setup, _edit_objective, _edit_hash],
                         ids=["no-anchor-hash-or-budget", "anchor-edited", "hash-edited"])
async def test_a_revision2_root_missing_or_tampering_its_anchor_refuses_to_continue(mutate):
    brain = new_brain(levels=0)
    runner = make_runner(brain)
    first = await run_root(runner)
    await brain.store.update_trace(first.trace.trace_id, root_setup=mutate(first.trace.root_setup))
    calls_before = len(brain.llm.requests)
    with pytest.raises(RunError, match="new task"):
        await runner.run_result(GO_ON, RunConfig(trace_id=first.trace.trace_id))
    assert len(brain.llm.requests) == calls_before
    assert (await brain.store.get_trace(first.trace.trace_id)).total_messages == first.trace.total_messages


async def test_an_intact_recursive_root_continues():
    brain = new_brain(levels=0)
    runner = make_runner(brain)
    first = await run_root(runner)
    again = await runner.run_result(GO_ON, RunConfig(trace_id=first.trace.trace_id))
    assert again.status == "completed"
    assert len(brain.llm.requests) > 2


async def test_a_malformed_anchor_is_refused_by_the_store_and_the_root_stays_intact():
    brain = new_brain(levels=0)
    runner = make_runner(brain)
    first = await run_root(runner)
    setup = first.trace.root_setup.model_dump()
    setup["anchor"] = {"objective": "x", "completion_criteria": []}
    with pytest.raises(InvalidUpdateError, match="completion_criteria"):
        await brain.store.update_trace(first.trace.trace_id, root_setup=setup)
    assert (await brain.store.get_trace(first.trace.trace_id)).root_setup == first.trace.root_setup
    again = await runner.run_result(GO_ON, RunConfig(trace_id=first.trace.trace_id))
    assert again.status == "completed"


# ---- TaskBrief normalization and matching ---------------------------------------------------

def test_normalization_collapses_whitespace_dedupes_and_inherits_hard_constraints():
    parent = TaskBrief(objective="p", completion_criteria=["c"], constraints=["stay offline", "cite sources"])
    anchor = RootTaskAnchor.model_validate(ANCHOR)
    raw = {"objective": "  find   the\nchecksum ", "completion_criteria": ["it is  found", "it is found", "it\tis found "],
           "constraints": ["cite   sources", "be brief"], "expected_outputs": ["the sum", "the  sum"]}
    normalized = normalize_task_brief(raw, parent_brief=parent, anchor=anchor)
    assert normalized.objective == "find the checksum"
    assert normalized.completion_criteria == ["it is found"]
    assert normalized.expected_outputs == ["the sum"]
    assert normalized.constraints == ["cite sources", "be brief", "never modify workspace files", "stay offline"]
    assert normalize_task_brief(raw).constraints == ["cite sources", "be brief"]


@pytest.mark.parametrize("raw", [
    "do it", ["objective"], None,
    {"completion_criteria": ["x"]},
    {"objective": "x", "completion_criteria": []},
    {"objective": "   ", "completion_criteria": ["x"]},
    {"objective": "x", "completion_criteria": [" \n "]},
    {"objective": "x", "completion_criteria": ["y"], "deadline": "now"},
    {"objective": "x" * 4001, "completion_criteria": ["y"]},
    {"objective": "x", "completion_criteria": ["y"], "context_refs": [f"ref-1-{i}" for i in range(9)]},
], ids=["str", "list", "none", "no-objective", "no-criteria", "blank-objective", "blank-criterion",
        "unknown-field", "too-long", "nine-refs"])
def test_a_malformed_brief_is_a_tool_argument_error(raw):
    with pytest.raises(ToolArgumentError):
        normalize_task_brief(raw)


def test_task_briefs_match_tells_a_revision_from_a_new_task():
    original = TaskBrief(objective="Find the checksum", completion_criteria=["it is found", "it is verified"])
    revision = TaskBrief(objective="find  the CHECKSUM", completion_criteria=["It is verified", "it is found"],
                         expected_outputs=["checksum and file name"], constraints=["be quick"], reason="again")
    assert task_briefs_match(original, revision)
    assert not task_briefs_match(original, original.model_copy(update={"objective": "Find the password"}))
    assert not task_briefs_match(original, original.model_copy(update={"completion_criteria": ["it is found"]}))
    extra = original.model_copy(update={"completion_criteria": [*original.completion_criteria, "it is signed"]})
    assert not task_briefs_match(original, extra)


_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=8,
)
_keys = st.sampled_from(["objective", "reason", "completion_criteria", "expected_outputs", "constraints",
                         "context_refs"]) | st.text(max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.dictionaries(_keys, _value | st.lists(st.text(max_size=40), max_size=25), max_size=7),
       inherited=st.integers(min_value=0, max_value=20))
def test_fuzzed_briefs_normalize_or_raise_only_tool_argument_errors(raw, inherited):
    parent = TaskBrief(objective="p", completion_criteria=["c"], constraints=[f"rule {i}" for i in range(inherited)])
    try:
        normalized = normalize_task_brief(raw, parent_brief=parent)
    except ToolArgumentError:
        return
    assert normalized.objective.strip() and normalized.completion_criteria
    # What is stored is read back as a TaskBrief (revisions, grandchildren): it must stay valid and stable.
    assert TaskBrief.model_validate(normalized.model_dump()) == normalized
    assert normalize_task_brief(normalized.model_dump(), parent_brief=parent) == normalized


def test_inherited_constraints_never_push_a_brief_past_its_limits():
    parent = TaskBrief(objective="p", completion_criteria=["c"], constraints=[f"parent rule {i}" for i in range(15)])
    raw = {"objective": "x", "completion_criteria": ["y"], "constraints": [f"own rule {i}" for i in range(10)]}
    with pytest.raises(ToolArgumentError, match="inherited"):
        normalize_task_brief(raw, parent_brief=parent)
    raw["constraints"] = raw["constraints"][:5]
    normalized = normalize_task_brief(raw, parent_brief=parent)
    assert len(normalized.constraints) == 20
    assert TaskBrief.model_validate(normalized.model_dump()) == normalized


def test_eight_context_refs_are_the_most_a_brief_may_grant():
    refs = [f"ref-1-{i}" for i in range(8)]
    assert normalize_task_brief({"objective": "x", "completion_criteria": ["y"], "context_refs": refs}).context_refs == refs


# ---- context refs: what a parent can grant ---------------------------------------------------

async def _tree(store):
    """A hand-built recursive tree: root R with child C (reported) and grandchild G; another tree X."""
    root = Trace.create(task="root", context={"agent_mode": "recursive", "agent_depth": 0})
    root.lineage.root_trace_id = root.trace_id
    child_id = new_sub_trace_id(root.trace_id, "delegate", 1)
    report = TaskReport(outcome="completed", summary="checksum is 7781", outputs=["7781"]).model_dump(mode="json")
    child = Trace.create(trace_id=child_id, task="c", parent_trace_id=root.trace_id, context={
        "root_trace_id": root.trace_id, "agent_depth": 1, "created_by_tool": "agent", "task_protocol": {"report": report},
        "context_access": {"refs": {"ref-1-1": {"ref_id": "ref-1-1", "kind": "message", "source": "s", "title": "held",
                                                "content": "held text", "sha256": "x", "chars": 9}}},
    })
    quiet = Trace.create(trace_id=new_sub_trace_id(root.trace_id, "delegate", 2), task="q", parent_trace_id=root.trace_id,
                         context={"root_trace_id": root.trace_id, "agent_depth": 1, "created_by_tool": "agent"})
    grandchild = Trace.create(trace_id=new_sub_trace_id(child_id, "delegate", 1), task="g", parent_trace_id=child_id,
                              context={"root_trace_id": root.trace_id, "agent_depth": 2, "task_protocol": {"report": report}})
    other = Trace.create(task="other", context={"agent_mode": "recursive"})
    other.lineage.root_trace_id = other.trace_id
    for trace in (root, child, quiet, grandchild, other):
        await store.create_trace(trace)
    ids = {}
    for name, trace in (("root", root), ("child", child), ("other", other)):
        message = Message.create(trace_id=trace.trace_id, role="tool", content=f"{name} finding: 7781")
        ids[name] = await store.add_message(message)
    return {"root": root, "child": child, "quiet": quiet, "grandchild": grandchild, "other": other, "msg": ids}


async def test_a_parent_grants_its_own_message_as_a_hashed_snapshot():
    store = InMemoryTraceStore()
    tree = await _tree(store)
    granted = await grant_context_refs(store, tree["root"], [{"message_id": tree["msg"]["root"], "title": "finding"}], 1)
    (ref_id, ref), = granted.items()
    assert ref.kind == "message" and ref.source == tree["msg"]["root"] and ref.title == "finding"
    assert ref.content == "root finding: 7781"
    assert ref.sha256 == hashlib.sha256(b"root finding: 7781").hexdigest() and ref.chars == 18
    await store.update_message(tree["msg"]["root"], content="rewritten later")
    assert ref.content == "root finding: 7781"


async def test_a_parent_grants_the_report_of_its_own_child_and_re_grants_a_held_ref():
    store = InMemoryTraceStore()
    tree = await _tree(store)
    report = await grant_context_refs(store, tree["root"], [{"report_of": tree["child"].trace_id}], 1)
    (ref,) = report.values()
    assert ref.kind == "report" and "7781" in ref.content and ref.source == tree["child"].trace_id
    held = await grant_context_refs(store, tree["child"], ["ref-1-1"], 1)
    assert held == {"ref-1-1": tree["child"].protocol.context_access.refs["ref-1-1"]}


@pytest.mark.parametrize("who, ref, match", [
    ("root", lambda t: {"message_id": t["msg"]["child"]}, "own"),
    ("root", lambda t: {"message_id": t["msg"]["other"]}, "own"),
    ("child", lambda t: {"message_id": t["msg"]["root"]}, "own"),
    ("root", lambda t: {"report_of": t["grandchild"].trace_id}, "not a child"),
    ("root", lambda t: {"report_of": t["other"].trace_id}, "not a child"),
    ("root", lambda t: {"report_of": t["quiet"].trace_id}, "no report"),
    ("root", lambda t: "ref-1-1", "not granted"),
    ("root", lambda t: {"path": "/etc/passwd"}, "use a ref id"),
], ids=["child-message", "other-tree-message", "parent-message", "grandchild-report", "other-tree-report",
        "no-report", "ref-not-held", "unknown-kind"])
async def test_a_parent_cannot_grant_what_it_does_not_own(who, ref, match):
    store = InMemoryTraceStore()
    tree = await _tree(store)
    with pytest.raises(ToolArgumentError, match=match):
        await grant_context_refs(store, tree[who], [ref(tree)], 1)


async def test_a_new_ref_never_shadows_a_held_ref_with_the_same_position():
    store = InMemoryTraceStore()
    tree = await _tree(store)
    own = await store.add_message(Message.create(trace_id=tree["child"].trace_id, role="tool", content="child note"))
    granted = await grant_context_refs(store, tree["child"], [{"message_id": own}, "ref-1-1"], 1)
    assert sorted(r.content for r in granted.values()) == ["child note", "held text"]


# ---- context refs through the runner ---------------------------------------------------------

async def test_a_child_reads_its_granted_ref_and_nothing_else(tmp_path):
    (tmp_path / "code.txt").write_text("launch code 7781")
    brain = new_brain(levels=1)
    seen = {}

    def root(turn):
        if not turn.results:
            return call("read_file", path="code.txt")
        if len(turn.results) == 1:
            message_id = f"{turn.brain.root_id}-{len(turn.messages):04d}"
            return call("agent", task_brief=brief("use the code", context_refs=[{"message_id": message_id, "title": "code"}]))
        return None

    def child(turn):
        if len(turn.results) < 3:
            ref = ["ref-1-1", "ref-9-9", "ref-1-2"][len(turn.results)]
            return call("read_context_ref", ref_id=ref)
        seen["results"] = turn.results
        return None

    brain.hooks = {"d0": root, "d1": child}
    brain.root_id = "00000000-0000-4000-8000-00000000c0de"
    result = await run_root(make_runner(brain), recursive_config(new_trace_id=brain.root_id, workspace=str(tmp_path)))
    assert result.status == "completed"
    granted, wrong, missing = seen["results"]
    assert "launch code 7781" in granted and "code" in granted
    assert "not granted" in wrong and "ref-1-1" in wrong
    assert "not granted" in missing
    task = brain.first_requests[1][0][0][-1]["content"]
    assert "ref-1-1: code (message" in task and "launch code 7781" not in task


async def test_a_tampered_snapshot_fails_its_hash_check():
    brain = new_brain(levels=1)
    brain.root_id = "00000000-0000-4000-8000-00000000beef"
    seen = {}

    async def child(turn):
        if not turn.results:
            mine = await turn.trace()
            mine.protocol.context_access.refs["ref-1-1"].content = "forged"
            await turn.brain.store.update_trace(mine.trace_id, protocol=mine.protocol)
            return call("read_context_ref", ref_id="ref-1-1")
        seen["result"] = turn.results[0]
        return None

    def root(turn):
        if not turn.results:
            return call("agent", task_brief=brief("x", context_refs=[{"message_id": f"{brain.root_id}-0002"}]))
        return None

    brain.hooks = {"d0": root, "d1": child}
    await run_root(make_runner(brain), recursive_config(new_trace_id=brain.root_id))
    assert "hash check" in seen["result"] and "forged" not in seen["result"]


async def test_a_brief_granting_a_message_of_another_tree_creates_nothing():
    brain = new_brain(levels=0)
    runner = make_runner(brain)
    other = await run_root(runner)
    foreign = f"{other.trace.trace_id}-0002"
    refused = {}

    def root(turn):
        if turn.task != "second" or len(turn.results) > 1:
            return None
        if turn.results:
            refused["text"] = turn.results[0]
            return text("gave up")
        return call("agent", task_brief=brief("x", context_refs=[{"message_id": foreign}]))

    brain.hooks = {"d0": root}
    second = await run_root(runner, task="second")
    assert "not in this agent's own trace" in refused["text"]
    assert second.trace.lineage.child_count == 0
    assert await brain.store.list_traces(parent_trace_id=second.trace.trace_id, created_by_tool="agent") == []
