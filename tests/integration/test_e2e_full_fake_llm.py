"""Mode full with no key and no spending: two llm configs on two gold LLM servers.

Both servers speak the OpenAI chat API on 127.0.0.1 and report canned usage (cached and
reasoning tokens included); ``bad`` serves a wrong plan for chinook_010 (Jazz instead of Heavy
Metal). Both write each answer from the case's gold rows, so ``good`` is faithful and ``bad``'s
answer about its wrong rows is not. The run is the whole engine on the demo project.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets import Project
from nl2sql_assets.config import LLMConfig, PriceRow
from nl2sql_assets.datasources.registry import DatasourceRegistry
from nl2sql_assets.evaluation.reporting.board import EvalReport
from nl2sql_assets.evaluation.running.gold_llm import ANSWERS, GoldLLMServer
from nl2sql_assets.evaluation.running.results import CaseRecord
from nl2sql_assets.evaluation.suites import EvalCase, load_suite
from nl2sql_assets.llm.prices import UnknownPriceError

# chinook_010: every role allowed (one count); chinook_007: admin allowed, the others refused;
# chinook_012: unanswerable for everyone.
CASES = ["chinook_010", "chinook_007", "chinook_012"]
USAGE = {"prompt_tokens": 1000, "completion_tokens": 200, "cached_tokens": 400, "reasoning_tokens": 50,
         "cache_creation_input_tokens": 100}
GOOD_PRICE = PriceRow(input=2.0, cached_input=0.5, cache_write=2.5, output=8.0, source="test table")
BAD_PRICE = PriceRow(input=1.0, cached_input=0.25, cache_write=1.25, output=3.0, source="test table")
# Per call: 500 plain input tokens, 400 cached, 100 written to the cache, 200 output (its 50
# reasoning tokens are billed as output).
GOOD_PER_CALL = (500 * 2.0 + 400 * 0.5 + 100 * 2.5 + 200 * 8.0) / 1_000_000  # $0.00305
BAD_PER_CALL = (500 * 1.0 + 400 * 0.25 + 100 * 1.25 + 200 * 3.0) / 1_000_000  # $0.001325
CALLS = {"allowed": 4, "refused": 3, "unanswerable": 1}  # resolver, decomposer, planner, synthesizer
EXPECTED = {  # (case, role) -> expected outcome
    **{("chinook_010", role): "allowed" for role in ("admin", "analyst", "viewer")},
    ("chinook_007", "admin"): "allowed",
    ("chinook_007", "analyst"): "refused",
    ("chinook_007", "viewer"): "refused",
    **{("chinook_012", role): "unanswerable" for role in ("admin", "analyst", "viewer")},
}


def _jazz_for_heavy_metal(case: EvalCase, role: str | None, server: GoldLLMServer) -> dict[str, Any]:
    """The gold plan, except chinook_010 counts jazz tracks (130) instead of heavy metal (28)."""
    plan = ANSWERS["PlanModel"](case, role, server)
    if case.id == "chinook_010":
        assert plan["where"]["right"]["value"] == "Heavy Metal"
        plan["where"]["right"]["value"] = "Jazz"
    return plan


@dataclass
class Fakes:
    project: Project
    good: GoldLLMServer
    bad: GoldLLMServer

    def llm(self, server: GoldLLMServer, model: str, price: PriceRow | None) -> LLMConfig:
        base = server.llm_config()
        assert base.default is not None
        default = base.default.model_copy(update={"model": f"openai/{model}"})
        return base.model_copy(update={"default": default, "prices": {model: price} if price else {}})

    @property
    def both(self) -> dict[str, LLMConfig]:
        return {"good": self.llm(self.good, "fake-good", GOOD_PRICE),
                "bad": self.llm(self.bad, "fake-bad", BAD_PRICE)}


@pytest.fixture
def fakes(demo_project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fakes]:
    for name in list(os.environ):
        if name.upper().endswith("_API_KEY"):
            monkeypatch.delenv(name)
    project = Project.load(demo_project / "nl2sql.yaml")
    cases = load_suite(demo_project / "suites" / "chinook.yaml").cases
    good = GoldLLMServer(cases, project.bus, usage=USAGE, synthesizer="rows")
    bad = GoldLLMServer(cases, project.bus, usage=USAGE, synthesizer="rows",
                        answers={"PlanModel": _jazz_for_heavy_metal})
    with project, good, bad:
        yield Fakes(project, good, bad)


def _by_key(records: list[CaseRecord]) -> dict[tuple[str, str], CaseRecord]:
    return {(r.case_id, r.role): r for r in records}


def _simulate_cap(report: EvalReport, cap: float) -> int:
    """How many case runs the documented rule lets through: before each case but the first,
    stop when what was spent plus the most expensive case so far could pass the cap."""
    boards = list(report.configs.values())
    order = [board.results[i] for i in range(len(boards[0].results)) for board in boards]
    spent = most = 0.0
    for n, record in enumerate(order):
        if n > 0 and spent + most > cap:
            return n
        cost = record.cost_usd or 0.0
        spent += cost
        most = max(most, cost)
    return len(order)


def test_two_configs_compared_priced_and_checked_for_faithfulness(fakes: Fakes) -> None:
    report = fakes.project.evals.run(mode="full", llm=fakes.both, cases=CASES, max_cost_usd=5)
    assert list(report.configs) == ["good", "bad"]
    good, bad = report.configs["good"], report.configs["bad"]
    assert {key: r.expected for key, r in _by_key(good.results).items()} == EXPECTED
    assert report.stopped is None and good.completed_cases == bad.completed_cases == 9

    # ------------------------------------------------------------ scoring and the comparison
    assert [(r.case_id, r.role, r.reason) for r in good.results if r.status != "pass"] == []
    failed = {(r.case_id, r.role) for r in bad.results if r.status != "pass"}
    assert failed == {("chinook_010", "admin"), ("chinook_010", "analyst"), ("chinook_010", "viewer")}
    for key in failed:
        record = _by_key(bad.results)[key]
        assert record.execution_status == "fail"
        assert record.scores["result_match"].passed is False
        assert "'Jazz'" in (record.sql or "")
    assert good.accuracy.execution.passed == 9 and bad.accuracy.execution.passed == 6
    assert report.comparison is not None and report.comparison.reference == "good"
    [diff] = report.comparison.differences
    assert (diff.reference, diff.config) == ("good", "bad")
    assert diff.passes_only_in_reference == ["chinook_010@admin", "chinook_010@analyst", "chinook_010@viewer"]
    assert diff.passes_only_here == []

    # ------------------------------------------------------------ dollars, from the price rows
    for board, per_call in ((good, GOOD_PER_CALL), (bad, BAD_PER_CALL)):
        for record in board.results:
            calls = CALLS[record.expected]
            assert record.cost_usd == pytest.approx(calls * per_call), (board.config, record.case_id, record.role)
            assert sum(u.input_tokens for u in record.usage.values()) == calls * 1000
            assert sum(u.cached_tokens for u in record.usage.values()) == calls * 400
            assert sum(u.reasoning_tokens for u in record.usage.values()) == calls * 50
            assert sum(u.cache_write_tokens for u in record.usage.values()) == calls * 100
        assert board.cost.unknown_cost_calls == 0
    n_calls = sum(CALLS[outcome] for outcome in EXPECTED.values())  # 4*4 + 3*2 + 1*3 = 25
    assert n_calls == 25
    assert fakes.good.requests == fakes.bad.requests == n_calls
    assert good.cost.total_usd == pytest.approx(25 * GOOD_PER_CALL)  # $0.07625
    assert bad.cost.total_usd == pytest.approx(25 * BAD_PER_CALL)  # $0.033125
    assert report.spent == pytest.approx(25 * (GOOD_PER_CALL + BAD_PER_CALL))
    assert good.cost.per_case_usd == pytest.approx(25 * GOOD_PER_CALL / 9)
    assert good.tokens_by_node["planner"].cached_tokens == 400 * 6  # 4 allowed + 2 refused runs plan
    assert good.models["planner"] == "openai/fake-good" and bad.models["planner"] == "openai/fake-bad"

    # ------------------------------------------------------------ faithfulness
    assert good.faithfulness is not None
    assert (good.faithfulness.answers, good.faithfulness.faithful) == (4, 4)
    assert all(r.faithfulness is None for r in good.results if r.expected != "allowed")  # no answer written
    assert bad.faithfulness is not None
    assert (bad.faithfulness.answers, bad.faithfulness.faithful) == (4, 1)
    for role in ("admin", "analyst", "viewer"):
        record = _by_key(bad.results)[("chinook_010", role)]
        assert record.answer == "The result is: track_count 28."
        assert record.faithfulness == {"faithful": False, "unsupported_numbers": ["28"],
                                       "unsupported_entities": [], "checked": 1}
    assert sorted((u.case, u.role) for u in bad.faithfulness.unfaithful) == [
        ("chinook_010", "admin"), ("chinook_010", "analyst"), ("chinook_010", "viewer")]

    # ------------------------------------------------------------ the database the run read
    with DatasourceRegistry(fakes.project.config) as registry:
        fingerprint = registry.snapshot("chinook").fingerprint()
    [database] = report.databases
    assert (database.datasource_id, database.engine, database.schema_fingerprint) == ("chinook", "sqlite", fingerprint)
    assert database.tables == 11

    # ------------------------------------------------------------ the cap, mid-run
    # Jobs go case by case (suite order: 007, 010, 012), good then bad. Six runs cost
    # $0.0122 + $0.0053 + $0.00915 + $0.003975 + $0.00915 + $0.003975 = $0.04375, the seventh
    # ($0.0122) still fits under $0.06 by the rule, and then $0.05595 + $0.0122 could pass it.
    cap = 0.06
    expected_runs = _simulate_cap(report, cap)
    assert expected_runs == 7
    fakes.project.config.settings.max_concurrency = 1  # the one-at-a-time rule, exactly
    capped = fakes.project.evals.run(mode="full", llm=fakes.both, cases=CASES, max_cost_usd=cap)
    records = [r for board in capped.configs.values() for r in board.results]
    assert capped.stopped == "max_cost"
    assert len(records) == expected_runs
    most = max(r.cost_usd or 0.0 for r in records)
    assert capped.spent == pytest.approx(sum(r.cost_usd or 0.0 for r in records))
    assert capped.spent <= cap + most and capped.spent + most > cap
    for board in capped.configs.values():
        assert board.planned_cases == 9 and board.completed_cases < 9
    assert capped.max_cost_usd == cap
    assert (capped.configs["good"].completed_cases, capped.configs["bad"].completed_cases) == (4, 3)
    assert capped.spent == pytest.approx(0.04375 + 0.0122)


def test_an_unpriced_model_fails_before_any_call(fakes: Fakes) -> None:
    llm = {"good": fakes.llm(fakes.good, "fake-good", GOOD_PRICE), "bad": fakes.llm(fakes.bad, "fake-bad", None)}
    with pytest.raises(UnknownPriceError, match=r"no price for model 'openai/fake-bad' \(config 'bad'"):
        fakes.project.evals.run(mode="full", llm=llm, cases=CASES, max_cost_usd=5)
    assert fakes.good.requests == fakes.bad.requests == 0


def test_two_passes_ask_the_planner_again_with_the_plan_cache_off(fakes: Fakes) -> None:
    assert fakes.project.config.settings.plan_cache is True  # mode full turns it off regardless
    llm = {"good": fakes.llm(fakes.good, "fake-good", GOOD_PRICE)}
    report = fakes.project.evals.run(mode="full", llm=llm, cases=["chinook_010", "chinook_007"], passes=2,
                                     max_cost_usd=5)
    board = report.configs["good"]
    assert report.passes == 2 and report.settings["plan_cache"] is False
    assert sorted({r.pass_index for r in board.results}) == [1, 2] and len(board.results) == 12
    planner_runs_per_pass = 3 + 3  # chinook_010 for every role; chinook_007 allowed once, refused twice
    assert fakes.good.requests_by_schema["PlanModel"] == 2 * planner_runs_per_pass
    assert fakes.good.requests_by_schema["DatasourceSelection"] == 12
    assert board.accuracy.pass_k.k == 2 and board.accuracy.pass_k.execution.rate == 1.0
    assert board.determinism is not None and board.determinism.rate == 1.0
