"""The demo on each server, as a user runs it: ``init --demo DIR --database URL``, then ``eval run``
in every mode and ``eval grade``. Every answerable case's rows on the server equal the rows its
original SQL gives on the original files; mode plans passes every case run for every role."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets.cli import main
from nl2sql_assets.config import load_config
from nl2sql_assets.evaluation.reporting.board import load_report
from nl2sql_assets.evaluation.suites import load_suite
from tests.servers.conftest import ServerProject


def _cli(*argv: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def test_the_demo_on_a_server_gives_the_original_rows_for_every_case(server_project: ServerProject) -> None:
    demo = server_project.demo.server
    assert demo is not None and demo.engine == server_project.server.engine
    assert demo.differences == {}  # every answerable case: the server's rows are the original file's
    assert demo.tables == {"chinook": 11, "support": 4, "webanalytics": 5}
    assert demo.rows["chinook"] == 15607
    assert demo.translated["chinook.yaml"] == 43 and demo.translated["multidomain.yaml"] == 126
    config = load_config(server_project.root / "nl2sql.yaml")
    assert {ds.id: ds.engine for ds in config.datasources} == {
        "chinook": server_project.server.engine, "support": server_project.server.engine,
        "webanalytics": server_project.server.engine}
    # the suites read the server: their SQL is the server's dialect, their rows regenerated there
    chinook = load_suite(server_project.root / "suites" / "chinook.yaml")
    assert "translated" in chinook.header
    assert all(c.rows is not None for c in chinook.cases if c.sql and "allowed" in c.outcome.values())


@pytest.mark.parametrize("suite", ["chinook.yaml", "multidomain.yaml"])
def test_mode_plans_passes_every_case_run_on_the_server(server_demo: Path, tmp_path: Path, suite: str) -> None:
    out_file = tmp_path / "plans.json"
    code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "eval", "run", "--mode", "plans",
                          "--suite", server_demo / "suites" / suite, "--out", out_file)
    assert code == 0, out + err
    report = load_report(out_file)
    board = report.configs["plans"]
    assert board.accuracy.execution is not None
    assert board.accuracy.execution.passed == board.accuracy.execution.total > 40
    assert [r.case_id for r in board.results if r.status == "fail"] == []
    # graded on the server's own neighbour databases too: every plan's SQL holds there
    assert report.neighbours is not None and report.neighbours.original_only == []
    summary = board.summaries()["neighbour_match"]
    assert summary.questions > 40 and summary.robust.passed == summary.questions and not summary.overturned
    assert {d.engine for d in report.databases} == {server_demo_engine(server_demo)}


def server_demo_engine(root: Path) -> str:
    return load_config(root / "nl2sql.yaml").datasources[0].engine


def test_the_policy_probes_hold_on_the_server(server_demo: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "probes.json"
    code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "eval", "run", "--mode", "plans",
                          "--suite", server_demo / "suites" / "chinook_policy.yaml", "--out", out_file)
    assert code == 0, out + err
    assert "recall 100.0%" in out and "FN 0" in out and "FP 0" in out


def test_mode_retrieval_routes_and_retrieves_on_the_server(server_demo: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "retrieval.json"
    code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "eval", "run", "--mode", "retrieval",
                          "--suite", server_demo / "suites" / "chinook.yaml", "--out", out_file)
    assert code == 0, out + err
    assert "table recall 98.1%" in out and "routing top-1 100.0%" in out


def test_eval_grade_on_the_server(server_demo: Path, tmp_path: Path) -> None:
    suite = load_suite(server_demo / "suites" / "chinook.yaml")
    answerable = [c for c in suite.cases if c.sql and c.rows is not None]
    predictions = {c.id: c.sql for c in answerable}
    predictions[answerable[0].id] = "SELECT 1"
    predicted = tmp_path / "predictions.json"
    predicted.write_text(json.dumps(predictions), encoding="utf-8")
    out_file = tmp_path / "grade.json"
    code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "eval", "grade", predicted, "--suite",
                          server_demo / "suites" / "chinook.yaml", "--out", out_file)
    assert code == 0, out + err
    graded = json.loads(out_file.read_text(encoding="utf-8"))
    assert graded["execution"]["passed"] == len(answerable) - 1
    assert [c["case_id"] for c in graded["cases"] if not c["strict"]["passed"]] == [answerable[0].id]


def test_regenerate_on_the_server_changes_nothing(server_demo: Path) -> None:
    suite = server_demo / "suites" / "chinook.yaml"
    before = suite.read_bytes()
    code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "eval", "regenerate", suite)
    assert code == 0, out + err
    assert suite.read_bytes() == before
