"""Verdicts on gold that cannot stand, read as a user reads them from the command line on the demo
project: a gold that is not SQL is flagged and left out of every rate while the rest is graded on
neighbours; an answer case without rows is refused at load; a baseline judged by another comparator
version is not comparable; a follow-up whose earlier turn failed fails with that turn's reason."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from nl2sql_assets.cli import main
from nl2sql_assets.evaluation.grading import GradeReport
from nl2sql_assets.evaluation.reporting.board import load_report

NOTE_CASE = """
- id: chinook_note
  question: Which employee earns the most?
  datasources: [chinook]
  status: approved
  outcome: {analyst: refused, viewer: refused}
  sql: salaries are not in this database; refused by policy
  plan:
    select:
    - {expr: {kind: column, table: e, name: FirstName}}
    from: {name: Employee, alias: e}
"""


def _cli(*argv: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _note_line(suite: Path) -> int:
    lines = suite.read_text(encoding="utf-8").splitlines()
    start = lines.index("- id: chinook_note")
    return next(n for n, line in enumerate(lines[start:], start=start + 1) if line.startswith("  sql:"))


def test_a_gold_that_is_not_sql_is_flagged_and_in_no_rate(demo_project: Path, tmp_path: Path) -> None:
    suite = demo_project / "suites" / "chinook.yaml"
    suite.write_text(suite.read_text(encoding="utf-8") + NOTE_CASE, encoding="utf-8")
    where = f"{suite}, line {_note_line(suite)}: case 'chinook_note'"
    config = demo_project / "nl2sql.yaml"

    # eval run with neighbours (the demo's evals.yaml sets them): every other case is distilled and graded
    report_path = tmp_path / "plans.json"
    code, out, err = _cli("--config", config, "eval", "run", "--mode", "plans", "--suite", suite,
                          "--out", report_path)
    assert code == 0, out + err
    report = load_report(report_path)
    flags = {(f.case, f.kind): f for f in report.gold_audit}
    for kind in ("gold_unparsable", "gold_fails"):
        flag = flags[("chinook_note", kind)]
        assert flag.message.startswith(where + ": "), flag.message
    summary = report.configs["plans"].scores["neighbour_match"].summary
    assert summary is not None
    robust = summary["robust"]
    assert robust["total"] > 40 and robust["passed"] == robust["total"]  # every plan holds on every neighbour

    # eval grade: the note's prediction is neither a failure nor a pass of the engine
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps({"chinook_001": "SELECT 1", "chinook_note": "SELECT 1"}), encoding="utf-8")
    graded_path = tmp_path / "grade.json"
    code, out, err = _cli("--config", config, "eval", "grade", predictions, "--suite", suite, "--neighbours", 10,
                          "--out", graded_path)
    assert code == 0, out + err
    graded = GradeReport.model_validate_json(graded_path.read_text(encoding="utf-8"))
    assert graded.gold_errors == ["chinook_note"]
    gradable = len(graded.cases) - 1
    assert graded.graded == gradable and graded.execution.total == gradable
    assert graded.execution_neighbours is not None and graded.execution_neighbours.total == gradable
    assert "gold_error" not in graded.reasons
    assert "1 case(s) with a gold error, in no rate" in out and "chinook_note" in out
    assert any(f["kind"] == "gold_unparsable" and f["message"].startswith(where) for f in graded.gold_audit)

    # eval audit prints the same, each line naming the file, the line and the case
    code, out, _ = _cli("--config", config, "eval", "audit", suite)
    assert code == 0
    assert f"chinook_note: gold_unparsable: {where}: " in out and f"chinook_note: gold_fails: {where}: " in out


def test_an_answer_case_without_rows_is_refused_at_load(demo_project: Path, tmp_path: Path) -> None:
    suite = demo_project / "suites" / "mine.yaml"
    suite.write_text("""version: 1
cases:
- id: no_rows
  question: How many genres are there?
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed}
  sql: SELECT COUNT(*) AS genres FROM Genre
""", encoding="utf-8")
    config = demo_project / "nl2sql.yaml"
    for argv in (["eval", "run", "--mode", "plans", "--suite", suite, "--no-neighbours"],
                 ["eval", "grade", tmp_path / "none.json", "--suite", suite]):
        (tmp_path / "none.json").write_text("{}", encoding="utf-8")
        code, out, err = _cli("--config", config, *argv)
        assert code == 2, out + err
        assert f"{suite}, line 3: case no_rows: rows:" in err and "nl2sql-assets eval regenerate" in err
    code, out, err = _cli("--config", config, "eval", "regenerate", suite)
    assert code == 0, out + err
    assert "rows:\n  - {genres: 25}" in suite.read_text(encoding="utf-8")


def test_a_baseline_of_another_comparator_version_is_not_comparable(demo_project: Path, tmp_path: Path) -> None:
    config = demo_project / "nl2sql.yaml"
    suite = demo_project / "suites" / "chinook.yaml"
    first = tmp_path / "first.json"
    run = ["--config", config, "eval", "run", "--mode", "plans", "--suite", suite, "--no-neighbours"]
    code, out, err = _cli(*run, "--out", first)
    assert code == 0, out + err
    root = tmp_path / "recorded"
    root.mkdir()
    code, out, err = _cli("--config", config, "eval", "publish", first, "--root", root)
    assert code == 0, out + err
    benchmarks = root / "benchmarks"
    (record_path,) = benchmarks.rglob("*.json")
    record = json.loads(record_path.read_text(encoding="utf-8"))
    assert record["comparator_version"] == json.loads(first.read_text())["comparator_version"] == 3
    code, out, err = _cli(*run, "--baseline", benchmarks, "--out", tmp_path / "same.json")
    assert code == 0, out + err  # the same versions: comparable, nothing lost

    record["comparator_version"] = 2  # as recorded before infinities became values
    record_path.write_text(json.dumps(record), encoding="utf-8")
    code, out, err = _cli(*run, "--baseline", benchmarks, "--out", tmp_path / "second.json")
    assert code == 2, out + err
    assert "not comparable" in err and "comparator version 2, the run by version 3" in err
    assert "eval publish" in err


FOLLOW_UPS = """version: 1
cases:
- id: fu_{name}
  question: How many tracks does it have?
  datasources: [chinook]
  status: approved
  outcome: {{admin: allowed}}
  sql: SELECT COUNT(*) AS tracks FROM Track t JOIN Genre g ON g.GenreId = t.GenreId WHERE g.Name = 'Rock'
  plan:
    select:
    - {{expr: {{kind: function, name: count, args: [{{kind: star}}]}}, alias: tracks}}
    from: {{name: Track, alias: t}}
    joins:
    - {{type: inner, table: {{name: Genre, alias: g}}, "on": {{kind: binary, op: "=", left: {{kind: column, table: g, name: GenreId}}, right: {{kind: column, table: t, name: GenreId}}}}}}
    where: {{kind: binary, op: "=", left: {{kind: column, table: g, name: Name}}, right: {{kind: literal, value: Rock}}}}
  turns:
  - question: Which genre is called Rock?
    sql: SELECT Name FROM Genre WHERE Name = 'Rock'
    plan:
      select:
      - {{expr: {{kind: column, name: Name}}}}
      from: {{name: Genre}}
      where: {{kind: binary, op: "=", left: {{kind: column, name: Name}}, right: {{kind: literal, value: {answer}}}}}
"""


def test_a_follow_up_whose_earlier_turn_failed_fails_with_that_turns_reason(demo_project: Path,
                                                                           tmp_path: Path) -> None:
    suite = demo_project / "suites" / "followups.yaml"
    suite.write_text(FOLLOW_UPS.format(name="right", answer="Rock")
                     + FOLLOW_UPS.format(name="wrong", answer="Jazz").split("cases:\n", 1)[1], encoding="utf-8")
    config = demo_project / "nl2sql.yaml"
    code, out, err = _cli("--config", config, "eval", "regenerate", suite)
    assert code == 0, out + err
    report_path = tmp_path / "fu.json"
    code, out, err = _cli("--config", config, "eval", "run", "--mode", "plans", "--suite", suite, "--no-neighbours",
                          "--out", report_path)
    records = {r.case_id: r for r in load_report(report_path).configs["plans"].results}
    right, wrong = records["fu_right"], records["fu_wrong"]
    assert right.status == right.execution_status == "pass"
    assert [(t.question, t.result_status, t.passed) for t in right.turns] == [
        ("Which genre is called Rock?", "success", True)]
    # the final turn is right (it names Rock itself); the earlier turn answered Jazz
    assert wrong.status == wrong.execution_status == wrong.lenient_status == "fail"
    assert wrong.reason.startswith("result_match: turn 1 of 2 ('Which genre is called Rock?'): ")
    assert wrong.scores["result_match"].detail["reason"] == "earlier_turn"
    (turn,) = wrong.turns
    assert (turn.passed, turn.reason, turn.row_count, turn.result_status) == (False, "cell_differs", 1, "success")
    assert "Jazz" in (turn.sql or "")
    assert code == 0 and "execution accuracy 50.0% (1/2" in out  # the demo's thresholds ask only that SQL runs
