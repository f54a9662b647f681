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


def test_exactly_the_runs_marked_good_become_drafts_with_the_run_s_sql_and_roles(demo_project: Path,
                                                                                  stored: Warehouse) -> None:
    out = demo_project / "suites" / "feedback.yaml"
    for run in ("chinook_001@admin", "chinook_001@analyst", "chinook_002@admin"):
        rate(stored, "chinook", "plans", run, "good")
    rate(stored, "chinook", "plans", "chinook_002@analyst", "bad", note="the wrong column order")
    report = export_good(stored, out)
    suite = load_suite(out)
    # three thumbs-up runs; 002@analyst passed too, but a pass alone is no thumbs-up
    assert report.runs == 3 and report.skipped == []
    assert report.drafted == len(suite.cases) == 2 and report.case_ids == [c.id for c in suite.cases]
    by_question = {c.question: c for c in suite.cases}
    first = by_question[load_suite(demo_project / "suites" / "chinook.yaml").case("chinook_001").question]
    assert (first.status, first.origin, first.datasources) == ("draft", "feedback", ["chinook"])
    assert first.outcome == {"admin": "allowed", "analyst": "allowed"}
    assert first.sql is not None and "Customer" in first.sql and first.rows is None
    second = next(c for c in suite.cases if c is not first)
    assert second.outcome == {"admin": "allowed"}  # analyst's run was marked bad

    again = export_good(stored, out)  # a question and SQL already drafted is not drafted again
    assert again.drafted == 0 and load_suite(out) == suite


def test_nothing_marked_nothing_exported(demo_project: Path, stored: Warehouse) -> None:
    report = export_good(stored, demo_project / "none.yaml")
    assert (report.runs, report.drafted) == (0, 0)  # every run passed; none was marked good
    assert not report.written and not (demo_project / "none.yaml").exists()  # no empty drafts file


def test_a_person_may_mark_a_failing_run_good_and_the_newest_mark_wins(demo_project: Path,
                                                                      stored: Warehouse) -> None:
    rate(stored, "chinook", "plans", "chinook_002@admin", "bad")
    rate(stored, "chinook", "plans", "chinook_002@admin", "good", pass_index=1)
    rate(stored, "chinook", "plans", "chinook_001@admin", "good")
    rate(stored, "chinook", "plans", "chinook_001@admin", "bad")
    assert [m.rating for m in ratings(stored)] == ["bad", "good", "good", "bad"]
    report = export_good(stored, demo_project / "fb.yaml")
    assert report.runs == 1 and [c.outcome for c in load_suite(demo_project / "fb.yaml").cases] == [
        {"admin": "allowed"}]
    rate(stored, "chinook", "plans", "chinook_001@viewer", "good")  # marked good, but refused: no SQL to draft
    report = export_good(stored, demo_project / "fb2.yaml")
    assert report.skipped == ["chinook/plans/pass 1: chinook_001@viewer: the run executed no SQL"]
    with pytest.raises(FeedbackError, match="no stored run"):
        rate(stored, "chinook", "plans", "chinook_009@admin", "good")
    with pytest.raises(FeedbackError, match="CASE_ID@ROLE"):
        rate(stored, "chinook", "plans", "chinook_002", "good")


def test_a_mark_names_the_run_it_rates(demo_project: Path, stored: Warehouse) -> None:
    mark = rate(stored, "chinook", "plans", "chinook_002@admin", "good")
    assert set(mark.runs) == {1} and mark.runs[1].sql_sha256 is not None
    assert export_good(stored, demo_project / "before.yaml").runs == 1
    # The pass is run again: the mark was on the run before, not on this one.
    with Project.load(demo_project / "nl2sql.yaml") as project:
        runs = project.evals.run_cases(RunRequest(mode="plans", cases=["chinook_002"]))
        project.warehouse.write_pass("chinook", "plans", 1, runs.records, runs.meta)
    assert export_good(stored, demo_project / "after.yaml").runs == 0


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
    assert main(["--config", config, "feedback", "rate", "chinook", "chinook_002@admin", "--config", "plans",
                 "--good"]) == 0
    capsys.readouterr()
    out = demo_project / "good.yaml"
    assert main(["--config", config, "feedback", "export", "--good", "--out", str(out)]) == 0
    assert "1 draft(s) from 1 thumbs-up run(s)" in capsys.readouterr().out
    assert all(c.origin == "feedback" for c in load_suite(out).cases)
    with pytest.raises(SystemExit) as info:  # --good is required
        main(["--config", config, "feedback", "export", "--out", str(out)])
    assert info.value.code == 2
