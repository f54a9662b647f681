"""The spend ledger in Postgres: the file ledger's decisions, and a cap that holds for runs in
separate processes (as on separate machines) drawing on one budget."""

from __future__ import annotations

import multiprocessing
import time
import uuid
from typing import Any

import pytest

from nl2sql_assets.evaluation.history.pg_ledger import PgSpendLedger
from tests.cluster.conftest import dsn
from tests.unit.test_spend_ledger import LEDGER_STEPS, run_steps

# (action, cost) -> decision under a cap of 1.00: the file ledger's table (tests/unit/test_warehouse.py).
DECISIONS = [
    ([("reserve", None)], ["go"]),
    ([("reserve", None), ("reserve", None)], ["go", "wait"]),
    ([("reserve", None), ("spend", 0.40), ("reserve", None)], ["go", None, "go"]),
    ([("reserve", None), ("spend", 0.40), ("reserve", None), ("spend", 0.40), ("reserve", None)],
     ["go", None, "go", None, "stop"]),
    ([("reserve", None), ("spend", 0.30), ("reserve", None), ("reserve", None), ("reserve", None)],
     ["go", None, "go", "go", "wait"]),
]


@pytest.mark.parametrize(("steps", "expected"), DECISIONS)
def test_same_decisions_as_the_file_ledger(pg_database: str, steps, expected):
    ledger = PgSpendLedger(dsn(pg_database), f"b-{uuid.uuid4().hex}", schema="ledger_test")
    got, last = [], None
    for n, (action, cost) in enumerate(steps):
        if action == "reserve":
            last = f"case{n}"
            got.append(ledger.reserve(last, cap=1.0))
        else:
            ledger.spend(last, cost)
            got.append(None)
    assert got == expected


def _one_worker(database: str, budget: str, worker: int, cap: float, out: multiprocessing.Queue,
                start: Any) -> None:
    ledger = PgSpendLedger(dsn(database), budget, schema="ledger_test")
    start.wait(timeout=60)  # every worker connected before any spends: the budget is contended from the start
    spent = []
    for case in range(30):
        entry = f"w{worker}c{case}"
        while (decision := ledger.reserve(entry, cap)) == "wait":
            time.sleep(0.01)
        if decision == "stop":
            break
        cost = 0.10 + 0.01 * (case % 4)
        time.sleep(0.05)  # the model call: long enough for the waiting workers to come in
        ledger.spend(entry, cost, worker=worker)
        spent.append(cost)
    out.put((worker, spent))


def test_four_processes_pass_the_cap_by_at_most_one_case(pg_database: str):
    budget, cap = f"backfill-{uuid.uuid4().hex}", 1.0
    ctx = multiprocessing.get_context("spawn")
    out, start = ctx.Queue(), ctx.Barrier(4)
    procs = [ctx.Process(target=_one_worker, args=(pg_database, budget, w, cap, out, start)) for w in range(4)]
    for p in procs:
        p.start()
    by_worker = dict(out.get(timeout=120) for _ in procs)
    spent = [c for costs in by_worker.values() for c in costs]
    for p in procs:
        p.join(timeout=30)
    total = sum(spent)
    assert PgSpendLedger(dsn(pg_database), budget, schema="ledger_test").totals()["spent"] == pytest.approx(total)
    assert total <= cap + max(spent)  # the rule lets one case in flight pass the cap, never more
    assert total + max(spent) > cap * 0.75  # and it kept going while there was room
    assert sum(1 for costs in by_worker.values() if costs) >= 2  # the budget really was shared


def test_a_dead_workers_reservation_counts_as_spent_then_stops_blocking(pg_database: str):
    ledger = PgSpendLedger(dsn(pg_database), f"b-{uuid.uuid4().hex}", schema="ledger_test", stale_after_s=0.5)
    assert ledger.reserve("a", cap=1.0) == "go"
    ledger.spend("a", 0.30)
    assert ledger.reserve("dead", cap=1.0) == "go"  # its worker dies: never settled
    assert ledger.reserve("b", cap=1.0) == "go"  # 0.30 + 0.30 + 0.30 <= 1
    assert ledger.reserve("c", cap=1.0) == "wait"  # 0.30 + 0.60 reserved + 0.30 > 1, two in flight
    ledger.spend("b", 0.30)
    time.sleep(0.6)
    totals = ledger.totals()
    assert totals["spent"] == pytest.approx(0.90)  # the dead reservation counts at its 0.30
    assert totals["open"] == 0
    assert ledger.reserve("c", cap=1.0) == "stop"  # nothing in flight, no room: stop, not wait forever


def test_a_postgres_that_is_gone_fails_at_once_naming_postgres(pg_database: str):
    from nl2sql_assets.evaluation.history.pg import PostgresUnavailable
    from tests.cluster.conftest import PgPort

    port = PgPort()  # a port nothing listens on: Postgres stopped, as its clients see it
    started = time.monotonic()
    with pytest.raises(PostgresUnavailable, match=rf"PostgreSQL at 127\.0\.0\.1:{port.port}/{pg_database} .*unavailable"):
        PgSpendLedger(dsn(pg_database, port.port), "b", schema="ledger_test")
    assert time.monotonic() - started < 5


def test_a_connection_dropped_mid_transaction_is_raised_as_postgres_unavailable(pg_database: str):
    from nl2sql_assets.evaluation.history.pg import PostgresUnavailable, pg_transaction
    from tests.cluster.conftest import PgPort

    port = PgPort().start()
    try:
        with pytest.raises(PostgresUnavailable, match="re-execute the run from failure"):  # noqa: SIM117
            with pg_transaction(dsn(pg_database, port.port)) as cur:
                cur.execute("SELECT 1")
                port.stop()  # the server restarts between two statements
                cur.execute("SELECT 2")
    finally:
        port.stop()


@pytest.mark.parametrize(("name", "steps", "expected"), LEDGER_STEPS, ids=[s[0] for s in LEDGER_STEPS])
def test_the_per_call_rules_match_the_file_ledger(pg_database: str, name, steps, expected):
    """``running.spend``'s table of steps (tests/unit/test_spend_ledger.py): cases and model calls."""
    ledger = PgSpendLedger(dsn(pg_database), f"b-{uuid.uuid4().hex}", schema="ledger_test")
    assert run_steps(ledger, steps) == expected, name


def test_runs_on_the_postgres_ledger_stop_at_a_call_once_the_cap_could_pass(pg_database: str, tmp_path,
                                                                             chinook_path):
    """Two runs at once drawing on one Postgres budget, against a provider whose cost grows tenfold
    per case run: no call starts once the cap could pass, over both runs."""
    import threading

    from nl2sql_assets import Project
    from nl2sql_assets.engine.events import EventBus
    from nl2sql_assets.evaluation.running import RunRequest
    from tests.integration.test_cap_per_call import CAP, Growing
    from tests.unit.test_runner import small_project

    growing = Growing(chinook_path)
    budget = f"backfill-{uuid.uuid4().hex}"
    stopped = {}

    def one(n: int) -> None:
        folder = tmp_path / f"run{n}"
        folder.mkdir()
        config = small_project(folder, chinook_path)
        config.settings.max_concurrency = 4
        bus = EventBus()
        llm = growing(bus)
        with Project(config, bus=bus) as project:
            runs = project.evals.run_cases(RunRequest(mode="full", llm={"default": llm}, max_cost_usd=CAP,
                                                      curated=False),
                                           budget=PgSpendLedger(dsn(pg_database), budget, schema="ledger_test"))
        stopped[n] = runs.meta.stopped

    try:
        threads = [threading.Thread(target=one, args=(n,)) for n in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        totals = PgSpendLedger(dsn(pg_database), budget, schema="ledger_test").totals()
        assert stopped == {1: "max_cost", 2: "max_cost"}
        assert totals["open"] == 0 and totals["spent"] <= CAP + 2 * 4 * growing.dearest_call()
        assert sum(1 for s in growing.servers for _ in s.calls_billed) > 2  # both runs made calls
    finally:
        for server in growing.servers:
            server.stop()
