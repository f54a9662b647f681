"""declare_free_model: the gold LLM is priced by litellm as a known, free model (a lookup, not a rule search)."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest

from nl2sql_assets.engine.events import EventBus
from nl2sql_assets.evaluation.running.gold_llm import GOLD_MODEL, GoldLLMServer
from nl2sql_assets.llm import client

FREE = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0}


@pytest.fixture(scope="module")
def litellm() -> object:
    return client._lib()


def test_a_declared_model_costs_nothing_in_litellm(litellm: object) -> None:
    name = "openai/nl2sql-test-free-model"
    assert name not in litellm.model_cost  # type: ignore[attr-defined]
    client.declare_free_model(name)
    entry = litellm.model_cost[name]  # type: ignore[attr-defined]
    assert {k: entry[k] for k in FREE} == FREE
    assert entry["litellm_provider"] == "openai"


def test_a_known_model_keeps_its_price(litellm: object) -> None:
    before = dict(litellm.model_cost["gpt-4o-mini"])  # type: ignore[attr-defined]
    assert before["input_cost_per_token"] > 0
    client.declare_free_model("gpt-4o-mini")
    assert litellm.model_cost["gpt-4o-mini"] == before  # type: ignore[attr-defined]


def test_the_gold_server_declares_its_model_when_it_starts(litellm: object) -> None:
    with GoldLLMServer([], EventBus()) as server:
        assert server.llm_config().default.model == GOLD_MODEL
        entry = litellm.model_cost[GOLD_MODEL]  # type: ignore[attr-defined]
        assert {k: entry[k] for k in FREE} == FREE
