"""The exchange records of `cyber_agent/llm/cassette.py`: deltas that rebuild every request exactly."""

from __future__ import annotations

from typing import Any

from cyber_agent.llm import ScriptedModel
from cyber_agent.llm.cassette import ExchangeRecorder, expand_records, request_key
from cyber_agent.llm.replay import canonical_request

ROOT = "2f8d3a1c-4b6e-4f9a-8c2d-1e5b7a9f3c4d"
OTHER = "9a7b5c3d-1e2f-4a6b-8c0d-2e4f6a8b0c1d"
TOOLS = [{"type": "function", "function": {"name": "read", "description": "Read.", "parameters": {"type": "object"}}}]


async def test_records_store_deltas_and_rebuild_every_request() -> None:
    stored: list[dict[str, Any]] = []

    async def sink(trace_id: str, record: dict[str, Any]) -> int:
        stored.append(record)
        return len(stored) - 1

    recorder = ExchangeRecorder(ScriptedModel(["a", "b", "c", "d", "e", "f"]), sink, ROOT)
    system = {"role": "system", "content": "You are the main agent."}
    asks = [
        ([system, {"role": "user", "content": "task"}], TOOLS),
        ([system, {"role": "user", "content": "task"}, {"role": "assistant", "content": "a"}], TOOLS),
        ([{"role": "system", "content": "Summarize."}, {"role": "user", "content": "long text"}], None),  # a helper
        ([system, {"role": "user", "content": "task (compacted)"}, {"role": "user", "content": "go on"}], TOOLS),
        ([system, {"role": "user", "content": "task (compacted)"}, {"role": "user", "content": "go on"},
          {"role": "assistant", "content": "d"}], []),
        ([system, {"role": "user", "content": "task (compacted)"}, {"role": "user", "content": "go on"},
          {"role": "assistant", "content": "d"}, {"role": "assistant", "content": "e"}], TOOLS),
    ]
    for messages, tools in asks:
        await recorder(messages, "m", tools)
    assert [r["base"] for r in stored] == [None, 0, None, 1, 3, 4]
    assert stored[1]["messages"] == [asks[1][0][-1]] and stored[1]["tools"] is None  # only what was added
    assert stored[3]["keep"] == 1 and stored[3]["messages"] == asks[3][0][1:]  # the rewritten tail only
    assert stored[4]["tools"] == [] and stored[5]["tools"] == {"ref": 0}  # tools seen before: named, not stored
    rebuilt = expand_records(ROOT, stored)
    assert [e.request for e in rebuilt] == [canonical_request(m, "m", t) for m, t in asks]
    assert [e.response.content for e in rebuilt] == ["a", "b", "c", "d", "e", "f"]
    kept = sum(len(str(r["messages"])) + len(str(r["tools"])) for r in stored)
    whole = sum(len(str(e.request["messages"])) + len(str(e.request["tools"])) for e in rebuilt)
    assert kept < whole / 2


def test_the_request_key_ignores_the_runs_ids_and_nothing_else() -> None:
    one = canonical_request([{"role": "user", "content": f"child {ROOT}@explore-20260101000000-002"}], "m", None)
    two = canonical_request([{"role": "user", "content": f"child {OTHER}@explore-20270202000000-002"}], "m", None)
    three = canonical_request([{"role": "user", "content": f"child {OTHER}@explore-20270202000000-003"}], "m", None)
    assert request_key(one) == request_key(two) != request_key(three)
    assert request_key(one) != request_key({**one, "model": "n"})
