"""Check the Chinook suite's hand-written plans: does each plan's SQL return the gold rows?

For every answerable case the plan is rendered with the engine's own SQL generator
(``generate_sql(plan, "sqlite")``), run on Chinook read-only, and compared strictly with the
case's ``rows`` (``compare_results``: same columns in order, numbers within 0.005, row order
only when ``order_matters``). It also checks that the plan reads exactly the case's ``tables``
and names its columns as the gold rows do. One line per case; exit status 1 when any fails.

    python scripts/check_chinook_plans.py [--suite PATH] [--db PATH] [--show-sql]

The database is ``--db``, else ``$NL2SQL_CHINOOK``, else ``../shared/datasets/chinook.sqlite``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from pathlib import Path
from urllib.parse import quote

from nl2sql_assets.engine.sqlgen import generate_sql
from nl2sql_assets.engine.validator import tables_read
from nl2sql_assets.evaluation.evaluator import explain_strict
from nl2sql_assets.evaluation.suite import EvalCase, load_suite
from nl2sql_assets.paths import chinook_suite_path

DEFAULT_DB = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "chinook.sqlite"


def check_case(case: EvalCase, con: sqlite3.Connection) -> tuple[bool, str, str]:
    """(passed, what was found, the plan's SQL) for one answerable case."""
    assert case.plan is not None and case.rows is not None
    sql = generate_sql(case.plan, "sqlite")
    read = tables_read(case.plan)
    if read != set(case.tables):
        return False, f"plan reads {sorted(read)}, the case lists {sorted(case.tables)}", sql
    try:
        cursor = con.execute(sql)
    except sqlite3.Error as exc:
        return False, f"the plan's SQL failed: {exc}", sql
    names = [d[0] for d in cursor.description]
    got = [list(row) for row in cursor.fetchall()]
    gold_names = list(case.rows[0]) if case.rows else []
    gold = [[row[name] for name in gold_names] for row in case.rows]
    verdict = explain_strict(gold, got, case.order_matters)
    if not verdict.passed:
        return False, f"{verdict.reason}: {verdict.message}", sql
    if names != gold_names:
        return False, f"rows match but the columns are named {names}, the gold rows {gold_names}", sql
    return True, f"{len(got)} row(s) match", sql


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=chinook_suite_path())
    parser.add_argument("--db", type=Path, default=Path(os.environ.get("NL2SQL_CHINOOK", DEFAULT_DB)))
    parser.add_argument("--show-sql", action="store_true", help="print each plan's generated SQL")
    args = parser.parse_args(argv)

    if not args.db.is_file():
        print(f"Chinook not found at {args.db}; pass --db or set NL2SQL_CHINOOK", file=sys.stderr)
        return 2
    suite = load_suite(args.suite)
    con = sqlite3.connect(f"file:{quote(str(args.db.resolve()))}?mode=ro", uri=True)
    failed = checked = 0
    try:
        for case in suite.cases:
            if case.sql is None:
                if case.plan is not None:
                    failed += 1
                    print(f"{case.id}  FAIL  a case without sql has a plan")
                continue
            checked += 1
            if case.plan is None:
                failed += 1
                print(f"{case.id}  FAIL  no plan")
                continue
            ok, detail, sql = check_case(case, con)
            failed += not ok
            print(f"{case.id}  {'ok  ' if ok else 'FAIL'}  {detail}")
            if args.show_sql or not ok:
                print("    " + sql)
    finally:
        con.close()
    print(
        f"{checked - failed} of {checked} plans return their gold rows"
        if not failed
        else f"{failed} problem(s) in {checked} answerable cases"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
