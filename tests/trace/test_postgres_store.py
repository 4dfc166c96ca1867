"""What only the PostgreSQL store promises (the shared behaviour is the conformance suite's):
URLs and their refusals, versioned migrations under an advisory lock, one copy of each message,
transactions that leave no half write, NOTIFY of events and stops, and `listen`."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from cyber_agent.errors import ConfigurationError, StoreError, StoreUnavailableError
from cyber_agent.trace import Goal, Message, Trace, open_store
from cyber_agent.trace.store_url import store_url_of
from cyber_agent.trace.budget_limits import ResourceUsage
from tests import pg_server

pytestmark = pytest.mark.skipif(not pg_server.available() and not pg_server.required(),
                                reason="PostgreSQL 15 binaries or psycopg not installed (CI installs them)")

if pg_server.available() or pg_server.required():
    import psycopg

    from cyber_agent.trace.postgres_schema import SCHEMA_VERSION, migrate
    from cyber_agent.trace.postgres_store import EVENTS_CHANNEL, STOPS_CHANNEL, PostgresTraceStore


@pytest.fixture
def url(tmp_path: Path) -> str:
    return pg_server.server().schema_url(pg_server.schema_for(str(tmp_path)))


async def _trace_with_messages(store: PostgresTraceStore, n: int = 3) -> str:
    trace = Trace.create(task="postgres")
    await store.create_trace(trace)
    for i in range(n):
        await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content=f"m{i}",
                                               prompt_tokens=i, cost=0.5 * i))
    return trace.trace_id


async def test_open_store_opens_a_postgresql_url_and_store_url_of_reopens_it(url: str) -> None:
    store = open_store(url)
    assert isinstance(store, PostgresTraceStore) and store.schema == url.rsplit("schema=", 1)[1]
    trace_id = await _trace_with_messages(store, 1)
    again = store_url_of(store)
    assert again == url
    assert (await open_store(again).require_trace(trace_id)).total_messages == 1
    other = open_store(pg_server.server().schema_url("t_other_schema"))
    assert await other.get_trace(trace_id) is None  # schemas keep stores apart


@pytest.mark.parametrize(("suffix", "names"), [
    ("&schema=Bad-Name", "'Bad-Name' is not a plain lower-case SQL name"),
    ("&pool_size=many", "pool_size is an int"),
    ("&pool_size=0", "pool_size must be >= 1"),
    ("&frobnicate=1", "frobnicate"),
])
def test_bad_options_are_refused_naming_the_value(suffix: str, names: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_store(pg_server.server().url + suffix)
    assert names in str(info.value)


def test_an_unreachable_server_is_refused_with_the_fix(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="is the server running.*The PostgreSQL store"):
        open_store(f"postgresql://nobody@/postgres?host={tmp_path}&port=1")
    assert time.monotonic() - started < 10


async def test_each_message_is_stored_once_and_its_event_still_carries_it(url: str) -> None:
    store = PostgresTraceStore(url)
    trace_id = await _trace_with_messages(store)
    with store.connection() as conn:
        rows = conn.execute("SELECT data, shared FROM events WHERE type = 'message_added'").fetchall()
        typed = conn.execute("SELECT role, prompt_tokens, cost FROM messages ORDER BY sequence").fetchall()
    assert len(rows) == 3 and all(shared == 1 and '"message":null' in data for data, shared in rows)
    assert typed == [("user", 0, 0.0), ("user", 1, 0.5), ("user", 2, 1.0)]
    events = [e for e in await store.get_events(trace_id) if e.type == "message_added"]
    assert [e.payload["message"]["content"] for e in events] == ["m0", "m1", "m2"]
    await store.update_message(f"{trace_id}-0001", description="later note")
    first = [e for e in await store.get_events(trace_id) if e.type == "message_added"][0]
    assert first.payload["message"]["description"] == "m0"  # the event keeps what it announced
    assert (await store.get_message(f"{trace_id}-0001")).description == "later note"  # type: ignore[union-attr]


async def test_an_older_schema_is_upgraded_and_a_newer_one_refused(url: str) -> None:
    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(pg_server.server().url, options=f"-c search_path={schema}") as conn:
        assert migrate(conn, schema, "test", target=1) == 0  # written before the typed message columns
        trace = Trace.create(task="old")
        message = Message.create(trace_id=trace.trace_id, role="assistant", content="hi", completion_tokens=7)
        message.assign(1)
        conn.execute("INSERT INTO traces VALUES (%s, NULL, %s, %s, 0, %s, '{\"goals\": []}')",
                     (trace.trace_id, trace.trace_id, trace.created_at.isoformat(),
                      trace.model_copy(update={"total_messages": 1, "head_sequence": 1}).model_dump_json()))
        conn.execute("INSERT INTO messages VALUES (%s, 1, %s)", (trace.trace_id, message.model_dump_json()))
        conn.commit()
    store = PostgresTraceStore(url)
    with store.connection() as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM schema_versions ORDER BY version")]
        assert conn.execute("SELECT role, completion_tokens FROM messages").fetchall() == [("assistant", 7)]
        conn.execute("INSERT INTO schema_versions VALUES (%s, 'future')", (SCHEMA_VERSION + 1,))
    assert versions == list(range(1, SCHEMA_VERSION + 1))
    assert [m.content for m in await store.get_trace_messages(trace.trace_id)] == ["hi"]
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}, newer.*upgrade cyber_agent"):
        PostgresTraceStore(url)


def test_workers_opening_a_new_schema_at_once_migrate_it_once(url: str) -> None:
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            PostgresTraceStore(url).close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with PostgresTraceStore(url).connection() as conn:
        assert conn.execute("SELECT count(*) FROM schema_versions").fetchone() == (SCHEMA_VERSION,)


async def test_a_failed_write_rolls_back_everything_it_touched(url: str) -> None:
    store = PostgresTraceStore(url)
    trace_id = await _trace_with_messages(store, 1)
    await store.replace_resource_usage(trace_id, ResourceUsage(llm_calls=1))
    before = len(await store.get_events(trace_id))

    def boom(current: ResourceUsage | None) -> ResourceUsage:
        raise RuntimeError("budget step failed")

    with pytest.raises(RuntimeError):
        await store.update_resource_usage(trace_id, boom)
    assert (await store.get_resource_usage(trace_id)).llm_calls == 1
    assert len(await store.get_events(trace_id)) == before
    await store.add_message(Message.create(trace_id=trace_id, role="user", content="after"))
    assert (await store.require_trace(trace_id)).total_messages == 2


async def test_a_second_instance_sees_and_continues_what_the_first_wrote(url: str) -> None:
    first = PostgresTraceStore(url)
    trace_id = await _trace_with_messages(first, 2)
    second = PostgresTraceStore(url)
    await second.add_message(Message.create(trace_id=trace_id, role="user", content="from second"))
    await first.add_message(Message.create(trace_id=trace_id, role="user", content="from first again"))
    assert (await first.require_trace(trace_id)).total_messages == 4
    ids = [e.event_id for e in await second.get_events(trace_id)]
    assert ids == list(range(1, len(ids) + 1))  # dense, no id used twice
    assert [m.sequence for m in await second.get_trace_messages(trace_id)] == [1, 2, 3, 4]


async def test_events_and_stops_are_notified_when_they_commit(url: str) -> None:
    store = PostgresTraceStore(url)
    trace = Trace.create(task="notify")
    await store.create_trace(trace)
    with psycopg.connect(pg_server.server().url, autocommit=True) as listener:
        listener.execute(f"LISTEN {EVENTS_CHANNEL}")
        listener.execute(f"LISTEN {STOPS_CHANNEL}")
        await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content="hello"))
        await store.request_stop(trace.trace_id, "enough")

        def boom(current: dict | None) -> dict:
            raise RuntimeError("rolled back")

        with pytest.raises(RuntimeError):
            await store.update_resource_usage(trace.trace_id, boom)
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=1.0)]
    assert got == [(EVENTS_CHANNEL, f"{trace.trace_id}:1"), (STOPS_CHANNEL, trace.trace_id)]


async def test_listen_replays_then_streams_new_events_in_order(url: str) -> None:
    store = PostgresTraceStore(url)
    trace_id = await _trace_with_messages(store, 2)
    seen: list[int] = []

    async def watch() -> None:
        async for event in store.listen(trace_id, since_event_id=1, poll_seconds=30):
            seen.append(event.event_id)
            if len(seen) == 3:
                return

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.3)
    assert seen == [2]  # the backlog after id 1
    started = time.monotonic()
    writer = PostgresTraceStore(url)
    await asyncio.to_thread(asyncio.run, writer.add_message(Message.create(trace_id=trace_id, role="user", content="x")))
    await asyncio.to_thread(asyncio.run, writer.add_goal(trace_id, Goal(id="9", description="later")))
    await asyncio.wait_for(watcher, 5)
    assert seen == [2, 3, 4]
    assert time.monotonic() - started < 2  # pushed by NOTIFY, not the 30 s poll
