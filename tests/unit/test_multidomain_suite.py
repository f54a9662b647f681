"""The multi-domain suite's data checks, key-free, on the suite file and the demo's own databases.

What a reviewer would check by hand, case by case: the counts per domain and category, the
outcomes the demo policy gives each role for exactly the tables and columns the SQL reads, the
rows the SQL returns today, and each plan returning the same rows and being refused for the same
roles. The policy probes at the end of the suite are checked against an independent reading of
the demo policy (each breaks the one rule it names, each control none) and against the real
final-SQL check; the demo policy's row budgets, join rules and function lists change the verdict
of no case in any shipped suite. Follow-up cases are checked like the others, and their earlier
turns too: each turn's SQL runs, and its plan returns the same rows.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
import sqlglot
from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope

from nl2sql_assets.config import PoliciesConfig, load_config
from nl2sql_assets.datasources.base import DatasourceAdapter, ReadOnlyViolation
from nl2sql_assets.datasources.guard import check_read_only
from nl2sql_assets.datasources.registry import DatasourceRegistry
from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.demo import DEMO_POLICIES
from nl2sql_assets.engine.plan import PlanModel
from nl2sql_assets.engine.result import SECURITY_VIOLATION
from nl2sql_assets.engine.sqlgen import generate_sql
from nl2sql_assets.engine.validator import columns_read, tables_read, validate_plan
from nl2sql_assets.evaluation.suites import EvalCase, EvalSuite, dump_suite, load_suite
from nl2sql_assets.paths import packaged_suites_dir

# ---------------------------------------------------------------- the rules of the suite

DOMAINS = ("chinook", "support", "webanalytics")
DIALECTS = {"chinook": "sqlite", "support": "duckdb", "webanalytics": "duckdb"}
CATEGORIES = {"single-table": 10, "multi-table": 8, "time": 6, "metric": 4, "follow-up": 4}
ROLES = ("admin", "analyst", "viewer")
DESCRIPTIVE_TAGS = {
    "filter", "join", "anti-join", "aggregation", "having", "order-limit", "ties", "date", "rate",
    "cohort", "edge-case",
}  # fmt: skip
POLICY_TAGS = {"rbac-denial", "column-scope"}
RULES = (
    "table_scope", "column_scope", "read_only", "system_catalog", "dangerous_function", "row_budget",
    "forbidden_join", "cte_shadowing", "alias_shadowing",
)  # fmt: skip
SCOPE_RULES = {"table_scope", "column_scope"}
SHADOWING_RULES = {"cte_shadowing", "alias_shadowing"}
TOLERANCE = 0.005


def suite_path() -> Path:
    return packaged_suites_dir() / "multidomain.yaml"


# ---------------------------------------------------------------- the demo policy's shape


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ForbiddenJoin(_Strict):
    datasource: Literal["chinook", "support", "webanalytics"]
    tables: list[str] = Field(min_length=2, max_length=2)
    roles: list[Literal["admin", "analyst", "viewer"]] = Field(min_length=1)


class ProposedPolicy(_Strict):
    row_budgets: dict[Literal["admin", "analyst", "viewer"], int | None]
    forbidden_joins: list[ForbiddenJoin]
    dangerous_functions: dict[Literal["sqlite", "duckdb"], list[str]]
    system_catalogs: dict[Literal["sqlite", "duckdb"], list[str]]


# The system catalogs, per dialect, that the independent reading below treats as one rule.
SYSTEM_CATALOGS = {"sqlite": ["sqlite_master", "sqlite_schema", "sqlite_temp_master", "pragma_*"],
                   "duckdb": ["information_schema", "pg_catalog", "duckdb_*"]}


def demo_rules() -> ProposedPolicy:
    """The demo policy's row budgets, forbidden joins and dangerous functions, read from
    DEMO_POLICIES (the shape the pending file once proposed them in)."""
    roles = DEMO_POLICIES["roles"]
    joins: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for role, policy in roles.items():
        for ds, access in policy["datasources"].items():
            for group in access.get("forbidden_joins", []):
                joins.setdefault((ds, tuple(group)), []).append(role)
    return ProposedPolicy(
        row_budgets={role: policy.get("row_budget") for role, policy in roles.items()},
        forbidden_joins=[ForbiddenJoin(datasource=ds, tables=list(t), roles=r) for (ds, t), r in joins.items()],
        dangerous_functions=DEMO_POLICIES["dangerous_functions"],
        system_catalogs=SYSTEM_CATALOGS,
    )

# ---------------------------------------------------------------- reading SQL the way the database does


def normalised_question(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.casefold()).strip()


class Reads(BaseModel):
    """What a query reads, resolved by scope: real tables (not CTEs), Table.Column pairs, and the
    real tables that are sources of each SELECT (one FROM with its joins)."""

    tables: set[str]
    columns: set[str]
    scopes: list[set[str]]


def reads(sql: str | exp.Expression, snapshot: SchemaSnapshot, dialect: str) -> Reads:
    tree = sqlglot.parse_one(sql, read=dialect) if isinstance(sql, str) else sql.copy()
    schema = {t.name: {c.name: c.type or "TEXT" for c in t.columns} for t in snapshot.tables}
    qualified = qualify(tree, schema=schema, dialect=dialect)
    tables: set[str] = set()
    columns: set[str] = set()
    scopes: list[set[str]] = []
    for scope in traverse_scope(qualified):
        here = set()
        for source in scope.sources.values():
            if isinstance(source, exp.Table):
                info = snapshot.table(source.name)
                assert info is not None, source.name
                here.add(info.name)
        tables |= here
        scopes.append(here)
        for column in scope.columns:
            source = scope.sources.get(column.table)
            if isinstance(source, exp.Table):
                info = snapshot.table(source.name)
                assert info is not None
                col = info.column(column.name)
                assert col is not None, (source.name, column.name)
                columns.add(f"{info.name}.{col.name}")
    return Reads(tables=tables, columns=columns, scopes=scopes)


def scope_rules(found: Reads, datasource: str, role: str, policies: PoliciesConfig) -> set[str]:
    """table_scope when a table is out of the role's scope; column_scope when a column of a table
    the role may read is not."""
    access = policies.role(role).access(datasource)
    broken = set()
    if any(not access.allows_table(t) for t in found.tables):
        broken.add("table_scope")
    for name in found.columns:
        table, column = name.split(".")
        if access.allows_table(table) and not access.allows_column(table, column):
            broken.add("column_scope")
    return broken


def outcome_by_policy(found: Reads, datasource: str, role: str, policies: PoliciesConfig) -> str:
    return "refused" if scope_rules(found, datasource, role, policies) else "allowed"


def _names_called(tree: exp.Expression) -> tuple[set[str], set[str]]:
    """(functions called, tables named with their schema) in a statement, lower case."""
    functions: set[str] = set()
    tables: set[str] = set()
    for node in tree.walk():
        if isinstance(node, exp.Anonymous):
            functions.add(str(node.name).lower())
        elif isinstance(node, exp.Func):
            functions.add(node.sql_name().lower())
        if isinstance(node, exp.Table) and node.name:
            tables.add(node.name.lower())
            if node.db:
                tables.add(node.db.lower())
    return functions, tables


def _denied(found: Reads, datasource: str, role: str, policies: PoliciesConfig) -> bool:
    return bool(scope_rules(found, datasource, role, policies))


def rules_broken(
    sql: str, datasource: str, role: str, snapshot: SchemaSnapshot, policies: PoliciesConfig, proposed: ProposedPolicy
) -> set[str]:
    """Every rule of the demo policy and of the proposed additions that ``sql`` breaks for ``role``."""
    dialect = DIALECTS[datasource]
    try:
        check_read_only(sql, dialect)
    except ReadOnlyViolation:
        return {"read_only"}
    tree = sqlglot.parse_one(sql, read=dialect)
    functions, named = _names_called(tree)
    broken = set()
    if any(fnmatch.fnmatch(name, pattern) for name in functions | named for pattern in proposed.system_catalogs[dialect]):
        broken.add("system_catalog")
    if functions & set(proposed.dangerous_functions[dialect]):
        broken.add("dangerous_function")
    if broken:
        return broken  # no table of the datasource to resolve
    found = reads(tree, snapshot, dialect)
    broken |= scope_rules(found, datasource, role, policies)
    limit = tree.args.get("limit")
    budget = proposed.row_budgets[role]
    if limit is not None and budget is not None and int(limit.expression.name) > budget:
        broken.add("row_budget")
    for rule in proposed.forbidden_joins:
        applies = rule.datasource == datasource and role in rule.roles
        if applies and any(set(rule.tables) <= scope for scope in found.scopes):
            broken.add("forbidden_join")
    real_tables = {t.name.lower() for t in snapshot.tables}
    for cte in tree.find_all(exp.CTE):
        if cte.alias_or_name.lower() in real_tables and _denied(reads(cte.this, snapshot, dialect), datasource, role, policies):
            broken.add("cte_shadowing")
    access = policies.role(role).access(datasource)
    for table in tree.find_all(exp.Table):
        alias = table.alias.lower()
        if alias in real_tables and alias != table.name.lower() and not access.allows_table(table.name):
            broken.add("alias_shadowing")
    # A select alias that names a column the role may read, of a table the query reads, over a
    # column the role may not read.
    readable = {
        c.name.lower()
        for t in found.tables
        if (info := snapshot.table(t)) is not None
        for c in info.columns
        if access.allows_column(info.name, c.name)
    }
    schema = {t.name: {c.name: c.type or "TEXT" for c in t.columns} for t in snapshot.tables}
    outermost = list(traverse_scope(qualify(tree.copy(), schema=schema, dialect=dialect)))[-1]
    for item in outermost.expression.expressions:
        if isinstance(item, exp.Alias) and item.alias.lower() in readable:
            for column in item.find_all(exp.Column):
                source = outermost.sources.get(column.table)
                if isinstance(source, exp.Table) and not access.allows_column(source.name, column.name):
                    broken.add("alias_shadowing")
    return broken


# ---------------------------------------------------------------- comparing rows


def _cell_eq(a: Any, b: Any) -> bool:
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return abs(a - b) <= TOLERANCE + 1e-9
    return type(a) is type(b) and a == b


def _key(row: list[Any]) -> list[str]:
    return [f"n{round(v, 2):.2f}" if isinstance(v, int | float) else f"{type(v).__name__}{v}" for v in row]


def rows_match(gold: list[list[Any]], got: list[list[Any]], order_matters: bool) -> bool:
    """Strict: same column count, numbers within 0.005, order only when it matters."""
    if len(gold) != len(got) or any(len(g) != len(r) for g, r in zip(gold, got, strict=True)):
        return False
    if not order_matters:
        gold, got = sorted(gold, key=_key), sorted(got, key=_key)
    return all(_cell_eq(a, b) for g, r in zip(gold, got, strict=True) for a, b in zip(g, r, strict=True))


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def whole() -> EvalSuite:
    return load_suite(suite_path())


@pytest.fixture(scope="module")
def suite(whole: EvalSuite) -> EvalSuite:
    """The suite's query cases; its policy probes (at the end) are checked apart."""
    return whole.model_copy(update={"cases": [c for c in whole.cases if c.kind != "probe"]})


@pytest.fixture(scope="module")
def probes(whole: EvalSuite) -> list[EvalCase]:
    return [c for c in whole.cases if c.kind == "probe"]


@pytest.fixture(scope="module")
def proposed() -> ProposedPolicy:
    return demo_rules()


@pytest.fixture(scope="module")
def policies() -> PoliciesConfig:
    return PoliciesConfig.model_validate(DEMO_POLICIES)


@pytest.fixture(scope="module")
def registry(demo_template: Path) -> Iterator[DatasourceRegistry]:
    with DatasourceRegistry(load_config(demo_template / "nl2sql.yaml")) as reg:
        yield reg


@pytest.fixture(scope="module")
def snapshots(registry: DatasourceRegistry) -> dict[str, SchemaSnapshot]:
    return {ds: registry.snapshot(ds) for ds in DOMAINS}


def shipped_suites() -> list[EvalSuite]:
    return [load_suite(path) for path in sorted(packaged_suites_dir().glob("*.yaml"))]


def run(adapter: DatasourceAdapter, sql: str) -> tuple[list[str], list[list[Any]]]:
    result = adapter.execute(sql)
    assert not result.truncated
    return result.columns, result.rows


# ---------------------------------------------------------------- shape of the suite


def test_the_suite_loads_and_is_in_the_canonical_layout(whole: EvalSuite) -> None:
    assert suite_path().read_text(encoding="utf-8") == dump_suite(whole)


def test_counts_per_domain_and_category(suite: EvalSuite) -> None:
    counts = Counter((case.datasources[0], case.tags[0]) for case in suite.cases)
    assert counts == Counter({(ds, cat): n for ds in DOMAINS for cat, n in CATEGORIES.items()})
    assert len(suite.cases) == 96
    expected_ids = ([f"md_{ds}_{n:02d}" for ds in DOMAINS for n in range(1, 29)]
                    + [f"md_{ds}_fu_{n:02d}" for ds in DOMAINS for n in range(1, 5)])
    assert [c.id for c in suite.cases] == expected_ids


def test_every_case_is_an_approved_hand_written_answer_for_all_three_roles(suite: EvalSuite) -> None:
    for case in suite.cases:
        assert (case.status, case.origin, case.kind) == ("approved", "hand", "answer"), case.id
        assert case.difficulty in ("easy", "medium", "hard"), case.id
        assert len(case.datasources) == 1 and case.datasources[0] in DOMAINS, case.id
        assert case.tags[0] in CATEGORIES and case.tags[1] == case.datasources[0], case.id
        assert tuple(case.outcome) == ROLES, case.id
        assert set(case.outcome.values()) <= {"allowed", "refused"}, case.id
        assert "allowed" in case.outcome.values(), case.id  # someone can answer every case
        assert case.sql and case.rows and case.plan and case.tables and case.columns, case.id
        assert case.alt_sql == [] and case.paraphrase_group is None, case.id


def test_tags_come_from_the_fixed_list(suite: EvalSuite) -> None:
    used: Counter[str] = Counter()
    for case in suite.cases:
        rest = case.tags[2:]
        assert len(rest) == len(set(rest)), case.id
        assert set(rest) <= DESCRIPTIVE_TAGS | POLICY_TAGS, (case.id, set(rest) - DESCRIPTIVE_TAGS - POLICY_TAGS)
        used.update(rest)
    assert {tag: used[tag] for tag in DESCRIPTIVE_TAGS if used[tag] < 2} == {}


def test_no_question_is_asked_twice_here_or_in_another_shipped_suite(suite: EvalSuite) -> None:
    # The routing suite repeats the Chinook suite's questions on purpose; this suite repeats none.
    ours = Counter(normalised_question(c.question) for c in suite.cases)
    assert [q for q, n in ours.items() if n > 1] == []
    others = {
        normalised_question(c.question): f"{s.name}:{c.id}"
        for s in shipped_suites()
        if s.name != "multidomain"
        for c in s.cases
    }
    assert {"chinook", "routing"} <= {s.name for s in shipped_suites()}
    assert [(c.id, others[q]) for c in suite.cases if (q := normalised_question(c.question)) in others] == []


def test_the_header_says_how_to_run_regenerate_and_where_the_rest_waits(suite: EvalSuite) -> None:
    header = suite.header
    assert "nl2sql-assets eval regenerate suites/multidomain.yaml --allow-packaged" in header
    assert "nl2sql-assets eval run --mode plans --suite suites/multidomain.yaml" in header
    assert "follow-up" in header and "multidomain_pending" not in header
    named = set(re.findall(r"\bmd_\w+_\d\d\b", header))
    assert named and named <= {c.id for c in suite.cases}


# ---------------------------------------------------------------- SQL, policy and rows


def test_tables_and_columns_are_exactly_what_the_sql_reads(
    suite: EvalSuite, snapshots: dict[str, SchemaSnapshot]
) -> None:
    for case in suite.cases:
        ds = case.datasources[0]
        assert case.sql is not None
        found = reads(case.sql, snapshots[ds], DIALECTS[ds])
        assert found.tables == set(case.tables) and len(case.tables) == len(set(case.tables)), case.id
        assert found.columns == set(case.columns), (case.id, found.columns ^ set(case.columns))


def test_outcomes_follow_the_demo_policy(
    suite: EvalSuite, snapshots: dict[str, SchemaSnapshot], policies: PoliciesConfig
) -> None:
    for case in suite.cases:
        ds = case.datasources[0]
        assert case.sql is not None
        found = reads(case.sql, snapshots[ds], DIALECTS[ds])
        for role in ROLES:
            assert case.outcome[role] == outcome_by_policy(found, ds, role, policies), (case.id, role)


def test_policy_tags_say_who_is_refused_and_whether_by_a_column_rule_alone(
    suite: EvalSuite, policies: PoliciesConfig
) -> None:
    for case in suite.cases:
        refused = [role for role in ROLES if case.outcome[role] == "refused"]
        assert ("rbac-denial" in case.tags) == bool(refused), case.id
        by_column = any(
            all(policies.role(role).access(case.datasources[0]).allows_table(t) for t in case.tables)
            for role in refused
        )
        assert ("column-scope" in case.tags) == by_column, case.id


def test_every_domain_exercises_refusals_including_column_rules(suite: EvalSuite) -> None:
    for ds in DOMAINS:
        cases = [c for c in suite.cases if c.datasources[0] == ds]
        assert sum("refused" in c.outcome.values() for c in cases) >= 8, ds
        assert sum(c.outcome == dict.fromkeys(ROLES, "allowed") for c in cases) >= 4, ds
    by_tag = {ds: [c for c in suite.cases if c.datasources[0] == ds and "column-scope" in c.tags] for ds in DOMAINS}
    assert by_tag["chinook"] == []  # the demo policy has no column rule on Chinook
    assert len(by_tag["support"]) >= 4 and len(by_tag["webanalytics"]) >= 8
    assert any(c.outcome["analyst"] == "refused" for c in by_tag["support"])  # ticket_messages.body
    assert sum(c.outcome["analyst"] == "refused" for c in suite.cases if c.datasources[0] == "chinook") >= 2


def test_rows_are_what_the_sql_returns_today(suite: EvalSuite, registry: DatasourceRegistry) -> None:
    for case in suite.cases:
        assert case.sql is not None
        names, rows = run(registry.get(case.datasources[0]), case.sql)
        assert len(names) == len(set(names)), (case.id, "give every output column a distinct alias")
        assert [dict(zip(names, row, strict=True)) for row in rows] == case.rows, (
            case.id,
            "drift: run regenerate and review the diff",
        )
        assert 1 <= len(rows) <= 25, case.id


def test_money_and_rates_are_rounded(suite: EvalSuite) -> None:
    for case in suite.cases:
        for row in case.rows or []:
            for value in row.values():
                if isinstance(value, float):
                    assert round(value, 2) == value, (case.id, value)


def test_order_matters_only_for_rankings_whose_measure_never_ties(suite: EvalSuite) -> None:
    for case in suite.cases:
        assert case.sql is not None and case.rows
        tree = sqlglot.parse_one(case.sql, read=DIALECTS[case.datasources[0]])
        order = tree.args.get("order")
        if case.order_matters:
            assert order is not None and tree.args.get("limit") is not None, case.id
            assert "ties" not in case.tags, case.id
            first = order.expressions[0]
            column = first.this.alias_or_name
            if column in case.rows[0]:
                values = [row[column] for row in case.rows]
                assert len(set(values)) == len(values), (case.id, "the measure ties: compare as a set")
        if order is not None and len(case.rows) > 1:
            # the last ORDER BY key breaks ties: an id or a name, never the measure alone
            last = order.expressions[-1].this.alias_or_name.lower()
            assert last.endswith("id") or last in {
                "name", "title", "path", "team", "category", "plan", "priority", "country", "kind",
                "device_type", "medium", "source", "browser", "subject", "billingcity", "unitprice",
                "birthdate", "hired_at", "converted_at", "opened_month", "sale_month", "signup_month",
                "signup_year", "sent_year", "sender", "visit_year", "purchase_year", "invoice_year",
                "first_year", "visitor", "invoice_month", "opened_year", "billingcountry",
            }, (case.id, last)  # fmt: skip


# ---------------------------------------------------------------- plans


def test_each_plan_reads_exactly_the_tables_and_only_listed_columns(
    suite: EvalSuite, snapshots: dict[str, SchemaSnapshot]
) -> None:
    for case in suite.cases:
        assert isinstance(case.plan, PlanModel), case.id
        PlanModel.model_validate(case.plan.to_data())  # written as data, it reads back as a plan
        snapshot = snapshots[case.datasources[0]]
        assert tables_read(case.plan, snapshot) == set(case.tables), case.id
        assert columns_read(case.plan, snapshot) <= set(case.columns), case.id
        assert case.rows
        assert case.plan.output_names() == list(case.rows[0]), case.id


def test_the_validator_refuses_each_plan_for_exactly_the_refused_roles(
    suite: EvalSuite, snapshots: dict[str, SchemaSnapshot], policies: PoliciesConfig
) -> None:
    for case in suite.cases:
        assert case.plan is not None
        ds = case.datasources[0]
        for role in ROLES:
            verdict = validate_plan(case.plan, snapshots[ds], policies.role(role).access(ds), role=role)
            got = "refused" if verdict.error_code == SECURITY_VIOLATION else "allowed"
            assert verdict.ok or verdict.error_code == SECURITY_VIOLATION, (case.id, verdict.message)
            assert got == case.outcome[role], (case.id, role)


def test_each_plan_returns_the_gold_rows(suite: EvalSuite, registry: DatasourceRegistry) -> None:
    failures = []
    for case in suite.cases:
        assert case.plan is not None and case.rows is not None
        adapter = registry.get(case.datasources[0])
        _, got = run(adapter, generate_sql(case.plan, adapter.dialect))  # type: ignore[arg-type]
        gold = [list(row.values()) for row in case.rows]
        if not rows_match(gold, got, case.order_matters):
            failures.append(case.id)
    assert failures == []


def _check_plans(config: Path, suite: Path) -> subprocess.CompletedProcess[str]:
    script = Path(__file__).resolve().parents[2] / "scripts" / "check_chinook_plans.py"
    env = {k: v for k, v in os.environ.items() if k != "NL2SQL_CHINOOK"}
    return subprocess.run(
        [sys.executable, str(script), "--suite", str(suite), "--config", str(config)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip


def test_the_plan_check_script_covers_every_domain_and_names_a_broken_plan(
    demo_template: Path, suite: EvalSuite, tmp_path: Path
) -> None:
    done = _check_plans(demo_template / "nl2sql.yaml", suite_path())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "96 of 96 plans return their gold rows" in done.stdout

    broken = suite.model_copy(deep=True)
    case = broken.case("md_support_06")  # five most common subjects: ask the plan for four
    assert case.plan is not None
    case.plan = case.plan.model_copy(update={"limit": 4})
    copy = tmp_path / "multidomain.yaml"
    copy.write_text(dump_suite(broken, header=suite.header), encoding="utf-8")
    done = _check_plans(demo_template / "nl2sql.yaml", copy)
    assert done.returncode == 1
    assert re.search(r"^md_support_06  FAIL  ", done.stdout, flags=re.MULTILINE), done.stdout
    assert "1 problem(s) in 96 answerable cases" in done.stdout


# ---------------------------------------------------------------- the policy probes


def test_each_domain_has_eight_probes_over_eight_attacks_and_two_controls(
    whole: EvalSuite, probes: list[EvalCase]
) -> None:
    assert [c.kind for c in whole.cases] == ["answer"] * 96 + ["probe"] * 30  # the probes come last
    for ds in DOMAINS:
        mine = [c for c in probes if c.datasources[0] == ds]
        denies = [c for c in mine if c.tags[0] == "policy-rejection"]
        controls = [c for c in mine if c.tags[0] == "policy-control"]
        assert len(denies) == 8 and len(controls) == 2 and len(mine) == 10, ds
        assert [c.id for c in mine] == [f"md_{ds}_probe_{n:02d}" for n in range(1, 9)] + [
            f"md_{ds}_control_{n:02d}" for n in (1, 2)]
        assert len({c.tags[2] for c in denies}) == 8, (ds, "spread the probes over the attacks")
        for case in mine:
            assert case.status == "approved" and case.origin == "hand" and case.tags[1] == ds, case.id
            assert len(case.outcome) == 1, case.id
        assert all(set(c.outcome.values()) == {"refused"} and c.rule is not None for c in denies), ds
        assert all(set(c.outcome.values()) == {"allowed"} and c.rule is None for c in controls), ds
        for case in denies:  # the attack is the rule, except shadowing, which scope resolution catches
            attack = case.tags[2].replace("-", "_")
            assert case.rule == (attack if attack not in SHADOWING_RULES else case.rule), case.id
            assert attack not in SHADOWING_RULES or case.rule in SCOPE_RULES, case.id
    attacks = Counter(c.tags[2].replace("-", "_") for c in probes if c.tags[0] == "policy-rejection")
    assert set(attacks) == set(RULES)
    seen = {normalised_question(c.question) for s in shipped_suites() for c in s.cases if c.kind != "probe"}
    assert not seen & {normalised_question(c.question) for c in probes}


def test_each_probe_breaks_the_rule_it_names_and_each_control_breaks_none(
    probes: list[EvalCase], registry: DatasourceRegistry, snapshots: dict[str, SchemaSnapshot],
    policies: PoliciesConfig, proposed: ProposedPolicy,
) -> None:
    """By an independent reading of the policy (scopes resolved here, the other rules read off the
    parse tree), not by the product's check."""
    for probe in probes:
        ds, (role, outcome) = probe.datasources[0], next(iter(probe.outcome.items()))
        assert probe.sql is not None
        broken = rules_broken(probe.sql, ds, role, snapshots[ds], policies, proposed)
        attack = probe.tags[2].replace("-", "_") if outcome == "refused" else None
        if outcome == "allowed":
            assert broken == set(), (probe.id, broken)
            _, rows = run(registry.get(ds), probe.sql)
            assert rows, probe.id
        elif attack in SHADOWING_RULES:
            # behind the shadow, scope resolution finds the denied read: that rule holds too
            assert attack in broken and broken & SCOPE_RULES, (probe.id, broken)
            assert broken <= SCOPE_RULES | {attack}, (probe.id, broken)
        else:
            assert broken == {attack}, (probe.id, broken)


def test_the_final_sql_check_refuses_each_probe_by_its_rule_and_allows_each_control(
    probes: list[EvalCase], snapshots: dict[str, SchemaSnapshot], policies: PoliciesConfig
) -> None:
    from nl2sql_assets.policy import check_sql

    for probe in probes:
        ds, (role, outcome) = probe.datasources[0], next(iter(probe.outcome.items()))
        assert probe.sql is not None
        decision = check_sql(probe.sql, dialect=DIALECTS[ds], schema=snapshots[ds], role=role,
                             access=policies.role(role).access(ds),
                             dangerous_functions=policies.dangerous_for(DIALECTS[ds]))
        assert decision.allowed == (outcome == "allowed"), (probe.id, decision.rule, decision.detail)
        assert decision.rule == probe.rule, (probe.id, decision.detail)


def test_each_domain_has_four_follow_ups_whose_earlier_turns_run_and_have_plans(
    suite: EvalSuite, registry: DatasourceRegistry
) -> None:
    follow_ups = [c for c in suite.cases if c.turns]
    assert Counter(c.datasources[0] for c in follow_ups) == Counter(dict.fromkeys(DOMAINS, 4))
    assert all(c.tags[0] == "follow-up" for c in follow_ups) and len(follow_ups) == 12
    for case in follow_ups:
        adapter = registry.get(case.datasources[0])
        for turn in case.turns:
            assert turn.sql is not None and turn.plan is not None, (case.id, turn.question)
            _, gold = run(adapter, turn.sql)
            assert 1 <= len(gold) <= 25, (case.id, turn.question)
            _, got = run(adapter, generate_sql(turn.plan, adapter.dialect))  # type: ignore[arg-type]
            assert rows_match(gold, got, False), (case.id, turn.question)


def test_the_budgets_join_rules_and_function_lists_change_no_verdict_in_any_shipped_suite(
    snapshots: dict[str, SchemaSnapshot], policies: PoliciesConfig, proposed: ProposedPolicy,
) -> None:
    from nl2sql_assets.policy import check_sql

    checked = 0
    suites = shipped_suites()
    # The wide routing suite is on the wide test bed's own project (one role reading everything).
    on_the_demo = [s for s in suites if all(ds in snapshots for c in s.cases for ds in c.datasources)]
    assert {s.name for s in suites} - {s.name for s in on_the_demo} == {"wide_routing"}
    for shipped in on_the_demo:
        for case in shipped.cases:
            if case.sql is None or case.kind == "probe":
                continue
            ds = case.datasources[0]
            for role, outcome in case.outcome.items():
                for sql in (case.sql, *case.alt_sql):
                    decision = check_sql(sql, dialect=DIALECTS[ds], schema=snapshots[ds], role=role,
                                         access=policies.role(role).access(ds),
                                         dangerous_functions=policies.dangerous_for(DIALECTS[ds]))
                    assert decision.allowed == (outcome == "allowed"), (shipped.name, case.id, role, decision.rule)
                if outcome == "allowed":
                    broken = rules_broken(case.sql, ds, role, snapshots[ds], policies, proposed)
                    assert broken == set(), (shipped.name, case.id, role, broken)
                    checked += 1
    assert checked >= 201 + 43 + 10  # this suite's allowed runs, Chinook's and the routing SQL cases


def test_forbidden_joins_and_budgets_bind_roles_that_could_otherwise_run_the_query(
    snapshots: dict[str, SchemaSnapshot], policies: PoliciesConfig, proposed: ProposedPolicy
) -> None:
    assert proposed.row_budgets["admin"] is None
    assert 10 < proposed.row_budgets["viewer"] <= proposed.row_budgets["analyst"]  # type: ignore[operator]
    for rule in proposed.forbidden_joins:
        for table in rule.tables:
            assert snapshots[rule.datasource].table(table) is not None, table
        for role in rule.roles:
            access = policies.role(role).access(rule.datasource)
            assert all(access.allows_table(t) for t in rule.tables), (rule, role)
    assert {r.datasource for r in proposed.forbidden_joins} == set(DOMAINS)


@pytest.mark.parametrize(
    ("sql", "role", "expected"),
    [
        ("SELECT Name FROM Track LIMIT 100", "viewer", set()),
        ("SELECT Name FROM Track LIMIT 101", "viewer", {"row_budget"}),
        ("SELECT Name FROM Track", "viewer", set()),  # no LIMIT: capped by the executor, not denied
        ("SELECT FirstName FROM Customer", "viewer", {"table_scope"}),
        ("SELECT FirstName FROM Customer", "analyst", set()),
        ("SELECT t.Name FROM Track t JOIN PlaylistTrack pt ON pt.TrackId = t.TrackId "
         "JOIN InvoiceLine il ON il.TrackId = t.TrackId", "analyst", {"forbidden_join"}),
        ("SELECT t.Name FROM Track t WHERE EXISTS (SELECT 1 FROM PlaylistTrack pt WHERE pt.TrackId = t.TrackId) "
         "AND EXISTS (SELECT 1 FROM InvoiceLine il WHERE il.TrackId = t.TrackId)", "analyst", set()),
        ("WITH Track AS (SELECT LastName AS Name FROM Employee) SELECT Name FROM Track", "analyst",
         {"table_scope", "cte_shadowing"}),
        ("WITH Employee AS (SELECT Name FROM Track) SELECT Name FROM Employee", "analyst", set()),
        ("SELECT Artist.Title FROM Album AS Artist", "viewer", set()),  # both catalog tables
        ("SELECT a.LastName AS Name FROM Employee a", "analyst", {"table_scope"}),
        ("SELECT Name AS Title FROM Track", "viewer", set()),
        ("UPDATE Track SET Name = 'x'", "admin", {"read_only"}),
        ("SELECT * FROM pragma_table_info('Track')", "admin", {"system_catalog"}),
        ("SELECT readfile('/etc/passwd') AS f", "admin", {"dangerous_function"}),
    ],
)  # fmt: skip
def test_rules_broken_on_hand_worked_chinook_queries(
    sql: str, role: str, expected: set[str], proposed: ProposedPolicy, snapshots: dict[str, SchemaSnapshot],
    policies: PoliciesConfig,
) -> None:
    assert rules_broken(sql, "chinook", role, snapshots["chinook"], policies, proposed) == expected
