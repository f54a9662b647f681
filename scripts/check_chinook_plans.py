"""Check a suite's hand-written plans: does each plan's SQL return the gold rows, and does the
validator refuse exactly the roles the case refuses?

For every answerable case the plan is rendered with the engine's own SQL generator in its
datasource's dialect (``generate_sql(plan, adapter.dialect)``), run read-only through the same
adapter regenerate uses, and compared strictly with the case's ``rows`` (``explain_strict``: same
columns in order, numbers within 0.005, row order only when ``order_matters``). It also checks
that the plan reads exactly the case's ``tables``, no column the case does not list, names its
columns as the gold rows do, and that the validator, under the project's policy, refuses the plan
for exactly the roles whose outcome is ``refused``. One line per case; exit status 1 when any fails.

    python scripts/check_chinook_plans.py [--suite PATH] [--config PATH] [--db PATH] [--show-sql]

The suite defaults to the Chinook suite; ``--suite suites/multidomain.yaml`` checks the three demo
databases. Datasources and the policy come from ``--config`` (default: the checkout's
``nl2sql.yaml``; run ``nl2sql-assets data`` first for the generated databases). Chinook itself is
``--db``, else ``$NL2SQL_CHINOOK``, else the config's path.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from nl2sql_assets.config import DatasourceConfig, PoliciesConfig, ProjectConfig, load_config
from nl2sql_assets.datasources.base import DatasourceAdapter, DatasourceError
from nl2sql_assets.datasources.registry import DatasourceRegistry
from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.engine.result import SECURITY_VIOLATION
from nl2sql_assets.engine.sqlgen import generate_sql
from nl2sql_assets.engine.validator import columns_read, tables_read, validate_plan
from nl2sql_assets.evaluation.judging.comparison import explain_strict
from nl2sql_assets.evaluation.suites import EvalCase, load_suite
from nl2sql_assets.paths import chinook_suite_path

ROOT_CONFIG = Path(__file__).resolve().parents[1] / "nl2sql.yaml"


def refused_roles(case: EvalCase, snapshot: SchemaSnapshot, policies: PoliciesConfig) -> set[str]:
    """The roles of the case whose plan the validator refuses for security."""
    assert case.plan is not None
    datasource = case.datasources[0]
    refused = set()
    for role in case.outcome:
        outcome = validate_plan(case.plan, snapshot, policies.role(role).access(datasource), role=role)
        if outcome.error_code == SECURITY_VIOLATION:
            refused.add(role)
    return refused


def check_case(
    case: EvalCase, adapter: DatasourceAdapter, snapshot: SchemaSnapshot, policies: PoliciesConfig
) -> tuple[bool, str, str]:
    """(passed, what was found, the plan's SQL) for one answerable case."""
    assert case.plan is not None and case.rows is not None
    sql = generate_sql(case.plan, adapter.dialect)  # type: ignore[arg-type]
    read = tables_read(case.plan, snapshot)
    if read != set(case.tables):
        return False, f"plan reads {sorted(read)}, the case lists {sorted(case.tables)}", sql
    try:
        extra = columns_read(case.plan, snapshot) - set(case.columns)
    except ValueError as exc:
        return False, f"the plan does not resolve: {exc}", sql
    if extra:
        return False, f"plan reads columns the case does not list: {sorted(extra)}", sql
    expected = {role for role, outcome in case.outcome.items() if outcome == "refused"}
    refused = refused_roles(case, snapshot, policies)
    if refused != expected:
        return False, f"the validator refuses {sorted(refused)}, the case refuses {sorted(expected)}", sql
    try:
        result = adapter.execute(sql)
    except DatasourceError as exc:
        return False, f"the plan's SQL failed: {exc}", sql
    gold_names = list(case.rows[0]) if case.rows else []
    gold = [[row[name] for name in gold_names] for row in case.rows]
    verdict = explain_strict(gold, result.rows, case.order_matters)
    if not verdict.passed:
        return False, f"{verdict.reason}: {verdict.message}", sql
    if result.columns != gold_names:
        return False, f"rows match but the columns are named {result.columns}, the gold rows {gold_names}", sql
    return True, f"{len(result.rows)} row(s) match", sql


def datasources(config: ProjectConfig, chinook: Path | None) -> list[DatasourceConfig]:
    """The project's datasources, with Chinook's path replaced when one is given."""
    out = []
    for ds in config.datasources:
        if ds.id == "chinook" and chinook is not None:
            ds = ds.model_copy(update={"path": chinook.resolve()})
        out.append(ds)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=chinook_suite_path())
    parser.add_argument("--config", type=Path, default=ROOT_CONFIG, help="nl2sql.yaml naming the datasources")
    parser.add_argument("--db", type=Path, default=None, help="the Chinook file (default: $NL2SQL_CHINOOK)")
    parser.add_argument("--show-sql", action="store_true", help="print each plan's generated SQL")
    args = parser.parse_args(argv)

    config = load_config(args.config)
    chinook = args.db or (Path(os.environ["NL2SQL_CHINOOK"]) if os.environ.get("NL2SQL_CHINOOK") else None)
    configured = datasources(config, chinook)
    suite = load_suite(args.suite)
    needed = {ds for case in suite.cases if case.answerable for ds in case.datasources}
    missing = [ds for ds in configured if ds.id in needed and not Path(ds.path).is_file()]
    if missing:
        for ds in missing:
            hint = "pass --db or set NL2SQL_CHINOOK" if ds.id == "chinook" else "run `nl2sql-assets data`"
            print(f"datasource {ds.id!r} not found at {ds.path}; {hint}", file=sys.stderr)
        return 2
    unknown = sorted(needed - {ds.id for ds in configured})
    if unknown:
        print(f"{args.suite}: datasources {unknown} are not in {args.config}", file=sys.stderr)
        return 2

    failed = checked = 0
    with DatasourceRegistry(configured) as registry:
        for case in suite.cases:
            if case.kind == "probe":
                continue  # a policy probe has no plan: its SQL goes to the policy check alone
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
            datasource = case.datasources[0]
            ok, detail, sql = check_case(
                case, registry.get(datasource), registry.snapshot(datasource), config.policies
            )
            failed += not ok
            print(f"{case.id}  {'ok  ' if ok else 'FAIL'}  {detail}")
            if args.show_sql or not ok:
                print("    " + sql)
    print(
        f"{checked - failed} of {checked} plans return their gold rows"
        if not failed
        else f"{failed} problem(s) in {checked} answerable cases"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
