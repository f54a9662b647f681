"""Prices (hand-worked costs, lookups, the pre-run check, pricing by node) and the LLM presets."""

from __future__ import annotations

from pathlib import Path

import pytest

from nl2sql_assets.config import NODE_NAMES, ConfigError, LLMConfig, ModelSettings, PriceRow
from nl2sql_assets.llm.calls import LLMCall, Usage
from nl2sql_assets.llm.presets import PRESETS_DIR, load_llm_file, model_config, preset_names, resolve_llm_spec
from nl2sql_assets.llm.prices import (
    PRICES,
    UnknownPriceError,
    call_cost,
    check_prices,
    price_calls,
    price_for,
)
from nl2sql_assets.llm.providers import VERIFIED_MODELS

M = 1_000_000


@pytest.mark.parametrize(
    ("model", "usage", "dollars"),
    [
        # 1M input of which 200k cached: 0.8 x 2.50 + 0.2 x 0.25
        ("gpt-5.4", Usage(input_tokens=M, cached_tokens=200_000), 2.05),
        # output (reasoning is inside output, billed once): 0.5 x 15.00
        ("gpt-5.4", Usage(output_tokens=500_000, reasoning_tokens=400_000), 7.50),
        # Anthropic: 100k plain + 300k cache read + 600k cache write, 10k out
        # 0.1x5 + 0.3x0.5 + 0.6x6.25 + 0.01x25 = 0.5 + 0.15 + 3.75 + 0.25
        (
            "claude-opus-5",
            Usage(input_tokens=M, cached_tokens=300_000, cache_write_tokens=600_000, output_tokens=10_000),
            4.65,
        ),
        # mini: 2,000 in, 500 out: 0.002 x 0.75 + 0.0005 x 4.50
        ("gpt-5.4-mini", Usage(input_tokens=2_000, output_tokens=500), 0.00375),
        ("claude-haiku-4-5", Usage(input_tokens=M, output_tokens=M), 6.00),
        ("claude-sonnet-5", Usage(input_tokens=M, cached_tokens=M), 0.20),
    ],
)
def test_call_cost_hand_worked(model: str, usage: Usage, dollars: float) -> None:
    assert call_cost(usage, price_for(model)) == pytest.approx(dollars)


def test_missing_cache_rates_default_to_input() -> None:
    row = PriceRow(input=1.0, output=2.0)
    usage = Usage(input_tokens=M, cached_tokens=250_000, cache_write_tokens=250_000, output_tokens=M)
    assert call_cost(usage, row) == pytest.approx(1.0 + 2.0)


def test_the_committed_table_has_dated_rows() -> None:
    assert PRICES["gpt-5.4"] == PriceRow(
        input=2.50,
        cached_input=0.25,
        cache_write=2.50,
        output=15.00,
        source="OpenAI pricing page, 2026-09-21",
    )
    assert PRICES["claude-opus-5"].cache_write == 6.25
    for name in ("gpt-4.1", "gpt-4o", "gpt-4o-mini", "gpt-5.4-mini", "claude-sonnet-5", "claude-haiku-4-5"):
        assert any(ch.isdigit() for ch in PRICES[name].source), name  # every row names when it was read


@pytest.mark.parametrize("name", ["gpt-5.4", "openai/gpt-5.4", "azure/gpt-5.4"])
def test_price_keys_match_with_or_without_provider(name: str) -> None:
    assert price_for(name).input == 2.50


def test_a_config_row_replaces_the_table() -> None:
    mine = PriceRow(input=1.0, output=1.0, source="our contract")
    assert price_for("openai/gpt-5.4", {"gpt-5.4": mine}) is mine
    assert price_for("gpt-5.4", {"openai/gpt-5.4": mine}) is mine
    assert price_for("ollama/llama3", {"ollama/llama3": mine}) is mine


def test_unknown_price_names_config_node_and_model() -> None:
    with pytest.raises(UnknownPriceError) as info:
        price_for("ollama/llama3", config="local", node="planner")
    err = info.value
    assert (err.config, err.node, err.model) == ("local", "planner", "ollama/llama3")
    assert "local" in str(err) and "planner" in str(err) and "ollama/llama3" in str(err)


def test_check_prices_finds_the_unpriced_node_before_any_call() -> None:
    good = model_config("gpt-5.4")
    mixed = LLMConfig.model_validate(
        {"default": {"model": "openai/gpt-5.4"}, "nodes": {"refiner": {"model": "openrouter/mystery-1"}}}
    )
    check_prices({"good": good})  # no error
    with pytest.raises(UnknownPriceError) as info:
        check_prices({"good": good, "mixed": mixed})
    assert (info.value.config, info.value.node, info.value.model) == (
        "mixed",
        "refiner",
        "openrouter/mystery-1",
    )
    # A price in the config's own llm.prices makes it runnable.
    mixed.prices["openrouter/mystery-1"] = PriceRow(input=0.1, output=0.1)
    check_prices({"good": good, "mixed": mixed})


def test_every_preset_and_verified_model_is_priced() -> None:
    check_prices({name: resolve_llm_spec(name)[1] for name in preset_names()})
    check_prices({name: model_config(name) for name in VERIFIED_MODELS})


def test_calls_are_priced_by_their_nodes_model() -> None:
    llm = LLMConfig.model_validate(
        {"default": {"model": "openai/gpt-5.4-mini"}, "nodes": {"planner": {"model": "openai/gpt-5.4"}}}
    )
    usage = Usage(input_tokens=M, output_tokens=0)
    calls = [
        # the response named a dated snapshot; the node's configured model sets the price
        LLMCall(node="planner", model="gpt-5.4-2026-09-01", usage=usage),
        LLMCall(node="resolver", model="whatever", usage=usage),
        LLMCall(node="synthesizer", model="openai/gpt-5.4-mini", usage=None, error="Timeout"),
    ]
    dollars, unknown = price_calls(calls, llm)
    assert dollars == pytest.approx(2.50 + 0.75)
    assert unknown == 1


# ---------------------------------------------------------------- presets


def test_presets_put_the_right_model_on_each_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert set(preset_names()) >= {"gpt-5.4", "gpt-5.4-mini-helpers", "claude-planner"}
    table = {
        "gpt-5.4": {n: "openai/gpt-5.4" for n in NODE_NAMES},
        "gpt-5.4-mini-helpers": {
            n: "openai/gpt-5.4" if n in ("planner", "refiner") else "openai/gpt-5.4-mini" for n in NODE_NAMES
        },
        "claude-planner": {
            n: "anthropic/claude-opus-5" if n in ("planner", "refiner") else "openai/gpt-5.4"
            for n in NODE_NAMES
        },
    }
    for preset, expected in table.items():
        llm = load_llm_file(PRESETS_DIR / f"{preset}.yaml")  # loads with no key set
        assert {n: llm.for_node(n).model for n in NODE_NAMES} == expected, preset
    claude = load_llm_file(PRESETS_DIR / "claude-planner.yaml")
    assert claude.for_node("planner").temperature is None  # claude-opus-5 rejects one
    assert claude.for_node("resolver").temperature == 0


def test_preset_keys_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
    claude = load_llm_file(PRESETS_DIR / "claude-planner.yaml")
    assert claude.for_node("planner").api_key == "sk-test-anthropic"
    assert claude.for_node("synthesizer").api_key == "sk-test-openai"


@pytest.mark.parametrize(
    ("model", "litellm_model", "temperature"),
    [
        ("gpt-5.4", "openai/gpt-5.4", 0.0),
        ("gpt-5.5", "openai/gpt-5.5", None),
        ("gpt-5-mini", "openai/gpt-5-mini", None),
        ("claude-opus-5", "anthropic/claude-opus-5", None),
        ("claude-sonnet-5", "anthropic/claude-sonnet-5", None),
        ("claude-haiku-4-5", "anthropic/claude-haiku-4-5", 0.0),
        ("openrouter/meta-llama/llama-3.3-70b-instruct", "openrouter/meta-llama/llama-3.3-70b-instruct", 0.0),
        ("ollama/llama3", "ollama/llama3", 0.0),
        ("anthropic/claude-future-9", "anthropic/claude-future-9", None),
    ],
)
def test_model_config(model: str, litellm_model: str, temperature: float | None) -> None:
    llm = model_config(model)
    for node in NODE_NAMES:
        assert llm.for_node(node).model == litellm_model
        assert llm.for_node(node).temperature == temperature


def test_model_config_needs_a_provider_for_unverified_models() -> None:
    with pytest.raises(ConfigError, match="provider/model"):
        model_config("llama3")


def test_resolve_llm_spec_forms(tmp_path: Path) -> None:
    mine = tmp_path / "my-llm.yaml"
    mine.write_text("llm:\n  default:\n    model: ollama/llama3\n", encoding="utf-8")
    assert resolve_llm_spec("gpt-5.4")[0] == "gpt-5.4"
    name, llm = resolve_llm_spec("mini=gpt-5.4-mini-helpers")
    assert name == "mini" and llm.for_node("resolver").model == "openai/gpt-5.4-mini"
    assert resolve_llm_spec("mini=mini-helpers")[1] == llm  # a preset's unique short form
    name, llm = resolve_llm_spec(str(mine))
    assert name == "my-llm" and llm.for_node("planner").model == "ollama/llama3"
    assert resolve_llm_spec(f"local={mine}")[0] == "local"
    assert resolve_llm_spec("claude-sonnet-5")[1].for_node("planner").model == "anthropic/claude-sonnet-5"
    with pytest.raises(ConfigError, match="not found"):
        resolve_llm_spec(str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match="not a preset"):
        resolve_llm_spec("no-such-thing")
    with pytest.raises(ConfigError, match="letters, digits"):
        resolve_llm_spec("bad name=gpt-5.4")


def test_a_bad_llm_file_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("default:\n  model: openai/gpt-5.4\n  temprature: 0\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_llm_file(bad)
    assert "bad.yaml" in str(info.value) and "temprature" in str(info.value) and "line 3" in str(info.value)


def test_check_prices_default_config_shape() -> None:
    llm = LLMConfig(default=ModelSettings(model="openai/gpt-4o-mini"))
    check_prices({"default": llm})
