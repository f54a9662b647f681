"""The spend ledger in Postgres: the file ledger's decisions, and a cap that holds for runs in
separate processes (as on separate machines) drawing on one budget."""

from __future__ import annotations

import multiprocessing
import time
import uuid

import pytest

from nl2sql_assets.evaluation.history.pg_ledger import PgSpendLedger
from tests.cluster.conftest import dsn

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


def _one_worker(database: str, budget: str, worker: int, cap: float, out: multiprocessing.Queue) -> None:
    ledger = PgSpendLedger(dsn(database), budget, schema="ledger_test")
    spent = []
    for case in range(30):
        entry = f"w{worker}c{case}"
        while (decision := ledger.reserve(entry, cap)) == "wait":
            time.sleep(0.01)
        if decision == "stop":
            break
        cost = 0.10 + 0.01 * (case % 4)
        time.sleep(0.005)  # the model call
        ledger.spend(entry, cost, worker=worker)
        spent.append(cost)
    out.put((worker, spent))


def test_four_processes_pass_the_cap_by_at_most_one_case(pg_database: str):
    budget, cap = f"backfill-{uuid.uuid4().hex}", 1.0
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_one_worker, args=(pg_database, budget, w, cap, out)) for w in range(4)]
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
