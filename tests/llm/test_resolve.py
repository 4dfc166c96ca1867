"""resolve_llm: every spec form, and configuration errors raised before any call."""

from __future__ import annotations

import sys
import types

import httpx
import pytest

from cyber_agent.errors import ConfigurationError
from cyber_agent.llm import (
    AnthropicModel,
    DemoModel,
    OpenAICompatModel,
    RecordingLLM,
    ReplayLLM,
    ResolvedModel,
    ScriptedModel,
    resolve_llm,
)


def test_unknown_prefix_lists_the_valid_ones():
    with pytest.raises(ConfigurationError) as info:
        resolve_llm("gemini:pro")
    message = str(info.value)
    assert info.value.setting == "model" and "'gemini'" in message
    for form in ("'openai:MODEL'", "'anthropic:MODEL'", "'replay:PATH'", "'demo[:latency=SECONDS]'"):
        assert form in message


@pytest.mark.parametrize(("spec", "env_var"), [("openai:gpt-4o", "OPENAI_API_KEY"),
                                              ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY")])
def test_missing_api_key_names_the_env_var(spec, env_var):
    with pytest.raises(ConfigurationError) as info:
        resolve_llm(spec, env={})
    assert info.value.setting == env_var and env_var in str(info.value)


@pytest.mark.parametrize("spec", ["openai:", "anthropic:  ", "openai"])
def test_empty_model_name_is_refused(spec):
    with pytest.raises(ConfigurationError, match="names no model"):
        resolve_llm(spec, env={"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"})


def test_unknown_option_is_named():
    with pytest.raises(ConfigurationError) as info:
        resolve_llm("openai:gpt-4o", api_kee="typo", env={})
    assert info.value.setting == "api_kee" and "api_key" in str(info.value)


def test_provider_specs_build_configured_models():
    openai = resolve_llm("openai:qwen2.5:7b", base_url="http://127.0.0.1:11434/v1", env={})
    assert isinstance(openai, ResolvedModel) and isinstance(openai.llm_call, OpenAICompatModel)
    assert (openai.model, openai.provider) == ("qwen2.5:7b", "openai")
    claude = resolve_llm(" Anthropic:claude-haiku-4-5 ", env={"ANTHROPIC_API_KEY": "k"})
    assert isinstance(claude.llm_call, AnthropicModel) and claude.model == "claude-haiku-4-5"


async def test_replay_spec_takes_the_model_from_the_recording_and_record_to_wraps(tmp_path):
    path = tmp_path / "rec.jsonl"
    recorded = resolve_llm("openai:gpt-4o", api_key="k", record_to=path,
                           transport=httpx.MockTransport(lambda r: httpx.Response(200, json={
                               "choices": [{"message": {"content": "hi"}}]})))
    assert isinstance(recorded.llm_call, RecordingLLM)
    await recorded.llm_call([{"role": "user", "content": "x"}], recorded.model)

    replayed = resolve_llm(f"replay:{path}")
    assert isinstance(replayed.llm_call, ReplayLLM) and replayed.model == "gpt-4o"
    assert (await replayed.llm_call([{"role": "user", "content": "x"}], replayed.model)).content == "hi"
    with pytest.raises(ConfigurationError, match="does not exist"):
        resolve_llm(f"replay:{tmp_path / 'missing.jsonl'}")
    with pytest.raises(ConfigurationError, match="names no file"):
        resolve_llm("replay:")


def test_demo_is_imported_lazily_from_cyber_agent_llm_demo(monkeypatch):
    fake = types.ModuleType("cyber_agent.llm.demo")
    fake.DemoModel = lambda: ScriptedModel(["demo reply"])
    monkeypatch.setitem(sys.modules, "cyber_agent.llm.demo", fake)
    resolved = resolve_llm("demo")
    assert resolved.provider == "demo" and resolved.model == "demo"
    assert isinstance(resolved.llm_call, ScriptedModel)


async def test_demo_resolves_to_the_bundled_offline_model():
    resolved = resolve_llm("demo")
    assert isinstance(resolved.llm_call, DemoModel) and resolved.model == "demo"
    reply = await resolved.llm_call([{"role": "user", "content": "hello"}], resolved.model)
    assert reply.content  # it answers without any network
