"""The routing suite (suites/routing.yaml): which demo database each question belongs to.

What a reviewer checks by hand: the case counts per tag, that every case is approved, hand
written and asked as admin, that the gold cases are the Chinook suite's answerable questions
word for word, that the sample cases are the demo's sample questions, that datasources and
their tags agree and exist in the demo, and that the ten cases with SQL read what they list
and hold exactly the rows regenerate writes from the demo databases.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope

from nl2sql_assets.datasources.chinook_questions import CHINOOK_QUESTIONS
from nl2sql_assets.demo import (
    SUPPORT_QUESTIONS,
    WEBANALYTICS_QUESTIONS,
    evals_config_data,
    project_config_data,
)
from nl2sql_assets.evaluation.suites import EvalCase, EvalSuite, dump_suite, load_suite
from nl2sql_assets.paths import chinook_suite_path, packaged_suites_dir

DEMO_DATASOURCES = {"chinook", "support", "webanalytics"}

# Cases per tag, counted by hand from the suite's header. Chinook's twelve sample questions are
# gold cases that also carry `sample`, so gold and sample overlap by twelve.
TAG_COUNTS = {
    "gold": 43,
    "sample": 20,
    "hand": 28,
    "paraphrase": 5,
    "cross-database": 3,
    "chinook": 43 + 4 + 2,  # gold, hand, cross-database
    "support": 4 + 12 + 2,  # sample, hand, cross-database
    "webanalytics": 4 + 12 + 2,
}
TOTAL = 43 + 8 + 28 + 3

# The ten cases with reviewed SQL: id -> datasource.
SQL_CASES = {
    **{f"routing_hand_{n:03d}": "support" for n in range(1, 6)},
    **{f"routing_hand_{n:03d}": "webanalytics" for n in range(13, 18)},
}
CROSS = {
    "routing_cross_001": ["chinook", "support"],
    "routing_cross_002": ["chinook", "webanalytics"],
    "routing_cross_003": ["support", "webanalytics"],
}


def suite_path() -> Path:
    return packaged_suites_dir() / "routing.yaml"


@pytest.fixture(scope="module")
def suite() -> EvalSuite:
    return load_suite(suite_path())


def tagged(suite: EvalSuite, tag: str) -> list[EvalCase]:
    return [case for case in suite.cases if tag in case.tags]


# ---------------------------------------------------------------- the file


def test_the_suite_loads_and_is_in_the_canonical_layout(suite: EvalSuite) -> None:
    assert len(suite.cases) == TOTAL
    assert suite_path().read_text(encoding="utf-8") == dump_suite(suite)


def test_the_header_says_how_to_run_it_and_names_the_cases_with_two_answers(suite: EvalSuite) -> None:
    header = suite.header
    assert "nl2sql-assets eval run --mode retrieval --suite suites/routing.yaml --out eval_routing.json" in header
    assert "nl2sql-assets eval regenerate suites/routing.yaml --allow-packaged" in header
    section = header.split("two defensible answers", 1)[1]
    named = re.findall(r"^# - (routing_\w+) \(", section, flags=re.MULTILINE)
    assert named == ["routing_gold_001", "routing_gold_007", "routing_sample_007", "routing_hand_010",
                     "routing_hand_027"]
    for case_id in named:
        assert len(suite.case(case_id).datasources) == 1, case_id


def test_the_demo_evals_config_names_the_chinook_suites_and_not_this_one() -> None:
    # Mode plans cannot run the routing suite (no plans), so it is always run by path.
    assert evals_config_data()["suites"] == [
        "suites/chinook.yaml", "suites/chinook_policy.yaml", "suites/chinook_clarify.yaml"]


# ---------------------------------------------------------------- every case


def test_counts_per_tag(suite: EvalSuite) -> None:
    counts = Counter(tag for case in suite.cases for tag in case.tags)
    assert {tag: counts[tag] for tag in TAG_COUNTS} == TAG_COUNTS
    assert set(counts) == set(TAG_COUNTS)  # no stray tag


def test_ids_say_where_each_case_came_from(suite: EvalSuite) -> None:
    prefixes = {"gold": "routing_gold_", "hand": "routing_hand_", "cross-database": "routing_cross_"}
    for tag, prefix in prefixes.items():
        assert all(case.id.startswith(prefix) for case in tagged(suite, tag)), tag
    assert [c.id for c in tagged(suite, "sample") if not c.id.startswith("routing_gold_")] == [
        f"routing_sample_{n:03d}" for n in range(1, 9)
    ]


def test_every_case_is_approved_hand_written_and_asked_as_admin_only(suite: EvalSuite) -> None:
    for case in suite.cases:
        assert (case.status, case.origin, case.outcome) == ("approved", "hand", {"admin": "allowed"}), case.id


def test_datasources_exist_in_the_demo_and_are_tags_too(suite: EvalSuite) -> None:
    configured = {ds["id"] for ds in project_config_data()["datasources"]}
    assert configured == DEMO_DATASOURCES
    for case in suite.cases:
        assert set(case.datasources) <= DEMO_DATASOURCES, case.id
        assert [t for t in case.tags if t in DEMO_DATASOURCES] == case.datasources, case.id


def test_no_case_names_tables_so_routing_alone_decides_it(suite: EvalSuite) -> None:
    assert [c.id for c in suite.cases if c.tables or c.columns] == []
    for case in suite.cases:
        if case.sql is None:
            assert case.kind == "routing", case.id
            assert (case.tables, case.columns, case.rows, case.plan) == ([], [], None, None), case.id
        else:
            assert case.kind == "answer" and case.plan is None, case.id


def test_only_the_cross_database_cases_need_two_databases(suite: EvalSuite) -> None:
    assert {c.id: c.datasources for c in suite.cases if len(c.datasources) > 1} == CROSS
    assert all(suite.case(case_id).sql is None for case_id in CROSS)


# ---------------------------------------------------------------- gold and sample


def test_gold_cases_are_the_chinook_suites_answerable_questions_in_order(suite: EvalSuite) -> None:
    answerable = [c for c in load_suite(chinook_suite_path()).cases if c.status == "approved" and c.answerable]
    gold = tagged(suite, "gold")
    assert [c.question for c in gold] == [c.question for c in answerable]
    assert [c.id for c in gold] == [f"routing_gold_{n:03d}" for n in range(1, 44)]
    assert all(c.datasources == ["chinook"] for c in gold)


def test_the_headers_gold_mapping_points_at_the_same_questions(suite: EvalSuite) -> None:
    chinook = load_suite(chinook_suite_path())
    pairs = re.findall(r"\b(\d{3})=(\d{3})\b", suite.header)
    assert len(pairs) == 43
    for new, old in pairs:
        assert suite.case(f"routing_gold_{new}").question == chinook.case(f"chinook_{old}").question, new


def test_sample_cases_are_each_datasources_sample_questions(suite: EvalSuite) -> None:
    expected = {q: ["chinook"] for q in CHINOOK_QUESTIONS}
    expected.update({q: ["support"] for q in SUPPORT_QUESTIONS})
    expected.update({q: ["webanalytics"] for q in WEBANALYTICS_QUESTIONS})
    configured = {q: [ds["id"]] for ds in project_config_data()["datasources"] for q in ds["sample_questions"]}
    assert configured == expected
    assert {c.question: c.datasources for c in tagged(suite, "sample")} == expected


def test_no_question_is_asked_twice(suite: EvalSuite) -> None:
    questions = Counter(case.question for case in suite.cases)
    assert [q for q, n in questions.items() if n > 1] == []


# ---------------------------------------------------------------- the ten cases with SQL


def test_ten_hand_cases_carry_reviewed_sql_on_one_datasource(suite: EvalSuite) -> None:
    with_sql = {c.id: c.datasources for c in suite.cases if c.sql is not None}
    assert with_sql == {case_id: [ds] for case_id, ds in SQL_CASES.items()}
    for case_id in SQL_CASES:
        case = suite.case(case_id)
        assert "hand" in case.tags and case.rows, case_id


def _touched(sql: str, schema: dict[str, dict[str, str]]) -> tuple[set[str], set[str]]:
    """(tables read, Table.column touched) by ``sql`` in DuckDB's dialect."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    tables = {t.name for t in tree.find_all(exp.Table)}
    columns: set[str] = set()
    for scope in traverse_scope(qualify(tree, schema=schema, dialect="duckdb")):
        for column in scope.columns:
            source = scope.sources.get(column.table)
            if isinstance(source, exp.Table):
                columns.add(f"{source.name}.{column.name}")
    return tables, columns


@pytest.fixture(scope="module")
def demo_snapshots(demo_template: Path) -> dict[str, dict[str, dict[str, str]]]:
    from nl2sql_assets.config import load_config
    from nl2sql_assets.datasources.registry import DatasourceRegistry

    with DatasourceRegistry(load_config(demo_template / "nl2sql.yaml")) as registry:
        snapshots = {ds: registry.snapshot(ds) for ds in ("support", "webanalytics")}
    return {ds: {t.name: {c.name: c.type for c in t.columns} for t in snap.tables} for ds, snap in snapshots.items()}


def test_each_sql_reads_only_tables_and_columns_of_its_datasource(
    suite: EvalSuite, demo_snapshots: dict[str, dict[str, dict[str, str]]]
) -> None:
    for case_id, ds in SQL_CASES.items():
        case = suite.case(case_id)
        assert case.sql is not None
        schema = demo_snapshots[ds]
        tables, columns = _touched(case.sql, schema)
        assert tables and tables <= set(schema), case_id
        assert columns and all(c.split(".", 1)[1] in schema[c.split(".", 1)[0]] for c in columns), case_id


def test_the_sql_cases_rows_are_what_regenerate_writes(demo_project: Path, tmp_path: Path) -> None:
    from nl2sql_assets.config import load_config
    from nl2sql_assets.datasources.registry import DatasourceRegistry
    from nl2sql_assets.evaluation.suites.regenerate import regenerate

    copy = tmp_path / "routing.yaml"
    shutil.copyfile(suite_path(), copy)
    with DatasourceRegistry(load_config(demo_project / "nl2sql.yaml")) as registry:
        report = regenerate(copy, registry)
    assert (report.cases, report.written, report.failed) == (10, 10, [])
    assert report.unchanged is True
    assert copy.read_bytes() == suite_path().read_bytes()


def test_regenerate_writes_the_rows_back_when_they_are_missing(demo_project: Path, tmp_path: Path) -> None:
    """The committed rows are not typed: blank them and regenerate puts the same ones back."""
    from nl2sql_assets.config import load_config
    from nl2sql_assets.datasources.registry import DatasourceRegistry
    from nl2sql_assets.evaluation.suites.regenerate import regenerate

    committed = load_suite(suite_path())
    blanked = [c.model_copy(update={"rows": []}) if c.sql is not None else c for c in committed.cases]
    copy = tmp_path / "routing.yaml"
    copy.write_text(dump_suite(committed.model_copy(update={"cases": blanked}), header=committed.header))
    with DatasourceRegistry(load_config(demo_project / "nl2sql.yaml")) as registry:
        report = regenerate(copy, registry)
    assert report.unchanged is False and report.failed == []
    assert copy.read_bytes() == suite_path().read_bytes()
