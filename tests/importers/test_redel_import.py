"""ReDel runs: the real gpt-4o sample (tests/data/redel) and a fixture with events, into every store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from redel_fixture import ALPHA, BETA, DEPTHS, GAMMA, HISTORIES, PARENTS, ROOT, tokens_for, write_run

from tests import pg_server

from cyber_agent.errors import ImportFormatError
from cyber_agent.importers import import_runs
from cyber_agent.importers._plan import import_trace_id
from cyber_agent.trace import open_store
from cyber_agent.trace.records import parse_time

REAL = Path(__file__).resolve().parents[1] / "data" / "redel"
RUNS = sorted(p for p in REAL.iterdir() if (p / "state.json").is_file())


def _raw(folder: Path) -> dict:
    return json.loads((folder / "state.json").read_text(encoding="utf-8"))


def _id(session: str, node: str) -> str:
    return import_trace_id("redel", f"{session}/{node}")


async def _tree(store, root_id: str) -> dict:
    records = await store.read_records([root_id])
    return {r.trace_id: r for r in records}


def test_the_sample_is_the_shared_real_data():
    assert len(RUNS) == 4, "tests/data/redel holds the four real runs named in its README"
    assert (REAL / "LICENSE").is_file() and "Commons Clause" in (REAL / "LICENSE").read_text(encoding="utf-8")


async def test_every_real_tree_imports_with_the_files_nodes_parents_depths_and_messages():
    store = open_store("memory:")
    summary = await import_runs([REAL], store, source="redel")
    assert sorted(i.path.name for i in summary.imported) == [p.name for p in RUNS]  # 100 % of the sample
    assert {s.path.name for s in summary.skipped} == {"LICENSE", "README.md"}
    for folder in RUNS:
        raw = _raw(folder)
        session = raw["id"]
        [root] = [n for n in raw["state"] if n["parent"] is None]
        tree = await _tree(store, _id(session, root["id"]))
        assert len(tree) == len(raw["state"])
        for node in raw["state"]:
            record = tree[_id(session, node["id"])]
            meta = record.trace
            assert meta["parent_trace_id"] == (_id(session, node["parent"]) if node["parent"] else None)
            assert meta["lineage"]["depth"] == node["depth"]
            assert len(record.messages) == len(node["chat_history"])
            assert [m["role"] for m in record.messages] == [
                {"function": "tool"}.get(m["role"], m["role"]) for m in node["chat_history"]]
            assert meta["provenance"]["ids"]["node_id"] == node["id"]
            assert meta["total_tokens"] == 0 and set(meta["provenance"]["missing"]) >= {"usage", "timestamps", "model"}
            assert meta["name"] == node["name"]
            calls = [c for m in node["chat_history"] for c in (m.get("tool_calls") or ())]
            assert sum(len(m["content"]["tool_calls"]) for m in record.messages if isinstance(m["content"], dict)) == len(calls)


async def test_delegate_calls_link_to_the_children_they_started():
    folder = next(p for p in RUNS if len(_raw(p)["state"]) == 9)
    raw = _raw(folder)
    store = open_store("memory:")
    await import_runs([folder], store, source="redel")
    nodes = {n["id"]: n for n in raw["state"]}
    for node in raw["state"]:
        trace_id = _id(raw["id"], node["id"])
        events = await store.get_events(trace_id)
        started = [e.payload["trace_id"] for e in events if e.type == "sub_trace_started"]
        assert started == [_id(raw["id"], c) for c in node["children"]]  # every child, in the order they began
        calls = [e.payload["tool_call_id"] for e in events if e.type == "progress"]
        for call_id, child_id in zip(calls, node["children"], strict=True):
            call = next(c for m in node["chat_history"] for c in (m.get("tool_calls") or ()) if c["id"] == call_id)
            instructions = json.loads(call["function"]["arguments"])["instructions"]
            assert nodes[child_id]["chat_history"][0]["content"] == instructions
            child = await store.get_trace(_id(raw["id"], child_id))
            assert child.provenance.started_by_call == call_id


STORES = ["memory:", "file", "sqlite"] + (["postgres"] if pg_server.available() or pg_server.required() else [])


def _target(kind: str, tmp_path: Path) -> str:
    if kind == "postgres":  # the session's throw-away server, one schema per test (as tests/trace does)
        return pg_server.server().schema_url(pg_server.schema_for(str(tmp_path)))
    return {"memory:": "memory:", "file": f"file:{tmp_path / 'store'}", "sqlite": f"sqlite:///{tmp_path / 'r.db'}"}[kind]


@pytest.mark.parametrize("url", STORES)
async def test_a_run_with_events_has_their_tokens_and_times_in_any_store(tmp_path, url):
    folder = write_run(tmp_path / "run")
    target = _target(url, tmp_path)
    store = open_store(target)
    summary = await import_runs([folder], store)  # the format is detected
    assert summary.imported[0].source == "redel" and summary.traces == 4
    reopened = open_store(target) if url != "memory:" else store
    session = json.loads((folder / "state.json").read_text())["id"]
    tree = await _tree(reopened, _id(session, ROOT))
    for node, history in HISTORIES.items():
        record = tree[_id(session, node)]
        expected = [tokens_for(node, i) for i, m in enumerate(history) if m["role"] == "assistant"]
        assert record.trace["total_prompt_tokens"] == sum(p for p, _ in expected)
        assert record.trace["total_completion_tokens"] == sum(c for _, c in expected)
        assert record.trace["lineage"]["depth"] == DEPTHS[node]
        assert record.trace["parent_trace_id"] == (_id(session, PARENTS[node]) if PARENTS[node] else None)
        assert record.trace["provenance"]["missing"] == ["cost", "model"]
        times = [parse_time(m["created_at"]) for m in record.messages]
        assert times == sorted(times)
    # the refused call (c0) started nothing; c1, c2 and beta's b1 did
    links = {e.payload["tool_call_id"]: e for t in (ROOT, BETA)
             for e in await reopened.get_events(_id(session, t)) if e.type == "progress"}
    assert sorted(links) == ["b1", "c1", "c2"]
    errors = [m for m in tree[_id(session, BETA)].messages if m["metadata"].get("is_error")]
    assert [m["tool_name"] for m in errors] == ["search"]
    assert tree[_id(session, GAMMA)].trace["lineage"]["root_trace_id"] == _id(session, ROOT)
    assert tree[_id(session, ALPHA)].trace["result_summary"] == "115.9 m"


async def test_without_events_times_and_tokens_are_flagged_missing_not_invented(tmp_path):
    folder = write_run(tmp_path / "run", events=False)
    store = open_store("memory:")
    [root_id] = (await import_runs([folder], store)).roots
    root = await store.get_trace(root_id)
    assert root.total_tokens == 0
    assert root.provenance.missing == ["usage", "cost", "timestamps", "model"]


async def test_reimport_skips_the_trees_already_there(tmp_path):
    folder = write_run(tmp_path / "run")
    store = open_store("memory:")
    await import_runs([folder], store)
    again = await import_runs([folder], store)
    assert not again.imported and "already imported" in again.skipped[0].reason


async def test_a_named_file_that_is_not_redel_is_an_error_naming_it_and_the_misfit(tmp_path):
    bad = tmp_path / "state.json"
    bad.write_text(json.dumps({"id": "x", "state": [{"id": "n", "depth": 0, "parent": None}]}), encoding="utf-8")
    with pytest.raises(ImportFormatError) as caught:
        await import_runs([bad], open_store("memory:"), source="redel")
    assert str(bad) in str(caught.value) and "state.0.chat_history" in str(caught.value)
    orphan = tmp_path / "o" / "state.json"
    orphan.parent.mkdir()
    orphan.write_text(json.dumps({"id": "x", "state": [{"id": "n", "depth": 1, "parent": "gone", "chat_history": []}]}))
    with pytest.raises(ImportFormatError, match="names parent 'gone'"):
        await import_runs([orphan], open_store("memory:"), source="redel")


async def test_in_a_folder_a_bad_run_is_skipped_with_its_reason_and_the_rest_imports(tmp_path):
    write_run(tmp_path / "good")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "state.json").write_text("{not json", encoding="utf-8")
    summary = await import_runs([tmp_path], open_store("memory:"), source="redel")
    assert [i.path.name for i in summary.imported] == ["good"]
    [skipped] = summary.skipped
    assert skipped.path.name == "bad" and "not JSON" in skipped.reason


async def test_a_call_whose_instructions_were_reworded_links_by_the_answer_it_returned(tmp_path):
    folder = write_run(tmp_path / "run", events=False)
    state = json.loads((folder / "state.json").read_text())
    gamma = next(n for n in state["state"] if n["id"] == GAMMA)
    gamma["chat_history"][0]["content"] = "Centurion (a eucalyptus): how tall?"  # no longer the call's text
    (folder / "state.json").write_text(json.dumps(state))
    store = open_store("memory:")
    await import_runs([folder], store)
    session = state["id"]
    [started] = [e for e in await store.get_events(_id(session, BETA)) if e.type == "sub_trace_started"]
    assert started.payload["trace_id"] == _id(session, GAMMA)
    assert (await store.get_trace(_id(session, GAMMA))).provenance.started_by_call == "b1"
