"""The dollar cap held at every model call: mode full against a provider whose cost jumps tenfold
from one case run to the next (``flaky_llm`` with ``growth``, real HTTP).

Checked before each case alone, such a run spent $1.89 under a $0.20 cap (7 of 12 case runs done):
every case that started ran to its end. Checked before each call too, a case in flight stops at its
next call once the ledger could pass the cap, so the overshoot is bounded by the calls in flight
(one case at a time: one call); the stopped case is counted as stopped by the cap, not as a
failure. The same holds across the runs of a backfill drawing on one ledger (the warehouse's file
ledger here; the Postgres ledger in tests/cluster/test_pg_ledger.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nl2sql_assets import Project
from nl2sql_assets.config import LLMConfig, ModelSettings
from nl2sql_assets.engine.events import EventBus
from nl2sql_assets.engine.nodes import Decomposition
from nl2sql_assets.evaluation.history.warehouse import SpendLedger
from nl2sql_assets.evaluation.reporting import EvalReport
from nl2sql_assets.evaluation.running import RunRequest
from nl2sql_assets.evaluation.running.flaky_llm import FlakyLLMServer
from nl2sql_assets.llm.calls import LLMCall
from nl2sql_assets.llm.client import LLMClient
from nl2sql_assets.llm.spend import CALL_GUARD, CapReached
from tests.integration.test_provider_faults import MODEL, PRICE
from tests.unit.test_runner import run_eval, small_cases, small_project

CAP = 0.2


class Growing:
    """Providers whose every case run costs ten times the one before."""

    def __init__(self, chinook: Path) -> None:
        self.chinook = chinook
        self.servers: list[FlakyLLMServer] = []

    def __call__(self, bus: EventBus) -> LLMConfig:
        server = FlakyLLMServer(small_cases(self.chinook), bus, behaviour="ok", synthesizer="rows",
                                growth=10.0).start()
        self.servers.append(server)
        base = server.llm_config()
        assert base.default is not None
        default = base.default.model_copy(update={"model": f"openai/{MODEL}", "timeout_s": 5, "max_retries": 0,
                                                  "api": "openai-compatible"})
        return base.model_copy(update={"default": default, "prices": {MODEL: PRICE}})

    def dearest_call(self) -> float:
        """The most one answered call cost, priced from what the providers billed."""
        return max((p * PRICE.input + c * PRICE.output) / 1e6 for s in self.servers for p, c in s.calls_billed)

    def calls_past_the_cap(self) -> int:
        """Calls the provider answered once its bill had passed the cap (in the order it billed them)."""
        total, after = 0.0, 0
        for server in self.servers:
            for p, c in server.calls_billed:
                after += total > CAP
                total += (p * PRICE.input + c * PRICE.output) / 1e6
        return after


@pytest.fixture
def growing(chinook_path: Path) -> Iterator[Growing]:
    made = Growing(chinook_path)
    yield made
    for server in made.servers:
        server.stop()


def _run(tmp_path: Path, chinook: Path, growing: Growing, concurrency: int) -> EvalReport:
    config = small_project(tmp_path, chinook)
    config.settings.max_concurrency = concurrency
    bus = EventBus()
    return run_eval(config, mode="full", llm=growing(bus), bus=bus, max_cost_usd=CAP, curated=False)


@pytest.mark.parametrize("concurrency", [1, 4, 8])
def test_a_case_in_flight_stops_at_its_next_call_once_the_cap_could_pass(
        tmp_path: Path, chinook_path: Path, growing: Growing, concurrency: int) -> None:
    report = _run(tmp_path, chinook_path, growing, concurrency)
    board = report.first_board
    assert board is not None
    assert report.stopped == "max_cost"
    assert report.spent <= CAP + concurrency * growing.dearest_call()  # at most the calls in flight
    # No call starts once the cap could pass: what is answered after is what was in flight, one per
    # case at most. (Checked per case alone, cases ran on: 1, 12 and 23 calls past the cap.)
    assert growing.calls_past_the_cap() < concurrency
    assert board.stopped_by_cap >= 1  # a case was stopped at a call, not left to run to its end
    # Stopped is not failed: those case runs have no record and no verdict; their dollars count.
    assert board.completed_cases == len(board.results) < board.planned_cases
    assert not any(r.error_code == "PROVIDER_ERROR" or r.env_error for r in board.results)
    recorded = sum(r.cost_usd or 0.0 for r in board.results)
    assert report.spent > recorded
    assert "stopped by the cost cap in flight" in _markdown(report)


def _markdown(report: EvalReport) -> str:
    from nl2sql_assets.evaluation.reporting import to_markdown

    board = report.first_board
    assert board is not None
    return to_markdown(board)


def test_one_case_at_a_time_passes_the_cap_by_at_most_one_call(tmp_path: Path, chinook_path: Path,
                                                               growing: Growing) -> None:
    report = _run(tmp_path, chinook_path, growing, 1)
    assert report.stopped == "max_cost"
    assert report.spent - CAP <= growing.dearest_call()
    board = report.first_board
    assert board is not None
    costs = [r.cost_usd for r in board.results if r.cost_usd]
    assert costs and costs == sorted(costs)  # each case cost more than the last: no case-level rule foresees it
    assert board.stopped_by_cap == 1  # one at a time: the one case in flight, stopped at a call


def test_a_backfill_s_shared_ledger_holds_the_cap_over_its_runs(tmp_path: Path, chinook_path: Path,
                                                                growing: Growing) -> None:
    """Two runs at once drawing on one file ledger (two partitions of a backfill)."""
    ledger = tmp_path / "spend" / "backfill.jsonl"
    stopped: dict[int, str | None] = {}

    def one(n: int) -> None:
        folder = tmp_path / f"run{n}"
        folder.mkdir()
        config = small_project(folder, chinook_path)
        config.settings.max_concurrency = 4
        bus = EventBus()
        llm = growing(bus)
        with Project(config, bus=bus) as project:
            runs = project.evals.run_cases(RunRequest(mode="full", llm={"default": llm}, max_cost_usd=CAP,
                                                      curated=False), budget=SpendLedger(ledger))
        stopped[n] = runs.meta.stopped

    threads = [threading.Thread(target=one, args=(n,)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    totals = SpendLedger(ledger).totals()
    assert totals["spent"] <= CAP + 2 * 4 * growing.dearest_call()  # the calls in flight over both runs
    assert totals["open"] == 0 and totals["reserved"] == 0.0  # every case settled, the stopped ones too
    assert stopped == {1: "max_cost", 2: "max_cost"}


def test_the_client_asks_before_every_attempt_and_makes_none_the_cap_refuses() -> None:
    seen: list[str] = []
    settled: list[LLMCall] = []

    class Refusing:
        def before_call(self, node: str, model: str) -> None:
            seen.append(f"{node}:{model}")
            raise CapReached("no room")

        def after_call(self, call: LLMCall) -> None:
            settled.append(call)

    client = LLMClient(lambda node: ModelSettings(model="openai/x", api_base="http://127.0.0.1:9", api_key="k"))

    async def ask() -> None:
        token = CALL_GUARD.set(Refusing())
        try:
            await client.structured("decomposer", [{"role": "user", "content": "q"}], Decomposition)
        finally:
            CALL_GUARD.reset(token)

    with pytest.raises(CapReached):
        asyncio.run(ask())
    assert seen == ["decomposer:openai/x"] and settled == []  # refused before the first attempt: none went out
