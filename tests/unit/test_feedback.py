"""Feedback: marks on stored case runs, and ``feedback export --good``: good runs as draft cases
(origin feedback) in a file of their own, from a real mode plans run stored in the warehouse."""

from __future__ import annotations

from pathlib import Path

import pytest

from nl2sql_assets import Project
from nl2sql_assets.cli import main
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.history import Warehouse
from nl2sql_assets.evaluation.history.feedback import FeedbackError, export_good, rate, ratings
from nl2sql_assets.evaluation.running import RunRequest
from nl2sql_assets.evaluation.suites import load_suite


@pytest.fixture
def stored(demo_project: Path) -> Warehouse:
    """chinook_001 (viewer refused) and chinook_002 run in mode plans, stored as pass 1."""
    with Project.load(demo_project / "nl2sql.yaml") as project:
        runs = project.evals.run_cases(RunRequest(mode="plans", cases=["chinook_001", "chinook_002"]))
        project.warehouse.write_pass("chinook", "plans", 1, runs.records, runs.meta)
        return project.warehouse


def test_good_runs_become_drafts_with_the_run_s_sql_and_the_roles_that_asked(demo_project: Path,
                                                                           stored: Warehouse) -> None:
    out = demo_project / "suites" / "feedback.yaml"
    rate(stored, "chinook", "plans", "chinook_002@analyst", "bad", note="the wrong column order")
    report = export_good(stored, out)
    suite = load_suite(out)
    assert report.drafted == len(suite.cases) == 2 and report.case_ids == [c.id for c in suite.cases]
    by_question = {c.question: c for c in suite.cases}
    first = by_question[load_suite(demo_project / "suites" / "chinook.yaml").case("chinook_001").question]
    assert (first.status, first.origin, first.datasources) == ("draft", "feedback", ["chinook"])
    assert first.outcome == {"admin": "allowed", "analyst": "allowed"}  # the viewer was refused: not a good run
    assert first.sql is not None and "Customer" in first.sql and first.rows is None
    second = next(c for c in suite.cases if c is not first)
    assert second.outcome == {"admin": "allowed"}  # analyst's run was marked bad
    assert report.runs == 3 and report.skipped == []  # 001 admin, analyst; 002 admin (refusals are no answer)

    again = export_good(stored, out)  # a question and SQL already drafted is not drafted again
    assert again.drafted == 0 and load_suite(out) == suite


def test_a_person_may_mark_a_failing_run_good_and_the_newest_mark_wins(demo_project: Path,
                                                                      stored: Warehouse) -> None:
    rate(stored, "chinook", "plans", "chinook_002@admin", "bad")
    rate(stored, "chinook", "plans", "chinook_002@admin", "good", pass_index=1)
    assert [m.rating for m in ratings(stored)] == ["bad", "good"]
    report = export_good(stored, demo_project / "fb.yaml")
    outcomes = [c.outcome for c in load_suite(demo_project / "fb.yaml").cases]
    assert {"admin": "allowed", "analyst": "allowed"} in outcomes and report.drafted == 2
    rate(stored, "chinook", "plans", "chinook_001@viewer", "good")  # marked good, but refused: no SQL to draft
    report = export_good(stored, demo_project / "fb2.yaml")
    assert report.skipped == ["chinook/plans/pass 1: chinook_001@viewer: the run executed no SQL"]
    with pytest.raises(FeedbackError, match="no stored run of chinook_009@admin"):
        rate(stored, "chinook", "plans", "chinook_009@admin", "good")
    with pytest.raises(FeedbackError, match="CASE_ID@ROLE"):
        rate(stored, "chinook", "plans", "chinook_002", "good")


def test_drafts_never_go_into_a_reviewed_suite(demo_project: Path, stored: Warehouse) -> None:
    reviewed = demo_project / "suites" / "chinook.yaml"
    before = reviewed.read_bytes()
    with pytest.raises(RunRefused, match="approved case"):
        export_good(stored, reviewed)
    assert reviewed.read_bytes() == before


def test_the_cli_marks_and_exports(demo_project: Path, stored: Warehouse, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(demo_project / "nl2sql.yaml")
    assert main(["--config", config, "feedback", "rate", "chinook", "chinook_001@admin", "--config", "plans",
                 "--bad"]) == 0
    assert "marked chinook_001@admin (chinook, plans) bad" in capsys.readouterr().out
    out = demo_project / "good.yaml"
    assert main(["--config", config, "feedback", "export", "--good", "--out", str(out)]) == 0
    assert "2 draft(s) from" in capsys.readouterr().out
    assert all(c.origin == "feedback" for c in load_suite(out).cases)
    with pytest.raises(SystemExit) as info:  # --good is required
        main(["--config", config, "feedback", "export", "--out", str(out)])
    assert info.value.code == 2
