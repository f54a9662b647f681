"""The results warehouse (JSON Lines per partition, queried with DuckDB) and the shared spend ledger."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from nl2sql_assets.engine.events import EventBus
from nl2sql_assets.evaluation.history.warehouse import SpendLedger, Warehouse
from nl2sql_assets.evaluation.running.results import CaseRecord


def _record(case: str, role: str, config: str, pass_index: int, status: str, cost: float = 0.0) -> CaseRecord:
    return CaseRecord(suite="s", case_id=case, role=role, config=config, mode="plans", pass_index=pass_index,
                      expected="allowed", status=status, execution_status=status, cost_usd=cost, latency_s=0.5)


def test_passes_round_trip_and_replace(tmp_path: Path):
    wh = Warehouse(tmp_path)
    first = [_record("c1", "admin", "plans", 1, "pass"), _record("c2", "admin", "plans", 1, "fail")]
    wh.write_pass("s", "plans", 1, first, {"mode": "plans"})
    wh.write_pass("s", "plans", 2, [_record("c1", "admin", "plans", 2, "pass")], {"mode": "plans"})
    assert wh.passes("s", "plans") == [1, 2]
    assert wh.configs("s") == ["plans"]
    assert [(r.case_id, r.pass_index) for r in wh.read_records("s", "plans")] == [("c1", 1), ("c2", 1), ("c1", 2)]
    # Re-running a pass replaces it: no duplicate records.
    wh.write_pass("s", "plans", 1, [_record("c1", "admin", "plans", 1, "pass")], {"mode": "plans"})
    assert len(wh.read_records("s", "plans")) == 2
    assert wh.read_metas("s", "plans") == [{"mode": "plans"}, {"mode": "plans"}]
    assert not list(tmp_path.rglob(".*.tmp"))


def test_summary_is_sql_over_every_partition(tmp_path: Path):
    wh = Warehouse(tmp_path)
    wh.write_pass("s", "plans", 1, [_record("c1", "admin", "plans", 1, "pass"),
                                    _record("c2", "admin", "plans", 1, "fail")], {})
    wh.write_pass("s", "gpt", 1, [_record("c1", "admin", "gpt", 1, "pass", 0.25),
                                  _record("c2", "admin", "gpt", 1, "pass", 0.5)], {})
    rows = wh.summary("s")
    assert [(r["config"], r["pass_index"], r["runs"], r["passed"], r["execution_passed"], r["cost_usd"])
            for r in rows] == [("gpt", 1, 2, 2, 2, 0.75), ("plans", 1, 2, 1, 1, 0.0)]
    con = wh.connect()
    try:
        (n,) = con.execute("SELECT count(*) FROM case_records WHERE status = 'fail'").fetchone()
    finally:
        con.close()
    assert n == 1


def test_an_empty_warehouse_has_an_empty_view(tmp_path: Path):
    assert Warehouse(tmp_path / "none").summary() == []


# ---------------------------------------------------------------- the spend ledger


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        # (action, cost) -> decision; cap 1.00
        ([("reserve", None)], ["go"]),  # the first case always goes
        ([("reserve", None), ("reserve", None)], ["go", "wait"]),  # nothing known about cost yet
        ([("reserve", None), ("spend", 0.40), ("reserve", None)], ["go", None, "go"]),  # 0.40 + 0.40 <= 1
        ([("reserve", None), ("spend", 0.40), ("reserve", None), ("spend", 0.40), ("reserve", None)],
         ["go", None, "go", None, "stop"]),  # 0.80 + 0.40 > 1, nothing in flight
        ([("reserve", None), ("spend", 0.30), ("reserve", None), ("reserve", None), ("reserve", None)],
         ["go", None, "go", "go", "wait"]),  # 0.30 spent + 2 x 0.30 reserved + 0.30 > 1
    ],
)
def test_ledger_decisions(tmp_path: Path, steps, expected):
    ledger = SpendLedger(tmp_path / "b.jsonl")
    got, last = [], None
    for n, (action, cost) in enumerate(steps):
        if action == "reserve":
            last = f"case{n}"
            got.append(ledger.reserve(last, cap=1.0))
        else:
            ledger.spend(last, cost)
            got.append(None)
    assert got == expected


def test_concurrent_runs_sharing_a_ledger_pass_the_cap_by_at_most_one_case(tmp_path: Path):
    """Four runs in threads, each wanting 20 cases of 0.10-0.13: the total stays under cap + one case."""
    ledger_path = tmp_path / "backfill.jsonl"
    cap, spent, lock = 1.0, [], threading.Lock()

    def one_run(run: int) -> None:
        ledger = SpendLedger(ledger_path)
        for case in range(20):
            entry = f"r{run}c{case}"
            while (decision := ledger.reserve(entry, cap)) == "wait":
                threading.Event().wait(0.005)
            if decision == "stop":
                return
            cost = 0.10 + 0.01 * (case % 4)
            ledger.spend(entry, cost)
            with lock:
                spent.append(cost)

    threads = [threading.Thread(target=one_run, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    total = sum(spent)
    assert SpendLedger(ledger_path).totals()["spent"] == pytest.approx(total)
    assert total <= cap + max(spent)
    assert total + max(spent) > cap * 0.75  # it kept going while there was room


def test_two_mode_full_runs_share_one_budget(tmp_path: Path, chinook_path: Path):
    """Two partitions of one backfill (two run_eval calls) draw on one ledger: together they stop at the cap."""
    from nl2sql_assets.evaluation.running.gold_llm import GoldLLMServer
    from tests.unit.test_runner import PRICE, run_eval, small_cases, small_project

    project = small_project(tmp_path, chinook_path)
    ledger = Warehouse(tmp_path / "warehouse").ledger("backfill-1")
    bus = EventBus()
    usage = {"prompt_tokens": 1000, "completion_tokens": 200}
    with GoldLLMServer(small_cases(chinook_path), bus, usage=usage) as server:
        llm = server.llm_config().model_copy(update={"prices": {"gold-plans": PRICE}})
        cap = 0.05
        first = run_eval(project, mode="full", llm={"a": llm}, bus=bus, max_cost_usd=cap, pass_numbers=[1],
                         budget=ledger)
        second = run_eval(project, mode="full", llm={"a": llm}, bus=bus, max_cost_usd=cap, pass_numbers=[2],
                          budget=ledger)
    costs = [r.cost_usd for rep in (first, second) for b in rep.configs.values() for r in b.results]
    total = first.spent + second.spent
    assert total == pytest.approx(sum(costs))
    assert total <= cap + max(costs)
    assert ledger.totals()["spent"] == pytest.approx(total)
    assert second.stopped == "max_cost"
