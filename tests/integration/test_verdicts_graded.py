"""Verdicts a user reads from ``eval grade``, on the demo project's Chinook suite: an infinity is no
count, and a reviewed alternative is accepted as ``eval run`` accepts it, on the original and on
the kept neighbours, the verdict naming the answer it matched."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets.cli import main
from nl2sql_assets.evaluation.grading import GradeReport
from nl2sql_assets.evaluation.suites import load_suite


def _grade(project: Path, tmp_path: Path, predictions: dict[str, str], *extra: Any) -> GradeReport:
    predicted = tmp_path / "predictions.json"
    predicted.write_text(json.dumps(predictions), encoding="utf-8")
    out_file = tmp_path / "grade.json"
    out = io.StringIO()
    argv = ["--config", project / "nl2sql.yaml", "eval", "grade", predicted, "--suite",
            project / "suites" / "chinook.yaml", "--out", out_file, *extra]
    with contextlib.redirect_stdout(out):
        code = main([str(a) for a in argv])
    assert code == 0, out.getvalue()
    return GradeReport.model_validate_json(out_file.read_text(encoding="utf-8"))


def test_an_infinite_count_fails_strictly_and_leniently(demo_project: Path, tmp_path: Path) -> None:
    report = _grade(demo_project, tmp_path, {
        "chinook_001": "SELECT Country, 1e999 FROM Customer GROUP BY Country",  # "how many customers per country"
        "chinook_002": "SELECT 1",
    })
    (graded,) = [g for g in report.cases if g.case_id == "chinook_001"]
    assert not graded.strict.passed and graded.strict.reason in ("missing_rows", "cell_differs")
    assert not graded.lenient.passed


@pytest.mark.parametrize("neighbours", [False, True], ids=["original", "neighbours"])
def test_a_reviewed_alternative_passes_naming_the_answer_it_matched(demo_project: Path, tmp_path: Path,
                                                                    neighbours: bool) -> None:
    suite = load_suite(demo_project / "suites" / "chinook.yaml")
    with_alternatives = [c for c in suite.cases if c.alt_sql and c.status == "approved"]
    assert len(with_alternatives) >= 3
    predictions = {c.id: c.alt_sql[-1] for c in with_alternatives}
    report = _grade(demo_project, tmp_path, predictions, *(["--neighbours", 10] if neighbours else []))
    by_id = {g.case_id: g for g in report.cases}
    for case in with_alternatives:
        graded = by_id[case.id]
        assert graded.strict.passed, (case.id, graded.strict.message)
        assert graded.lenient.passed
        assert graded.matched == f"alt_sql[{len(case.alt_sql)}]"
        assert graded.strict.message == f"rows match alt_sql[{len(case.alt_sql)}]"
        if neighbours:
            assert graded.neighbour_robust is not None and graded.neighbour_robust.passed, graded.neighbour_robust
    # the gold itself is named as the gold rows
    gold = _grade(demo_project, tmp_path, {c.id: c.sql or "" for c in with_alternatives})
    assert {g.matched for g in gold.cases if g.case_id in predictions} == {"rows"}
