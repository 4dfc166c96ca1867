"""`read_records`' selective reads (`goals=False`, `fields=`, `subtrees=False`), for every store in conftest.STORE_FACTORIES.

A projected read equals the whole read restricted to the same fields, for several roots, a
subtree root and through a fresh reader; unknown ids and fields raise errors that name them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from store_helpers import add_chain

from cyber_agent.errors import InvalidUpdateError, TraceNotFoundError
from cyber_agent.trace import FileSystemTraceStore, Trace
from cyber_agent.trace.protocol_records import TaskBrief, ValidationResult
from cyber_agent.trace.state import RUNNER_OWNED_CONTEXT, ProtocolState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
OLD_EXPORT = Path(__file__).resolve().parent / "data" / "recursive_demo_untyped.jsonl"  # as test_typed_state.py
TOP = ["parent_trace_id", "status", "total_cost", "total_tokens", "total_messages", "task", "agent_type", "created_at"]
FIELDS = [*TOP, "lineage.created_by_tool", "protocol.brief.objective", "protocol.validations.verdict",
          "protocol.validations.validator_trace_id", "context.kept"]


def _restricted(meta: dict, fields: list[str]) -> dict:
    """The whole meta cut to FIELDS (or FIELDS without `context.kept`), written out by hand (the oracle)."""
    protocol = meta["protocol"]
    brief = protocol["brief"]
    out = {
        "trace_id": meta["trace_id"], **{k: meta[k] for k in TOP},
        "lineage": {"created_by_tool": meta["lineage"]["created_by_tool"]},
        "protocol": {"brief": None if brief is None else {"objective": brief["objective"]},
                     "validations": [{"verdict": v["verdict"], "validator_trace_id": v["validator_trace_id"]}
                                     for v in protocol["validations"]]},
        "context": {"kept": meta["context"]["kept"]} if "kept" in meta["context"] else {},
    }
    if "context.kept" not in fields:
        del out["context"]
    return out


async def _forest(store) -> dict[str, str]:
    """Two trees: a root with a briefed child (validated, with a validator) and a grandchild; another root."""
    ids: dict[str, str] = {}

    async def make(name: str, seconds: int, **fields: object) -> str:
        trace = Trace.create(task=f"# {name}\n{name} task", created_at=T0 + timedelta(seconds=seconds), **fields)
        await store.create_trace(trace)
        ids[name] = trace.trace_id
        return trace.trace_id

    root = await make("root", 0, agent_type="main", context={"kept": {"a": 1}, "dropped": 2})
    child = await make("child", 1, parent_trace_id=root, protocol=ProtocolState(
        brief=TaskBrief(objective="Count the rows", completion_criteria=["a number"])))
    validator = await make("validator", 2, parent_trace_id=child, agent_type="validator",
                           lineage={"created_by_tool": "validator"})
    await make("grandchild", 3, parent_trace_id=child, context={"dropped": 1})
    await make("other", 4, context={"kept": "yes"})
    await add_chain(store, child, 3)
    await store.update_trace(child, status="completed", protocol=ProtocolState(
        brief=TaskBrief(objective="Count the rows", completion_criteria=["a number"]),
        validations=[ValidationResult(scope="criteria", target_trace_id=child, validator_trace_id=validator,
                                      verdict="pass")]))
    await store.replace_resource_usage(root, {"spent": 3})
    return ids


async def test_a_projected_read_is_the_whole_read_restricted(store, open_store):
    ids = await _forest(store)
    for reader in (store, open_store()):
        for roots, fields in (([ids["root"]], FIELDS), ([ids["other"], ids["root"]], FIELDS), ([ids["child"]], FIELDS),
                              (None, FIELDS), ([ids["root"]], FIELDS[:-1])):
            whole = await reader.read_records(roots)
            part = await reader.read_records(roots, messages=False, events=False, goals=False, fields=fields)
            assert [r.trace_id for r in part] == [r.trace_id for r in whole]
            assert [r.trace for r in part] == [_restricted(r.trace, fields) for r in whole]
            assert all(r.goal_tree is None and r.messages == [] and r.events == [] for r in part)
            assert [r.resource_usage for r in part] == [r.resource_usage for r in whole]
    (child,) = [r for r in await store.read_records([ids["child"]], fields=["protocol.validations.verdict"])
                if r.trace_id == ids["child"]]
    assert child.trace == {"trace_id": ids["child"], "protocol": {"validations": [{"verdict": "pass"}]}}
    assert child.goal_tree is not None and len(child.messages) == 3  # the other parts are read as before


async def test_without_goals_the_rest_of_the_record_is_unchanged(store, open_store):
    ids = await _forest(store)
    for reader in (store, open_store()):
        whole = await reader.read_records([ids["root"]])
        lean = await reader.read_records([ids["root"]], goals=False)
        assert [(r.trace, r.messages, r.events, r.resource_usage) for r in lean] == \
            [(r.trace, r.messages, r.events, r.resource_usage) for r in whole]
        assert all(r.goal_tree is None for r in lean) and all(r.goal_tree is not None for r in whole)


async def test_only_the_named_traces_in_their_order(store, open_store):
    ids = await _forest(store)
    named = [ids["grandchild"], ids["root"], ids["child"], ids["root"]]
    for reader in (store, open_store()):
        whole = {r.trace_id: r for r in await reader.read_records()}
        picked = await reader.read_records(named, subtrees=False)
        assert [r.trace_id for r in picked] == [ids["grandchild"], ids["root"], ids["child"]]
        assert [(r.trace, r.goal_tree, r.messages, r.events) for r in picked] == \
            [(whole[t].trace, whole[t].goal_tree, whole[t].messages, whole[t].events) for t in named[:3]]
        lean = await reader.read_records([ids["validator"]], subtrees=False, fields=["status"], goals=False)
        assert [r.trace for r in lean] == [{"trace_id": ids["validator"], "status": "running"}]


async def test_unknown_ids_and_fields_are_named(store):
    ids = await _forest(store)
    unknown = "0" * 8 + "-0000-4000-8000-" + "0" * 12
    for subtrees in (True, False):
        with pytest.raises(TraceNotFoundError, match=unknown):
            await store.read_records([ids["root"], unknown], subtrees=subtrees, fields=["status"])
    with pytest.raises(InvalidUpdateError, match="'stauts' is not a field of Trace"):
        await store.read_records([ids["root"]], fields=["stauts"])
    with pytest.raises(InvalidUpdateError, match="'protocol.breif' is not a field of ProtocolState"):
        await store.read_records([ids["root"]], fields=["protocol.breif"])
    with pytest.raises(InvalidUpdateError, match="'status' has no named parts"):
        await store.read_records([ids["root"]], fields=["status.code"])
    with pytest.raises(InvalidUpdateError, match="collection of field names"):
        await store.read_records([ids["root"]], fields="status")


async def test_an_old_record_is_migrated_before_it_is_projected(tmp_path):
    """A meta written before the runner's state was typed keeps it in `context`: projected after migration."""
    lines = [json.loads(line) for line in OLD_EXPORT.read_text(encoding="utf-8").splitlines()[1:]]
    counted = ("total_messages", "total_prompt_tokens", "total_completion_tokens", "total_tokens", "head_sequence")
    raw = {**next(line["trace"] for line in lines if line.get("kind") == "trace"), **{k: 0 for k in counted},
           "current_goal_id": None}
    assert not RUNNER_OWNED_CONTEXT.isdisjoint(raw["context"])
    await FileSystemTraceStore(tmp_path).create_trace(Trace.model_validate(raw))
    next(tmp_path.rglob("meta.json")).write_text(json.dumps(raw), encoding="utf-8")  # the old shape on disk
    fresh = FileSystemTraceStore(tmp_path)
    (whole,) = await fresh.read_records()
    (part,) = await fresh.read_records(fields=["lineage.mode", "context"])
    assert whole.trace["lineage"]["mode"] == "recursive" and RUNNER_OWNED_CONTEXT.isdisjoint(whole.trace["context"])
    assert part.trace == {"trace_id": raw["trace_id"], "context": whole.trace["context"], "lineage": {"mode": "recursive"}}


def _cut(value, parts):
    """One dotted path of a JSON value, by hand: a dict keeps the named key, a list passes the path on."""
    if not parts or not isinstance(value, (dict, list)):
        return value
    if isinstance(value, list):
        return [_cut(item, parts) for item in value]
    return {parts[0]: _cut(value[parts[0]], parts[1:])} if parts[0] in value else {}


async def test_every_field_alone_is_the_whole_reads(store, open_store):
    """Each `Trace` field, and each part of the protocol a report and a validation hold, projected alone."""
    ids = await _forest(store)
    from cyber_agent.trace.protocol_records import TaskReport

    await store.update_trace(ids["grandchild"], protocol=ProtocolState(report=TaskReport(
        outcome="completed", summary="done", outputs=["12 rows"])))
    paths = [*Trace.model_fields, "protocol.report.claims", "protocol.report.outputs", "protocol.validations.claims",
             "protocol.validations.created_at", "protocol.brief.completion_criteria", "lineage.mode"]
    for reader in (store, open_store()):
        whole = await reader.read_records()
        for path in paths:
            part = await reader.read_records(fields=[path], goals=False)
            expected = [{"trace_id": record.trace_id, **_cut(record.trace, path.split("."))} for record in whole]
            assert [r.trace for r in part] == expected, path
