"""A damaged entry in the server's store: listings report it, healthy traces answer, recovery goes on.

docs/trace.md, "Damaged entries"; docs/reliability.md. Before: one corrupt meta.json made every
listing, every GET of a healthy trace (its sub-traces are a listing) and every watch fail, and
approval recovery stopped at start-up.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid

import websockets

from cyber_agent.core.approvals import ApprovalBatch, PendingCall, current_batch, save_batch
from cyber_agent.trace import Trace
from live_server import WAIT_TIMEOUT, ServerProcess, start_run, trace_of, wait_idle

CORRUPT = "00000001-0000-4000-8000-00000000dead"
LINKED = "00000002-0000-4000-8000-00000000dead"


async def _executing_batch(server: ServerProcess) -> str:
    """A trace whose approved batch was executing when the server died (written while it is down)."""
    store = server.store()
    trace_id = await store.create_trace(Trace.create(task="deploy"))
    await store.update_trace(trace_id, status="running")
    await save_batch(store, ApprovalBatch(batch_id=uuid.uuid4().hex[:12], trace_id=trace_id,
                                          assistant_message_id=f"{trace_id}-0001", status="executing",
                                          calls=[PendingCall(call_id="c1", name="deploy")]))
    return trace_id


async def test_a_damaged_entry_is_reported_and_never_fatal_to_healthy_traces(fresh_server: ServerProcess):
    server = fresh_server.start()
    with server.client() as http:
        healthy = start_run(http, "echo")
        wait_idle(http, healthy)
    server.kill()
    executing = await _executing_batch(server)
    (server.store_path / CORRUPT).mkdir()
    (server.store_path / CORRUPT / "meta.json").write_text("{{{")
    os.symlink(server.root / "work", server.store_path / LINKED)
    server.start()
    with server.client() as http:
        listing = http.get("/api/traces", params={"limit": 1000})
        assert listing.status_code == 200, listing.text
        body = listing.json()
        assert {t["trace_id"] for t in body["traces"]} == {healthy, executing}
        assert {(e["name"], e["kind"]) for e in body["errors"]} == {(CORRUPT, "corrupt"), (LINKED, "symlink")}
        assert trace_of(http, healthy)["status"] == "completed"
        assert http.get(f"/api/traces/{healthy}/messages").status_code == 200
        damaged = http.get(f"/api/traces/{CORRUPT}")
        assert damaged.status_code == 500, damaged.text
        assert damaged.json()["error"] == "corrupt_record"
        assert damaged.json()["path"] == str(server.store_path / CORRUPT / "meta.json")
        # Recovery went on past the damaged entries: the executing batch failed closed.
        trace = trace_of(http, executing)
        assert trace["status"] == "failed" and "unknown" in trace["error_message"]
    assert (await current_batch(server.store(), executing)).status == "execution_unknown"
    assert "approval recovery stopped early" not in server.log()
    assert CORRUPT in server.log()  # reported at start-up
    async with websockets.connect(f"{server.ws_url}/api/traces/{healthy}/watch") as ws:
        hello = json.loads(await asyncio.wait_for(ws.recv(), WAIT_TIMEOUT))
        assert hello["type"] == "connected" and hello["trace_id"] == healthy
        first = json.loads(await asyncio.wait_for(ws.recv(), WAIT_TIMEOUT))
        assert first["event_id"] == 1
