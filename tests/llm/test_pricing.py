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
    for model in ("gpt-5", "o1", "gemini-2.5-pro"):
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
