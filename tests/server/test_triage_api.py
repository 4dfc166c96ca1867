"""POST /api/triage (SPEC H11): the decision comes back, and a started run's trace id with it."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi import FastAPI

from cyber_agent.core.runner import AgentRunner
from cyber_agent.core.triage import Triage
from cyber_agent.llm.fakes import ScriptedModel
from cyber_agent.server.app import create_app
from cyber_agent.server.runs import RunManager
from cyber_agent.server.state import State
from cyber_agent.server.triage_api import triage_router
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore

EVENT = {"source": "github", "kind": "webhook", "name": "issue_opened", "payload": {"issue": 12, "title": "crash"}}


def decision(action: str, **fields: str) -> str:
    return json.dumps({"action": action, "reason": "test", **fields})


def client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


@pytest.fixture(autouse=True)
def legacy_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_MODE", raising=False)


async def test_drop_answers_the_decision_and_starts_nothing():
    store = InMemoryTraceStore()
    with ScriptedModel([decision("drop")]) as cheap, ScriptedModel() as agent:
        triage, runner = Triage(cheap, "tiny"), AgentRunner(trace_store=store, llm_call=agent, tool_registry=ToolRegistry())
        app = FastAPI()
        app.include_router(triage_router(lambda: triage, lambda: runner))
        async with client(app) as http:
            first = await http.post("/api/triage", json=EVENT)
            again = await http.post("/api/triage", json=EVENT)
    assert first.status_code == 200
    body = first.json()
    assert body["decision"]["action"] == "drop" and body["decision"]["cached"] is False
    assert body["trace_id"] is None and body["status"] is None
    assert again.json()["decision"]["cached"] is True
    assert await store.list_traces() == []


async def test_full_run_is_awaited_without_a_launcher():
    store = InMemoryTraceStore()
    with ScriptedModel([decision("full_run", task="Triage issue 12.")]) as cheap, ScriptedModel(["Labelled bug."]) as agent:
        triage, runner = Triage(cheap, "tiny"), AgentRunner(trace_store=store, llm_call=agent, tool_registry=ToolRegistry())
        app = FastAPI()
        app.include_router(triage_router(lambda: triage, lambda: runner))
        async with client(app) as http:
            response = await http.post("/api/triage", json=EVENT)
    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "completed" and body["answer"] == "Labelled bug."
    trace = await store.get_trace(body["trace_id"])
    assert trace is not None and trace.task == "Triage issue 12." and trace.context["trigger"]["source"] == "github"


async def test_with_a_launcher_the_run_starts_in_the_background():
    store = InMemoryTraceStore()
    with ScriptedModel([decision("react", task="Thank the reporter.")]) as cheap, ScriptedModel(["Thanked."]) as agent:
        triage, runner = Triage(cheap, "tiny"), AgentRunner(trace_store=store, llm_call=agent, tool_registry=ToolRegistry())
        async with RunManager(runner, store) as runs:
            app = FastAPI()
            app.include_router(triage_router(lambda: triage, lambda: runner, lambda: runs.launch))
            async with client(app) as http:
                response = await http.post("/api/triage", json=EVENT)
            body = response.json()
            assert body["status"] == "running" and body["answer"] is None
            await runs.wait_idle(body["trace_id"])
    trace = await store.get_trace(body["trace_id"])
    assert trace is not None and trace.status == "completed" and trace.result_summary == "Thanked."
    assert trace.agent_type == "trigger_reactor"


async def test_an_invalid_envelope_is_refused_before_any_model_call():
    with ScriptedModel() as cheap:
        triage = Triage(cheap, "tiny")
        app = FastAPI()
        app.include_router(triage_router(lambda: triage, lambda: None))
        async with client(app) as http:
            response = await http.post("/api/triage", json={**EVENT, "kind": "email"})
    assert response.status_code == 422
    assert cheap.requests == []


def get_runner(state: State) -> AgentRunner:
    return state.runner


def get_launch(state: State):  # noqa: ANN201 - RunManager.launch
    return state.runs.launch


async def test_wired_into_the_server_app_as_documented():
    store = InMemoryTraceStore()
    with ScriptedModel([decision("full_run", task="Reply to issue 12.")]) as cheap, ScriptedModel(["Replied."]) as agent:
        triage = Triage(cheap, "tiny")
        app = create_app(store=store, runner=AgentRunner(trace_store=store, llm_call=agent, tool_registry=ToolRegistry()))
        app.include_router(triage_router(lambda: triage, get_runner, get_launch))
        async with app.router.lifespan_context(app), client(app) as http:
            response = await http.post("/api/triage", json=EVENT)
            body = response.json()
            assert response.status_code == 200 and body["status"] == "running"
            await app.state.cyber_agent.runs.wait_idle(body["trace_id"])
            trace = (await http.get(f"/api/traces/{body['trace_id']}")).json()
    assert trace["trace"]["status"] == "completed" and trace["trace"]["agent_type"] == "orchestrator"
