"""One text rule for every store (issue 29): NUL (U+0000) and lone surrogates are refused at the
write with an error naming what held them; nothing is written; a literal backslash-u0000 is text."""

from __future__ import annotations

from pathlib import Path

import pytest

from cyber_agent.errors import InvalidUpdateError
from cyber_agent.trace import Message, Trace, open_store
from tests import pg_server

KINDS = ["file", "sqlite", "memory", "postgres"]


def _url(kind: str, tmp_path: Path) -> str:
    if kind == "postgres":
        if not pg_server.available() and not pg_server.required():
            pytest.skip("PostgreSQL 15 binaries or psycopg not installed (CI installs them)")
        return pg_server.server().schema_url(pg_server.schema_for(str(tmp_path)))
    return {"file": f"file:{tmp_path / 'fs'}", "sqlite": f"sqlite:///{tmp_path / 'runs.db'}", "memory": "memory:"}[kind]


@pytest.mark.parametrize("kind", KINDS)
async def test_nul_and_lone_surrogates_are_refused_alike_by_every_store(kind: str, tmp_path: Path) -> None:
    store = open_store(_url(kind, tmp_path))
    trace = Trace.create(task="text rule")
    await store.create_trace(trace)
    with pytest.raises(InvalidUpdateError, match=r"contains a NUL character \(U\+0000\).*remove it"):
        await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content="a\x00b"))
    with pytest.raises(InvalidUpdateError, match="lone surrogates"):
        await store.add_message(Message.create(trace_id=trace.trace_id, role="user", content="a\ud800b"))
    with pytest.raises(InvalidUpdateError, match="NUL"):
        await store.create_trace(Trace.create(task="a task with \x00 inside"))
    with pytest.raises(InvalidUpdateError, match="NUL"):
        await store.update_trace(trace.trace_id, result_summary="done\x00")
    literal = Message.create(trace_id=trace.trace_id, role="user", content="a literal \\u0000 and \\\\u0000 is text")
    await store.add_message(literal)
    (kept,) = await store.get_trace_messages(trace.trace_id)
    assert kept.content == literal.content and kept.sequence == 1  # the refused writes left nothing behind
    assert (await store.require_trace(trace.trace_id)).total_messages == 1
