"""The Chinook suite's data checks: key-free, on the suite file and Chinook itself (sqlite3).

What a reviewer would check by hand, case by case: the outcomes follow the demo policy, the
tags say what the case is, the SQL reads exactly the tables and columns it lists, the rows
are what the SQL returns today, each plan returns the same rows, and alternatives stay
within the case. The pinned digest makes any change to the gold data a visible decision.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope

from nl2sql_assets.datasources.chinook_questions import CHINOOK_QUESTIONS
from nl2sql_assets.engine.plan import PlanModel
from nl2sql_assets.engine.sqlgen import generate_sql
from nl2sql_assets.engine.validator import tables_read
from nl2sql_assets.evaluation.suites import EvalCase, EvalSuite, load_suite
from nl2sql_assets.paths import chinook_clarify_suite_path, chinook_policy_suite_path, chinook_suite_path

# ---------------------------------------------------------------- the rules of the suite

FIXED_TAGS = {
    "single-table", "filter", "join", "multi-join", "aggregation", "having", "order-limit", "offset",
    "ties", "date", "paraphrase", "keyword-in-question", "keyword-in-value", "data-range", "value-matching",
}  # fmt: skip
POLICY_TAGS = {"rbac-denial", "unanswerable"}

# The demo policy's scopes on Chinook (nl2sql_assets.demo.DEMO_POLICIES).
ROLES = ("admin", "analyst", "viewer")
CHINOOK_TABLES = {
    "Album", "Artist", "Customer", "Employee", "Genre", "Invoice", "InvoiceLine", "MediaType",
    "Playlist", "PlaylistTrack", "Track",
}  # fmt: skip
CATALOG = {"Album", "Artist", "Genre", "MediaType", "Playlist", "PlaylistTrack", "Track"}
SCOPES = {"admin": CHINOOK_TABLES, "analyst": CHINOOK_TABLES - {"Employee"}, "viewer": CATALOG}

TOLERANCE = 0.005

# SHA-256 over every case's question, SQL, rows, alternatives, outcomes, tables, columns and
# plan (see gold_digest). It changes only when the gold data does. After a reviewed change
# (a new alt_sql, then regenerate), run
#   python -c "from tests.unit.test_chinook_suite import gold_digest, load; print(gold_digest(load()))"
# read the diff of suites/chinook.yaml once more, and paste the new value here.
GOLD_DIGEST = "42ec6ad29f7fc8fe9a52f0eff19332eab6dc396184b40256f488dd208bbde3a8"


# ---------------------------------------------------------------- helpers


def _clarify(case: EvalCase) -> bool:
    return set(case.outcome.values()) == {"clarify"}


def load() -> EvalSuite:
    """The gold suite, whole: its 47 question cases and nothing else (spec 000). The policy probes and
    the questions to ask back about are suites of their own, checked apart."""
    return load_suite(chinook_suite_path())


def load_clarify() -> list[EvalCase]:
    return load_suite(chinook_clarify_suite_path()).cases


def load_probes() -> list[EvalCase]:
    return load_suite(chinook_policy_suite_path()).cases


def gold_digest(suite: EvalSuite) -> str:
    """Canonical JSON of the gold data of every case, in file order, hashed."""
    data = [
        {
            "id": case.id,
            "question": case.question,
            "sql": case.sql,
            "rows": case.rows,
            "alt_sql": case.alt_sql,
            "alt_rows": case.alt_rows,
            "outcome": case.outcome,
            "tables": case.tables,
            "columns": case.columns,
            "plan": case.plan.to_data() if case.plan is not None else None,
        }
        for case in suite.cases
    ]
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def expected_outcome(case: EvalCase, role: str) -> str:
    if not case.tables:
        return "unanswerable"
    return "allowed" if set(case.tables) <= SCOPES[role] else "refused"


def sql_tables(sql: str) -> set[str]:
    return {t.name for t in sqlglot.parse_one(sql, read="sqlite").find_all(exp.Table)}


def sql_columns(sql: str, schema: dict[str, dict[str, str]]) -> set[str]:
    """Every ``table.column`` (lower case) that ``sql`` touches, sub-queries included."""
    tree = qualify(sqlglot.parse_one(sql, read="sqlite"), schema=schema, dialect="sqlite")
    found: set[str] = set()
    for scope in traverse_scope(tree):
        for column in scope.columns:
            source = scope.sources.get(column.table)
            if isinstance(source, exp.Table):
                found.add(f"{source.name}.{column.name}".lower())
    return found


def normalised(sql: str) -> str:
    return sqlglot.parse_one(sql, read="sqlite").sql(dialect="sqlite", normalize=True).lower()


def run(con: sqlite3.Connection, sql: str) -> tuple[list[str], list[list[Any]]]:
    cursor = con.execute(sql)
    return [d[0] for d in cursor.description], [list(r) for r in cursor.fetchall()]


def as_dicts(names: list[str], rows: list[list[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(names, row, strict=True)) for row in rows]


def _cell_eq(a: Any, b: Any) -> bool:
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers):
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


def gold_values(case: EvalCase) -> list[list[Any]]:
    assert case.rows is not None
    return [list(row.values()) for row in case.rows]


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def suite() -> EvalSuite:
    return load()


@pytest.fixture(scope="module")
def answerable(suite: EvalSuite) -> list[EvalCase]:
    return [c for c in suite.cases if c.sql is not None]


@pytest.fixture(scope="module")
def chinook(chinook_path: Path) -> Iterator[sqlite3.Connection]:
    con = sqlite3.connect(f"file:{quote(str(chinook_path.resolve()))}?mode=ro", uri=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def schema(chinook: sqlite3.Connection) -> dict[str, dict[str, str]]:
    tables = [r[0] for r in chinook.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {t: {r[1]: r[2] or "TEXT" for r in chinook.execute(f"PRAGMA table_info('{t}')")} for t in tables}


# ---------------------------------------------------------------- the gold data is pinned


def test_chinook_suite_holds_the_gold_data_unchanged(suite: EvalSuite) -> None:
    assert gold_digest(suite) == GOLD_DIGEST, (
        "the Chinook gold data changed; if the change was reviewed, update GOLD_DIGEST (see its comment)"
    )


def test_gold_digest_sees_every_field_it_covers(suite: EvalSuite) -> None:
    base = gold_digest(suite)
    case = suite.cases[1]
    changes = {
        "question": case.question + "?",
        "sql": (case.sql or "") + " ",
        "rows": [*(case.rows or []), {"x": 1}],
        "alt_sql": [*case.alt_sql, "SELECT 1"],
        "alt_rows": [*case.alt_rows, [{"x": 1}]],
        "outcome": {**case.outcome, "viewer": "allowed"},
        "tables": [*case.tables, "Track"],
        "columns": [*case.columns, "Track.Name"],
        "plan": None,
    }
    for field, value in changes.items():
        changed = suite.model_copy(deep=True)
        setattr(changed.cases[1], field, value)
        assert gold_digest(changed) != base, field


# ---------------------------------------------------------------- shape of the suite


def test_the_suite_has_47_approved_hand_written_cases_on_chinook(suite: EvalSuite) -> None:
    assert len(load_suite(chinook_suite_path()).cases) == 47  # the file itself, nothing filtered out
    assert len(suite.cases) == 47
    assert [c.id for c in suite.cases] == [f"chinook_{n:03d}" for n in range(1, 48)]
    for case in suite.cases:
        assert case.status == "approved", case.id
        assert case.origin == "hand", case.id
        assert case.datasources == ["chinook"], case.id
        assert case.kind == "answer", case.id
        assert case.difficulty in ("easy", "medium", "hard"), case.id
        assert set(case.outcome) == set(ROLES), case.id


def test_ids_and_questions_are_unique(suite: EvalSuite) -> None:
    assert len({c.id for c in suite.cases}) == len(suite.cases)
    repeated = [q for q, n in Counter(c.question for c in suite.cases).items() if n > 1]
    assert repeated == []


def test_tags_come_from_the_fixed_list_and_each_is_used_twice(suite: EvalSuite) -> None:
    counts: Counter[str] = Counter()
    for case in suite.cases:
        assert len(case.tags) == len(set(case.tags)), case.id
        unknown = set(case.tags) - FIXED_TAGS - POLICY_TAGS
        assert not unknown, (case.id, unknown)
        counts.update(case.tags)
    rare = {tag: counts[tag] for tag in FIXED_TAGS if counts[tag] < 2}
    assert rare == {}


def test_exactly_four_cases_are_unanswerable_and_carry_nothing_to_answer(suite: EvalSuite) -> None:
    tagged = [c for c in suite.cases if "unanswerable" in c.tags]
    assert len(tagged) == 4
    for case in suite.cases:
        unanswerable = set(case.outcome.values()) == {"unanswerable"}
        assert unanswerable == ("unanswerable" in case.tags), case.id
        if unanswerable:
            assert case.sql is None and case.rows is None and case.plan is None, case.id
            assert case.tables == [] and case.columns == [], case.id
            assert case.alt_sql == [] and case.alt_rows == [], case.id
            assert case.tags == ["unanswerable"], case.id
        else:
            assert "unanswerable" not in case.outcome.values(), case.id


def test_outcomes_follow_the_demo_policy(suite: EvalSuite) -> None:
    for case in suite.cases:
        for role, outcome in case.outcome.items():
            assert role in SCOPES, (case.id, role)
            assert outcome == expected_outcome(case, role), (case.id, role)


def test_the_scopes_used_here_are_the_demo_policy() -> None:
    from nl2sql_assets.config import PoliciesConfig
    from nl2sql_assets.demo import DEMO_POLICIES

    policies = PoliciesConfig.model_validate(DEMO_POLICIES)
    assert set(policies.roles) == set(ROLES)
    for role in ROLES:
        access = policies.role(role).access("chinook")
        readable = {t for t in CHINOOK_TABLES if access.allows_table(t)}
        assert readable == SCOPES[role], role


def test_exactly_the_refused_cases_carry_rbac_denial(suite: EvalSuite) -> None:
    for case in suite.cases:
        refused = "refused" in case.outcome.values()
        assert refused == ("rbac-denial" in case.tags), case.id


def test_the_outcome_mix_covers_every_scope(suite: EvalSuite) -> None:
    mix = Counter(tuple(c.outcome[r] for r in ROLES) for c in suite.cases)
    assert mix[("allowed", "allowed", "allowed")] >= 12  # the catalog
    assert mix[("allowed", "allowed", "refused")] >= 15  # customers and invoices
    assert mix[("allowed", "refused", "refused")] >= 4  # staff records
    assert mix[("unanswerable",) * 3] == 4


def test_paraphrase_groups_share_one_result(suite: EvalSuite) -> None:
    groups: dict[str, list[EvalCase]] = defaultdict(list)
    for case in suite.cases:
        assert (case.paraphrase_group is not None) == ("paraphrase" in case.tags), case.id
        if case.paraphrase_group is not None:
            groups[case.paraphrase_group].append(case)
    assert len(groups) >= 3
    for name, cases in groups.items():
        assert name.startswith("pg_"), name
        assert 2 <= len(cases) <= 3, name
        first = cases[0]
        for other in cases[1:]:
            assert other.rows == first.rows, (name, other.id)
            assert other.order_matters == first.order_matters, (name, other.id)
            assert other.outcome == first.outcome, (name, other.id)


def test_every_guided_question_is_a_case_verbatim(suite: EvalSuite) -> None:
    assert len(CHINOOK_QUESTIONS) == 12
    assert len(set(CHINOOK_QUESTIONS)) == 12
    by_question = {c.question: c for c in suite.cases}
    for question in CHINOOK_QUESTIONS:
        assert question in by_question, question
        assert by_question[question].sql is not None, question  # a guided question has an answer


def test_answerable_cases_have_sql_rows_and_a_plan_and_only_they_do(suite: EvalSuite) -> None:
    for case in suite.cases:
        answerable = "allowed" in case.outcome.values()
        assert (case.sql is not None) == answerable, case.id
        assert (case.rows is not None) == answerable, case.id
        assert (case.plan is not None) == answerable, case.id
        if answerable:
            assert 1 <= len(case.rows or []) <= 25, case.id
            assert case.tables and case.columns, case.id


def test_enough_cases_have_reviewed_alternatives(suite: EvalSuite) -> None:
    with_alt = [c.id for c in suite.cases if c.alt_sql]
    assert len(with_alt) >= 4
    for case in suite.cases:
        assert len(case.alt_rows) == len(case.alt_sql), case.id


# ---------------------------------------------------------------- SQL against the schema


def test_every_table_and_column_exists_in_chinook(
    suite: EvalSuite, schema: dict[str, dict[str, str]]
) -> None:
    assert set(schema) == CHINOOK_TABLES
    for case in suite.cases:
        for table in case.tables:
            assert table in schema, (case.id, table)
        for name in case.columns:
            table, column = name.split(".")
            assert table in case.tables, (case.id, name)
            assert column in schema.get(table, {}), (case.id, name)


def test_tables_are_exactly_the_tables_the_sql_reads(answerable: list[EvalCase]) -> None:
    for case in answerable:
        assert case.sql is not None
        assert sql_tables(case.sql) == set(case.tables), case.id
        assert len(case.tables) == len(set(case.tables)), case.id


def test_columns_are_exactly_the_columns_the_sql_touches(
    answerable: list[EvalCase], schema: dict[str, dict[str, str]]
) -> None:
    for case in answerable:
        assert case.sql is not None
        listed = {c.lower() for c in case.columns}
        assert sql_columns(case.sql, schema) == listed, case.id


def test_rows_are_what_the_sql_returns_today(answerable: list[EvalCase], chinook: sqlite3.Connection) -> None:
    for case in answerable:
        assert case.sql is not None
        names, rows = run(chinook, case.sql)
        assert len(names) == len(set(names)), (case.id, "give every output column a distinct alias")
        assert as_dicts(names, rows) == case.rows, (case.id, "drift: run regenerate and review the diff")
        for sql, alt_rows in zip(case.alt_sql, case.alt_rows, strict=True):
            alt_names, alt_values = run(chinook, sql)
            assert as_dicts(alt_names, alt_values) == alt_rows, (case.id, "alternative drift")


def test_alternatives_stay_within_the_case(answerable: list[EvalCase], chinook: sqlite3.Connection) -> None:
    for case in answerable:
        assert case.sql is not None
        for sql in case.alt_sql:
            assert sql_tables(sql) <= set(case.tables), case.id
            assert normalised(sql) != normalised(case.sql), (
                case.id,
                "an alternative is not the gold SQL again",
            )
            _, rows = run(chinook, sql)
            assert 1 <= len(rows) <= 25, case.id


def test_money_is_rounded_to_cents(answerable: list[EvalCase]) -> None:
    for case in answerable:
        for row in [*(case.rows or []), *(r for rows in case.alt_rows for r in rows)]:
            for value in row.values():
                if isinstance(value, float):
                    assert round(value, 2) == value, (case.id, value)


# ---------------------------------------------------------------- plans


def test_each_plan_reads_exactly_the_tables_and_selects_the_rows_columns(answerable: list[EvalCase]) -> None:
    for case in answerable:
        assert isinstance(case.plan, PlanModel), case.id
        PlanModel.model_validate(case.plan.to_data())  # written as data, it reads back as a plan
        assert tables_read(case.plan) == set(case.tables), case.id
        assert case.rows
        assert case.plan.output_names() == list(case.rows[0]), case.id


def test_each_plan_reads_only_columns_the_case_lists(answerable: list[EvalCase], chinook_path: Path) -> None:
    from nl2sql_assets.config import DatasourceConfig
    from nl2sql_assets.datasources.registry import DatasourceRegistry
    from nl2sql_assets.engine.validator import columns_read

    with DatasourceRegistry([DatasourceConfig(id="chinook", engine="sqlite", path=chinook_path)]) as registry:
        snapshot = registry.snapshot("chinook")
    for case in answerable:
        assert case.plan is not None
        assert columns_read(case.plan, snapshot) <= set(case.columns), case.id


def test_each_plan_returns_the_gold_rows(answerable: list[EvalCase], chinook: sqlite3.Connection) -> None:
    failures = []
    for case in answerable:
        assert case.plan is not None
        _, got = run(chinook, generate_sql(case.plan, "sqlite"))
        if not rows_match(gold_values(case), got, case.order_matters):
            failures.append(case.id)
    assert failures == []


# ---------------------------------------------------------------- the comparison used above


@pytest.mark.parametrize(
    ("gold", "got", "order_matters", "expected"),
    [
        ([[1, "a"], [2, "b"]], [[2, "b"], [1, "a"]], False, True),
        ([[1, "a"], [2, "b"]], [[2, "b"], [1, "a"]], True, False),
        ([[49.62]], [[49.624]], True, True),
        ([[49.62]], [[49.63]], True, False),
        ([["a", 1]], [[1, "a"]], False, False),  # swapped columns
        ([["a"]], [["a", 1]], False, False),  # an extra column
        ([["2009"]], [[2009]], False, False),  # strict here: the suite writes years as numbers
        ([["a"], ["a"]], [["a"]], False, False),  # duplicates count
    ],
)
def test_rows_match(gold: list[list[Any]], got: list[list[Any]], order_matters: bool, expected: bool) -> None:
    assert rows_match(gold, got, order_matters) is expected


# ---------------------------------------------------------------- policy probes

PROBE_TAGS = {
    "table-scope", "column-scope", "sub-query", "case-policy", "write", "stacked", "system-table",
    "dangerous-function", "unknown-source", "fail-closed", "join-rule", "derived-table", "row-budget",
    "cte-shadowing", "alias-shadowing", "control",
}  # fmt: skip


def test_the_probes_are_a_suite_of_their_own_and_cover_every_rule_and_attack() -> None:
    # Each file holds one kind: the gold questions, the probes, the questions to ask back about.
    assert {c.kind for c in load().cases} == {"answer"} and not any(_clarify(c) for c in load().cases)
    probes = load_probes()
    assert len(probes) == 29 and {c.kind for c in probes} == {"probe"}
    assert all(c.datasources == ["chinook"] for c in probes)
    assert [c.id for c in probes] == [f"chinook_probe_{n:02d}" for n in range(1, len(probes) + 1)]
    from nl2sql_assets.policy import RULE_NAMES

    assert {c.rule for c in probes if c.rule} == set(RULE_NAMES)  # every rule of the check is probed
    tags = {t for c in probes for t in c.tags}
    assert tags == PROBE_TAGS | {"policy-probe"}
    for case in probes:
        assert case.tags[0] == "policy-probe" and case.status == "approved" and case.origin == "hand", case.id
        assert ("control" in case.tags) == ("refused" not in case.outcome.values()), case.id
    refused_roles = {role for c in probes for role, o in c.outcome.items() if o == "refused"}
    assert refused_roles == set(ROLES)
    assert sum("control" in c.tags for c in probes) >= 4  # controls keep policy precision honest
    for tag in ("cte-shadowing", "alias-shadowing"):  # both refused and allowed shadowing
        assert any(tag in c.tags and "refused" in c.outcome.values() for c in probes), tag


def test_each_probe_gets_its_verdict_and_rule_from_the_policy_check(chinook_path: Path) -> None:
    from nl2sql_assets.config import DatasourceConfig, PoliciesConfig
    from nl2sql_assets.datasources.sqlite import SqliteAdapter
    from nl2sql_assets.demo import DEMO_POLICIES
    from nl2sql_assets.policy import check_sql

    project = PoliciesConfig.model_validate(DEMO_POLICIES)
    adapter = SqliteAdapter(DatasourceConfig(id="chinook", engine="sqlite", path=chinook_path))
    snapshot = adapter.introspect()
    for case in load_probes():
        policies = case.policy.policies(project) if case.policy is not None else project
        assert case.sql is not None
        for role, expected in case.outcome.items():
            decision = check_sql(case.sql, dialect="sqlite", schema=snapshot, role=role,
                                 access=policies.role(role).access("chinook"),
                                 dangerous_functions=policies.dangerous_for("sqlite"))
            assert decision.allowed == (expected == "allowed"), (case.id, role, decision.rule, decision.detail)
            assert decision.rule == (None if expected == "allowed" else case.rule), (case.id, role, decision.detail)


def test_the_clarify_cases_are_a_suite_of_their_own_and_carry_nothing_to_answer() -> None:
    cases = load_clarify()
    assert all(_clarify(c) and c.kind == "answer" for c in cases)
    assert [c.id for c in cases] == [f"chinook_clarify_{n:02d}" for n in range(1, 4)]
    for case in cases:
        assert case.outcome == dict.fromkeys(ROLES, "clarify"), case.id
        assert case.tags == ["clarify"] and case.status == "approved", case.id
        assert case.sql is None and case.rows is None and case.plan is None, case.id
