"""ProviderSettings: environment, precedence, what reaches the wire, and the run-config snapshot."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from pydantic import ValidationError

from cyber_agent.cli import main
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.errors import ConfigurationError
from cyber_agent.llm import ScriptedModel, resolve_llm
from cyber_agent.llm.settings import ENV_VARS, ProviderSettings
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore

OK = {"choices": [{"index": 0, "message": {"content": "done"}, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
USER = [{"role": "user", "content": "hi"}]


def test_every_field_but_inline_prices_has_an_environment_variable():
    assert set(ENV_VARS) == set(ProviderSettings.model_fields) - {"prices"}
    assert all(name.startswith("CYBER_AGENT_") for name in ENV_VARS.values())


def test_environment_fills_only_what_it_sets():
    env = {"CYBER_AGENT_TIMEOUT": "12.5", "CYBER_AGENT_RETRIES": "0", "CYBER_AGENT_STREAM": "off",
           "CYBER_AGENT_MAX_TOKENS": "256", "CYBER_AGENT_EXTRA_HEADERS": '{"X-Title": "probe"}'}
    settings = ProviderSettings.from_env(env)
    assert settings.model_fields_set == {"timeout", "retries", "stream", "max_tokens", "extra_headers"}
    assert (settings.timeout, settings.retries, settings.stream, settings.max_tokens) == (12.5, 0, False, 256)
    assert settings.extra_headers == {"X-Title": "probe"}
    assert ProviderSettings.from_env({"CYBER_AGENT_STREAM": "auto"}).stream is None


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("CYBER_AGENT_TIMEOUT", "soon", "number of seconds"),
    ("CYBER_AGENT_TIMEOUT", "0", "> 0"),
    ("CYBER_AGENT_RETRIES", "2.5", "whole number"),
    ("CYBER_AGENT_RETRIES", "99", "between 0 and 10"),
    ("CYBER_AGENT_STREAM", "maybe", "1/true, 0/false or auto"),
    ("CYBER_AGENT_EXTRA_HEADERS", "X-Title: a", "JSON object"),
    ("CYBER_AGENT_MAX_TOKENS", "-1", ">= 1"),
])
def test_a_bad_variable_is_named_with_its_value(variable: str, value: str, says: str):
    with pytest.raises(ConfigurationError, match=variable) as caught:
        ProviderSettings.from_env({variable: value})
    assert says in str(caught.value)


def test_explicit_beats_environment_beats_default_and_resolving_twice_changes_nothing():
    env = {"CYBER_AGENT_TIMEOUT": "30", "CYBER_AGENT_RETRIES": "5"}
    resolved = ProviderSettings(timeout=3).resolved(env)
    assert (resolved.timeout, resolved.retries, resolved.connect_timeout) == (3, 5, 10.0)
    assert resolved.model_fields_set == set(ProviderSettings.model_fields)
    assert resolved.resolved({"CYBER_AGENT_RETRIES": "1"}) == resolved


@pytest.mark.parametrize("bad", [{"timeout": -1}, {"connect_timeout": 0}, {"retries": -1}, {"backoff_cap": float("inf")},
                                 {"max_tokens": 0}, {"surprise": 1}, {"extra_headers": {"Bad Name": "x"}},
                                 {"extra_headers": {"X-Ok": "a\r\nInjected: 1"}}])
def test_out_of_range_settings_are_refused(bad: dict):
    with pytest.raises(ValidationError, match=next(iter(bad))):  # the message names the field
        ProviderSettings(**bad)


async def test_settings_reach_the_wire_timeouts_headers_and_output_cap():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=OK)

    settings = ProviderSettings(timeout=7, connect_timeout=2, max_tokens=99, extra_headers={"X-Title": "probe"})
    local = resolve_llm("openai:qwen2.5:7b", settings=settings, base_url="http://127.0.0.1:9/v1",
                        transport=httpx.MockTransport(handler), env={})
    await local.llm_call(USER, local.model)
    official = resolve_llm("openai:o3", settings=settings, api_key="k", transport=httpx.MockTransport(handler), env={})
    await official.llm_call(USER, official.model)
    claude = resolve_llm("anthropic:claude-sonnet-4-5", settings=settings, api_key="k",
                         transport=httpx.MockTransport(lambda r: (seen.append(r), httpx.Response(200, json={
                             "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                             "usage": {"input_tokens": 1, "output_tokens": 1}}))[1]), env={})
    await claude.llm_call(USER, claude.model)
    bodies = [json.loads(r.content) for r in seen]
    assert bodies[0]["max_tokens"] == 99 and "max_completion_tokens" not in bodies[0]
    assert bodies[1]["max_completion_tokens"] == 99 and "max_tokens" not in bodies[1]  # api.openai.com's name
    assert bodies[2]["max_tokens"] == 99
    for request in seen:
        assert request.headers["x-title"] == "probe"
        assert request.extensions["timeout"] == {"connect": 2.0, "read": 7.0, "write": 7.0, "pool": 7.0}


async def test_retries_setting_bounds_the_attempts_and_stream_false_never_streams():
    calls: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content))
        return httpx.Response(503)

    async def no_wait(_: float) -> None:
        return None

    resolved = resolve_llm("openai:m", settings=ProviderSettings(retries=1, stream=False), base_url="http://127.0.0.1:9/v1",
                           transport=httpx.MockTransport(handler), sleep=no_wait, env={})
    with pytest.raises(Exception, match="after 2 attempt"):
        await resolved.llm_call(USER, "m", on_delta=lambda _: None)
    assert len(calls) == 2 and "stream" not in calls[0]


async def test_resolve_llm_without_settings_still_reads_the_variables():
    seen: list[httpx.Request] = []
    resolved = resolve_llm("openai:m", base_url="http://127.0.0.1:9/v1",
                           transport=httpx.MockTransport(lambda r: (seen.append(r), httpx.Response(200, json=OK))[1]),
                           env={"CYBER_AGENT_TIMEOUT": "4"})
    await resolved.llm_call(USER, "m")
    assert seen[0].extensions["timeout"]["read"] == 4.0


async def test_the_snapshot_records_every_setting_resolved_from_the_environment(monkeypatch):
    monkeypatch.setenv("CYBER_AGENT_RETRIES", "0")
    monkeypatch.setenv("CYBER_AGENT_DIALECT", "xml")
    monkeypatch.setenv("CYBER_AGENT_EXTRA_HEADERS", '{"X-Run": "a"}')
    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store, llm_call=ScriptedModel(["done"]))
    result = await runner.run_result(USER, RunConfig(model="m", provider=ProviderSettings(timeout=9)))
    snapshot = result.trace.run_config
    assert snapshot is not None
    assert snapshot.config["provider"] == {**ProviderSettings().model_dump(), "timeout": 9.0, "retries": 0,
                                           "extra_headers": {"X-Run": "a"}}
    assert snapshot.config["tool_dialect"] == "xml"
    # A continuation restores the snapshot: a changed environment does not change the recorded run.
    monkeypatch.setenv("CYBER_AGENT_RETRIES", "7")
    restored = RunConfig(trace_id=result.trace.trace_id).restored(snapshot).with_environment()
    assert restored.provider.retries == 0 and restored.tool_dialect == "xml"


def test_an_explicit_dialect_wins_over_the_variable_and_a_bad_one_is_named():
    assert RunConfig(tool_dialect="native").with_environment({"CYBER_AGENT_DIALECT": "xml"}).tool_dialect == "native"
    with pytest.raises(ConfigurationError, match="CYBER_AGENT_DIALECT.*'json'"):
        RunConfig().with_environment({"CYBER_AGENT_DIALECT": "json"})


def test_cli_flags_land_in_the_snapshot(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CYBER_AGENT_TIMEOUT", raising=False)
    monkeypatch.setenv("CYBER_AGENT_MAX_TOKENS", "64")
    store = tmp_path / "store"
    code = main(["--store", str(store), "run", "hi", "--model", "demo", "--timeout", "7", "--retries", "1",
                 "--no-stream", "--dialect", "native", "--max-tokens", "128"])
    assert code == 0
    trace_id = capsys.readouterr().out.split("trace id: ")[1].split()[0]
    trace = asyncio.run(FileSystemTraceStore(store).get_trace(trace_id))
    assert trace is not None and trace.run_config is not None
    config = trace.run_config.config
    provider = config["provider"]
    assert (provider["timeout"], provider["retries"], provider["stream"], provider["max_tokens"]) == (7.0, 1, False, 128)
    assert config["tool_dialect"] == "native"


def test_cli_refuses_a_bad_flag_value_naming_it(tmp_path, capsys):
    assert main(["--store", str(tmp_path), "run", "hi", "--timeout", "0"]) == 2
    assert "timeout must be a finite number of seconds > 0, got 0.0" in capsys.readouterr().err
