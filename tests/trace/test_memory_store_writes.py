"""`cyber_agent/trace/memory_store.py:InMemoryTraceStore` keeps events as parts and builds each line on its first
read: what is read is what the line written at the time would hold (the conformance suite compares the stores)."""

from __future__ import annotations

import pytest

from cyber_agent.errors import InvalidUpdateError
from cyber_agent.trace import InMemoryTraceStore, Message, Trace
from cyber_agent.trace.clock import utc_now


async def test_an_event_read_later_keeps_the_time_it_was_written() -> None:
    store = InMemoryTraceStore()
    await store.create_trace(Trace(trace_id="t-lazy", task="x"))
    await store.add_message(Message(trace_id="t-lazy", role="user", content="hi"))
    await store.append_event("t-lazy", "progress", {"stage": "working"})
    written_by = utc_now()
    first = await store.get_events("t-lazy")
    assert [e.type for e in first] == ["message_added", "progress"]
    assert all(e.created_at <= written_by for e in first)  # stamped at the write, not at this read
    assert first[0].payload["message"]["content"] == "hi"
    again = await store.get_events("t-lazy")
    assert [e.model_dump() for e in again] == [e.model_dump() for e in first]
    assert [e.event_id for e in await store.get_events("t-lazy", since_event_id=1)] == [2]


async def test_bulk_reads_and_event_reads_see_the_same_lines() -> None:
    store = InMemoryTraceStore()
    await store.create_trace(Trace(trace_id="t-bulk", task="x"))
    for text in ("a", "b"):
        await store.add_message(Message(trace_id="t-bulk", role="user", content=text))
    (record,) = await store.read_records(["t-bulk"])  # builds the lines
    events = await store.get_events("t-bulk")
    assert [e["payload"]["message"]["content"] for e in record.events] == ["a", "b"]
    assert [e.model_dump(mode="json") for e in events] == record.events
    await store.add_message(Message(trace_id="t-bulk", role="user", content="c"))  # parts again after built lines
    assert [e.payload["message"]["content"] for e in await store.get_events("t-bulk")] == ["a", "b", "c"]


async def test_objects_changed_after_a_write_change_nothing_stored() -> None:
    """The store keeps its own copy of every record (the JSON text): a caller's later changes never reach it."""
    store = InMemoryTraceStore()
    trace = Trace(trace_id="t-iso", task="x", context={"k": ["v"]})
    await store.create_trace(trace)
    trace.context["k"].append("changed")
    message = Message(trace_id="t-iso", role="user", content="hi", metadata={"note": {"n": 1}})
    await store.add_message(message)
    message.content = "changed"
    message.metadata.model_extra["note"]["n"] = 2  # type: ignore[index]
    payload = {"stage": "working", "detail": {"n": 1}}
    await store.append_event("t-iso", "progress", payload)
    payload["detail"]["n"] = 2  # type: ignore[index]
    record = {"v": 1, "messages": [{"role": "user", "content": "hi"}], "response": {"content": "ok"}}
    await store.append_exchange("t-iso", record)
    record["messages"][0]["content"] = "changed"  # type: ignore[index]
    stored = await store.get_trace_messages("t-iso")
    assert stored[0].content == "hi" and stored[0].metadata.model_extra == {"note": {"n": 1}}
    assert (await store.get_trace("t-iso")).context == {"k": ["v"]}  # type: ignore[union-attr]
    events = await store.get_events("t-iso")
    assert events[0].payload["message"]["content"] == "hi" and events[1].payload["detail"] == {"n": 1}
    assert (await store.get_exchanges("t-iso"))[0]["messages"] == [{"role": "user", "content": "hi"}]
    # And what was read is a copy too.
    stored[0].content = "read and changed"
    assert (await store.get_trace_messages("t-iso"))[0].content == "hi"


async def test_a_value_that_cannot_be_stored_is_refused_at_the_write() -> None:
    store = InMemoryTraceStore()
    await store.create_trace(Trace(trace_id="t-bad", task="x"))
    with pytest.raises(InvalidUpdateError, match="not JSON-serializable"):
        await store.add_message(Message(trace_id="t-bad", role="user", content="hi", metadata={"when": object()}))
    with pytest.raises(InvalidUpdateError, match="NUL"):
        await store.append_exchange("t-bad", {"v": 1, "messages": [{"role": "user", "content": "a\x00b"}]})
    assert await store.get_trace_messages("t-bad") == [] and await store.get_exchanges("t-bad") == []


async def test_the_kept_records_follow_every_add_without_a_checkpoint() -> None:
    """Private state on purpose: the kept trace and tree are read only when the live state is gone, so
    dropping it is the one way to see them (they are the live objects, also for an imported trace)."""
    source = InMemoryTraceStore()
    await source.create_trace(Trace(trace_id="t-kept", task="x"))
    await source.add_message(Message(trace_id="t-kept", role="user", content="a", prompt_tokens=3))
    store = InMemoryTraceStore()
    await store.import_records(await source.read_records(["t-kept"]))  # kept cold: loaded as copies on the next write
    for text in ("b", "c"):
        await store.add_message(Message(trace_id="t-kept", role="user", content=text, prompt_tokens=3))
    live = await store.get_trace("t-kept")
    store._hot.clear()
    cold = await store.get_trace("t-kept")
    assert live is not None and cold is not None
    assert (cold.total_messages, cold.total_prompt_tokens, cold.head_sequence) == (3, 9, 3)
    assert cold.model_dump() == live.model_dump()
