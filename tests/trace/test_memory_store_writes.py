"""`cyber_agent/trace/memory_store.py:InMemoryTraceStore` keeps events as parts and builds each line on its first
read: what is read is what the line written at the time would hold (the conformance suite compares the stores)."""

from __future__ import annotations

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
