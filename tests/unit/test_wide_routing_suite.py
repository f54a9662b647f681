"""The wide routing suite's data checks, on the bed it is written for: what a reviewer would
check case by case. Each answer case reads exactly the core tables and columns it lists (sqlglot
resolves every column against the bed's schema), its rows are what its SQL returns on the bed
today (regenerate changes nothing), its paraphrase partner returns the same, and the tags say what
the case is; the cross-database questions name two datasources and carry no SQL."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope

from nl2sql_assets.datasources.registry import DatasourceRegistry
from nl2sql_assets.evaluation.suites import EvalCase, EvalSuite, load_suite
from nl2sql_assets.evaluation.suites.regenerate import regenerate
from nl2sql_assets.paths import wide_routing_suite_path
from nl2sql_assets.project import Project
from nl2sql_assets.testbed.wide import parse_core
from nl2sql_assets.testbed.wide_schema import SOURCES

SOURCE_IDS = [s.id for s in SOURCES]
KINDS = {"single-table", "join", "paraphrase", "ambiguous", "cross-database"}
CORES = {s.id: {parse_core(line).name for line in s.tables} for s in SOURCES}
SHARED_NAMES = ("customer", "employee", "invoice", "supplier", "vendor", "account", "rep", "agent", "shopper")


@pytest.fixture(scope="module")
def suite() -> EvalSuite:
    return load_suite(wide_routing_suite_path())


@pytest.fixture(scope="module")
def schemas(wide_bed: Any) -> dict[str, Any]:
    project = Project.load(wide_bed.config)
    with DatasourceRegistry(project.config) as registry:
        return {ds: registry.snapshot(ds) for ds in registry.ids}


def _answers(suite: EvalSuite) -> list[EvalCase]:
    return [c for c in suite.cases if c.kind == "answer"]


def _reads(sql: str, snapshot: Any) -> tuple[set[str], set[str]]:
    """The tables and ``table.column`` names ``sql`` reads, resolved against the bed's schema."""
    schema = {t.name: {c.name: "TEXT" for c in t.columns} for t in snapshot.tables}
    tree = qualify(sqlglot.parse_one(sql, read=snapshot.engine), schema=schema, dialect=snapshot.engine)
    tables, columns = set(), set()
    for scope in traverse_scope(tree):
        for source in scope.sources.values():
            if isinstance(source, exp.Table):
                tables.add(source.name)
        for column in scope.columns:
            source = scope.sources.get(column.table)
            if isinstance(source, exp.Table):
                columns.add(f"{source.name}.{column.name}")
    return tables, columns


def test_the_suite_has_over_100_approved_cases_of_each_kind(suite: EvalSuite) -> None:
    assert len(suite.cases) >= 100
    assert all(c.status == "approved" and c.origin == "hand" and c.outcome == {"admin": "allowed"}
               for c in suite.cases)
    kinds = Counter(c.kind for c in suite.cases)
    assert kinds == {"answer": 96, "routing": 12}
    ids = [c.id for c in suite.cases]
    questions = [c.question.lower() for c in suite.cases]
    assert len(set(ids)) == len(ids) and len(set(questions)) == len(questions)


def test_tags_say_what_each_case_is(suite: EvalSuite) -> None:
    counts = Counter(tag for c in suite.cases for tag in c.tags)
    assert set(counts) <= KINDS | set(SOURCE_IDS)
    assert (counts["paraphrase"], counts["ambiguous"], counts["cross-database"]) == (24, 15, 12)
    for case in suite.cases:
        assert set(case.datasources) <= set(case.tags), case.id  # --cases <datasource> selects it
        if case.kind == "answer":
            assert len({"single-table", "join"} & set(case.tags)) == 1, case.id
            assert ("join" in case.tags) == (len(case.tables) > 1), case.id
        assert ("cross-database" in case.tags) == (case.kind == "routing") == (len(case.datasources) == 2)
    # each datasource has its share of the questions
    assert Counter(c.datasources[0] for c in _answers(suite)) == dict.fromkeys(SOURCE_IDS, 16)


def test_an_ambiguous_question_uses_a_name_several_datasources_hold(suite: EvalSuite) -> None:
    for case in suite.cases:
        if "ambiguous" in case.tags:
            assert any(name in case.question.lower() for name in SHARED_NAMES), case.id


def test_paraphrases_come_in_pairs_of_one_datasource(suite: EvalSuite) -> None:
    groups: dict[str, list[EvalCase]] = {}
    for case in suite.cases:
        assert ("paraphrase" in case.tags) == (case.paraphrase_group is not None), case.id
        if case.paraphrase_group:
            groups.setdefault(case.paraphrase_group, []).append(case)
    assert len(groups) == 12
    for name, members in groups.items():
        assert len(members) == 2 and members[0].datasources == members[1].datasources, name
        assert members[0].question != members[1].question


def test_no_question_is_a_sample_question_of_the_bed(suite: EvalSuite) -> None:
    samples = {q.lower() for s in SOURCES for q in s.sample_questions}
    assert not [c.id for c in suite.cases if c.question.lower() in samples]  # routing is not handed the answer


def test_answer_cases_read_exactly_the_core_tables_and_columns_they_list(suite: EvalSuite,
                                                                        schemas: dict[str, Any]) -> None:
    for case in _answers(suite):
        (ds,) = case.datasources
        tables, columns = _reads(case.sql, schemas[ds])
        assert tables == set(case.tables), case.id
        assert columns == set(case.columns), case.id
        assert set(case.tables) <= CORES[ds], case.id  # the gold is never a staging copy or a backup


def test_rows_are_what_the_sql_returns_on_the_bed_today(suite: EvalSuite, wide_bed: Any, tmp_path: Path) -> None:
    copy = tmp_path / "wide_routing.yaml"
    shutil.copy(wide_routing_suite_path(), copy)
    project = Project.load(wide_bed.config)
    with DatasourceRegistry(project.config) as registry:
        report = regenerate(copy, registry)
    assert report.failed == [] and report.cases == 96
    assert report.unchanged, "the committed rows differ from what the SQL returns on the bed"
    assert all(c.rows for c in _answers(suite))  # every question has an answer on the bed
