"""Mode full with ``max_concurrency`` case runs at once, on a provider that takes 200 ms a call
(``flaky_llm`` over real HTTP): the calls overlap, every case is answered as one at a time, and
the cap holds within ``max_concurrency`` cases' worth. The speed-up is measured by
``scripts/bench_full_concurrency.py``, not here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nl2sql_assets.config import ProjectConfig
from nl2sql_assets.evaluation.reporting import EvalReport
from tests.integration.test_provider_faults import Provider, _full
from tests.unit.test_runner import small_project

DELAY_S = 0.2


@pytest.fixture
def config(tmp_path: Path, chinook_path: Path) -> ProjectConfig:
    return small_project(tmp_path, chinook_path)


@pytest.fixture
def slow(chinook_path: Path) -> Iterator[Provider]:
    made = Provider(chinook_path, "openai-compatible")
    yield made
    for server in made.servers:
        server.stop()


def _outcomes(report: EvalReport) -> dict[tuple[str, str], tuple[str, str | None, str | None]]:
    board = report.first_board
    assert board is not None
    return {(r.case_id, r.role): (r.status, r.rows_sha256, r.error_code) for r in board.results}


def test_concurrent_case_runs_answer_as_one_at_a_time(config: ProjectConfig, slow: Provider) -> None:
    config.settings.max_concurrency = 1
    bus, one_server, llm = slow("ok", delay_s=DELAY_S)
    one = _full(config, bus, llm)
    config.settings.max_concurrency = 8
    bus, eight_server, llm = slow("ok", delay_s=DELAY_S)
    eight = _full(config, bus, llm)
    assert one.stopped is None and eight.stopped is None
    assert _outcomes(eight) == _outcomes(one) and len(_outcomes(one)) > 8
    assert one_server.most_in_flight == 1
    assert eight_server.most_in_flight > 1  # the calls of several case runs overlapped
    assert eight.spent == pytest.approx(one.spent)  # the same tokens, billed the same


@pytest.mark.parametrize("cap", [0.004, 0.01, 0.02])
def test_the_cap_holds_within_max_concurrency_cases(config: ProjectConfig, slow: Provider, cap: float) -> None:
    config.settings.max_concurrency = 8
    bus, _, llm = slow("ok", delay_s=DELAY_S)
    report = _full(config, bus, llm, cap=cap)
    board = report.first_board
    assert board is not None
    costs = sorted((r.cost_usd for r in board.results if r.cost_usd), reverse=True)
    assert report.stopped == "max_cost" and report.spent > 0
    assert report.spent == pytest.approx(sum(costs))
    assert report.spent <= cap + sum(costs[:8])  # passed by at most max_concurrency cases' worth
    assert report.spent > cap - max(costs)  # and the cap was not left unused either
