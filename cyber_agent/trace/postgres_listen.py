"""Live events from a PostgreSQL store: LISTEN on a dedicated connection, read by event id.

`listen_events` yields a trace's events in id order, each once, for as long as the caller
iterates: the backlog after `since_event_id` first, then every new event as its transaction
commits (the NOTIFY `postgres_store.py` sends in it wakes the reader; it then reads every event
after the last one it yielded, so a notification that is lost or coalesced loses nothing). After a
dropped connection it reconnects with a bounded backoff and replays from the last id it yielded;
between notifications it also reads every `poll_seconds`, the fallback should a NOTIFY go missing.

All of it is async on its own connection, so it never blocks the event loop (the server's
WebSocket uses it) and never takes one of the store's pooled connections.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import psycopg

from cyber_agent.trace.events import TraceEvent
from cyber_agent.trace.sql_store import EVENTS_SQL, events_of
from cyber_agent.trace.trace_id import validate_trace_id

if TYPE_CHECKING:
    from cyber_agent.trace.postgres_store import PostgresTraceStore

__all__ = ["listen_events"]

_EVENTS_SQL = EVENTS_SQL.replace("?", "%s")


async def listen_events(store: PostgresTraceStore, trace_id: str, since_event_id: int = 0, *,
                        poll_seconds: float = 1.0, max_backoff: float = 2.0) -> AsyncIterator[TraceEvent]:
    """Yield the trace's events after `since_event_id`, then each new one as it commits, until the caller stops."""
    from cyber_agent.trace.postgres_store import EVENTS_CHANNEL

    validate_trace_id(trace_id)
    if poll_seconds <= 0:
        raise ValueError(f"poll_seconds must be > 0, got {poll_seconds!r}")
    last, delay = max(since_event_id, 0), 0.05
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(store.conninfo, **store.connect_kwargs)
        except psycopg.OperationalError:
            await asyncio.sleep(delay)  # the server is away: try again (the caller decides how long to wait)
            delay = min(delay * 2, max_backoff)
            continue
        try:
            async with conn:
                await conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                delay = 0.05
                while True:
                    # Read after LISTEN is active: whatever committed before is in this read, later ones notify.
                    cursor = await conn.execute(_EVENTS_SQL, (trace_id, last))
                    rows: list[Any] = await cursor.fetchall()
                    for event in events_of(rows, lambda event_id: store._where(f"{trace_id}/{event_id}", "events")):
                        yield event
                        last = event.event_id
                    async for notice in conn.notifies(timeout=poll_seconds):  # ends after poll_seconds of quiet
                        head, _, event_id = notice.payload.rpartition(":")
                        if head == trace_id and event_id.isdigit() and int(event_id) > last:
                            break
        except psycopg.OperationalError:
            await asyncio.sleep(delay)  # dropped: reconnect, then replay from `last`
            delay = min(delay * 2, max_backoff)
