"""compute_cost: provider charge first, then the lower-bound table; unknown models are flagged."""

from __future__ import annotations

import pytest

from cyber_agent.llm import PRICE_TABLE, PRICES_AS_OF, ModelPrice, Usage, compute_cost, lookup_price


def test_provider_charge_wins():
    assert compute_cost("gpt-4o", Usage(prompt_tokens=10**6, cost_usd=0.42)) == (0.42, False)


def test_cached_tokens_are_priced_at_the_cached_rate():
    usage = Usage(prompt_tokens=1_000_000, cached_tokens=200_000, completion_tokens=100_000)
    cost, estimated = compute_cost("claude-sonnet-4-5", usage)
    assert estimated and cost == pytest.approx(0.8 * 3.0 + 0.2 * 0.30 + 0.1 * 15.0)  # 3.96, as in the notes


def test_unknown_model_costs_zero_and_is_estimated():
    assert compute_cost("llama3:8b", Usage(prompt_tokens=5000)) == (0.0, True)


@pytest.mark.parametrize(("model", "key"), [
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ("gpt-4o-2024-08-06", "gpt-4o"),
    ("openai/gpt-4.1-nano", "gpt-4.1-nano"),
    ("claude-sonnet-4-20250514", "claude-sonnet-4"),
    ("claude-opus-4-5-20251101", "claude-opus-4-5"),
    ("anthropic/claude-3-5-haiku-latest", "claude-3-5-haiku"),
    ("O4-MINI", "o4-mini"),
    ("deepseek-chat", "deepseek-chat"),
])
def test_dated_and_routed_names_find_their_family(model, key):
    assert lookup_price(model) == PRICE_TABLE[key]


def test_prefix_must_end_at_a_name_boundary():
    assert lookup_price("o3x") is None and lookup_price("gpt-4oo") is None and lookup_price("") is None


def test_custom_table_and_date():
    table = {"house-model": ModelPrice(input=1.0, cached_input=0.1, output=2.0)}
    assert compute_cost("house-model-v2", Usage(prompt_tokens=10**6, completion_tokens=10**6), table) == (3.0, True)
    assert len(PRICES_AS_OF) == 10 and PRICES_AS_OF[4] == "-"
    with pytest.raises(TypeError):
        PRICE_TABLE["gpt-4o"] = table["house-model"]  # the shared table is read-only


# -- unpriced usage and the user price table (issue 14) ------------------------------------------------


def test_unpriced_usage_is_recognised_and_a_provider_charge_or_explicit_zero_is_not():
    from cyber_agent.llm.pricing import is_unpriced, with_cost
    from cyber_agent.llm.types import LLMResponse, Usage

    used = Usage(prompt_tokens=10, completion_tokens=5)
    for model in ("house-model-7b", "o9", "gemini-0-ultra"):
        assert is_unpriced(with_cost(LLMResponse(content="x", usage=used), model), model)
    assert not is_unpriced(with_cost(LLMResponse(content="x", usage=used), "gpt-4o"), "gpt-4o")
    charged = Usage(prompt_tokens=10, completion_tokens=5, cost_usd=0.0)
    assert not is_unpriced(with_cost(LLMResponse(content="x", usage=charged), "gpt-5"), "gpt-5")
    assert not is_unpriced(LLMResponse(content="x", usage=used, cost=0.0, model="gpt-5"), "gpt-5")
    assert not is_unpriced(with_cost(LLMResponse(content="x"), "gpt-5"), "gpt-5")  # no tokens used


def test_the_user_price_file_adds_and_overrides_prices(tmp_path, monkeypatch):
    import json

    from cyber_agent.llm.pricing import PRICES_ENV, lookup_price

    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-5": {"input": 1.25, "output": 10}, "gpt-4o": {"input": 9, "output": 9}}))
    monkeypatch.setenv(PRICES_ENV, str(path))
    gpt5 = lookup_price("gpt-5-2025-08-07")
    assert gpt5 is not None and (gpt5.input, gpt5.cached_input, gpt5.output) == (1.25, 1.25, 10.0)
    assert lookup_price("gpt-4o").input == 9  # the user's entry wins
    assert lookup_price("gpt-4o-mini").input == 0.15  # a longer built-in prefix still wins for its model


def test_a_bad_price_file_is_a_configuration_error_naming_the_variable(tmp_path, monkeypatch):
    import pytest

    from cyber_agent.errors import ConfigurationError
    from cyber_agent.llm.pricing import PRICES_ENV, lookup_price

    bad = tmp_path / "prices.json"
    for text in ("{not json", '["gpt-5"]', '{"gpt-5": {"input": 1}}', '{"gpt-5": {"input": -1, "output": 1}}'):
        bad.write_text(text)
        monkeypatch.setenv(PRICES_ENV, str(bad))
        with pytest.raises(ConfigurationError, match=PRICES_ENV):
            lookup_price("gpt-5")
    monkeypatch.setenv(PRICES_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(ConfigurationError, match="cannot read"):
        lookup_price("gpt-5")


# -- the built-in table's coverage and user tables in TOML ([providers]) ---------------------------------


@pytest.mark.parametrize(("model", "key"), [
    ("gpt-5-2025-08-07", "gpt-5"), ("gpt-5-mini", "gpt-5-mini"), ("gpt-5.1", "gpt-5.1"), ("o3-pro", "o3-pro"),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"), ("claude-opus-4-5", "claude-opus-4-5"),
    ("gemini-2.5-flash", "gemini-2.5-flash"), ("models/gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
    ("gemini-3-pro-preview", "gemini-3-pro"), ("deepseek-reasoner", "deepseek-reasoner"),
    ("qwen-plus-latest", "qwen-plus"), ("qwen3-max-preview", "qwen3-max"), ("qwen3-coder-plus", "qwen3-coder-plus"),
])
def test_current_models_of_each_vendor_are_priced(model, key):
    assert lookup_price(model, PRICE_TABLE) == PRICE_TABLE[key]


def test_local_open_weight_names_stay_unpriced():
    for model in ("qwen2.5:7b", "llama3.1:8b", "deepseek-r1:14b"):
        assert lookup_price(model, PRICE_TABLE) is None  # run locally: the user prices them (0 is fine)


def test_every_price_is_a_finite_non_negative_lower_bound_with_cached_at_most_input():
    for key, price in PRICE_TABLE.items():
        assert 0 <= price.cached_input <= price.input and price.output >= 0, key


def test_a_toml_price_file_adds_prices(tmp_path, monkeypatch):
    from cyber_agent.llm.pricing import PRICES_ENV

    path = tmp_path / "prices.toml"
    path.write_text('''
["qwen2.5"]          # a local model: free
input = 0
output = 0

["gpt-4.1-mini"]     # a negotiated price
input = 0.3
cached_input = 0.05
output = 1.2
''')
    monkeypatch.setenv(PRICES_ENV, str(path))
    assert lookup_price("qwen2.5:7b") == ModelPrice(input=0.0, cached_input=0.0, output=0.0)
    assert lookup_price("gpt-4.1-mini-2025-04-14") == ModelPrice(input=0.3, cached_input=0.05, output=1.2)


def test_a_bad_toml_price_file_names_the_variable_and_the_line(tmp_path, monkeypatch):
    from cyber_agent.errors import ConfigurationError
    from cyber_agent.llm.pricing import PRICES_ENV

    path = tmp_path / "prices.toml"
    path.write_text('["m"]\ninput = cheap\n')
    monkeypatch.setenv(PRICES_ENV, str(path))
    with pytest.raises(ConfigurationError, match=r"CYBER_AGENT_PRICES: cannot read the price file .*line 2"):
        lookup_price("m")


async def test_a_settings_price_file_and_inline_prices_price_a_run_without_the_variable(tmp_path, monkeypatch):
    import httpx

    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.llm import ProviderSettings, resolve_llm
    from cyber_agent.llm.pricing import PRICES_ENV
    from cyber_agent.trace import InMemoryTraceStore

    monkeypatch.delenv(PRICES_ENV, raising=False)
    path = tmp_path / "prices.toml"
    path.write_text('["house-model"]\ninput = 2.0\noutput = 4.0\n')
    answer = {"choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000}}
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=answer))
    for settings, expected in ((ProviderSettings(price_file=str(path)), 6.0),
                               (ProviderSettings(price_file=str(path), prices={"house-model": {"input": 1, "output": 1}}), 2.0)):
        resolved = resolve_llm("openai:house-model-v2", settings=settings, base_url="http://127.0.0.1:9/v1",
                               transport=transport, env={})
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=resolved.llm_call)
        result = await runner.run_result([{"role": "user", "content": "hi"}],
                                         RunConfig(model="house-model-v2", provider=settings))
        assistant = next(m for m in result.messages if m.role == "assistant")
        assert assistant.cost == pytest.approx(expected) and "cost_unpriced" not in assistant.metadata
        assert not result.trace.cost_unpriced


async def test_a_free_model_priced_by_settings_is_not_flagged_unpriced(monkeypatch):
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.runner import AgentRunner
    from cyber_agent.llm import ProviderSettings, ScriptedModel
    from cyber_agent.llm.pricing import PRICES_ENV
    from cyber_agent.trace import InMemoryTraceStore

    monkeypatch.delenv(PRICES_ENV, raising=False)
    free = ProviderSettings(prices={"qwen2.5": {"input": 0, "output": 0}})
    for settings, flagged in ((free, False), (ProviderSettings(), True)):
        reply = ScriptedModel.text("ok").model_copy(update={"usage": Usage(prompt_tokens=10, completion_tokens=5),
                                                            "model": "qwen2.5:7b"})
        runner = AgentRunner(trace_store=InMemoryTraceStore(), llm_call=ScriptedModel([reply]))
        result = await runner.run_result([{"role": "user", "content": "hi"}], RunConfig(model="qwen2.5:7b", provider=settings))
        assert result.trace.cost_unpriced is flagged
