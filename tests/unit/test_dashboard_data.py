"""The dashboard's data: one run per (stored run, config, suite), verdicts by the gate's own reading
(every pass must pass; executed results where the mode executes, status where it does not;
leniently; on neighbours), texts kept once, the same inputs giving the same data."""

from datetime import UTC, datetime
from pathlib import Path

import pytest

from nl2sql_assets.evaluation.history.dashboard import DashFlag, SourcedRun, dashboard_data, read_sources
from nl2sql_assets.evaluation.judging.scorers.base import Score
from nl2sql_assets.evaluation.reporting.board import Board
from nl2sql_assets.evaluation.running.results import CaseRecord, NeighbourRun

DAY = datetime(2026, 1, 1, tzinfo=UTC)


def rec(case: str, status: str, *, suite: str = "s", role: str = "analyst", mode: str = "plans", pass_index: int = 1,
        execution: str | None = "same", lenient: str | None = None, reason: str = "", sql: str | None = None,
        cost: float | None = None, overturned: bool = False, kind: str = "answer") -> CaseRecord:
    scores = {"neighbour_match": Score(value=0.0, passed=False, detail={"reason": "fails_on_neighbour"})} if overturned else {}
    return CaseRecord(suite=suite, case_id=case, role=role, config="c", mode=mode, pass_index=pass_index,
                      expected="allowed", status=status, kind=kind,
                      execution_status=status if execution == "same" else execution,
                      lenient_status=lenient, reason=reason, sql=sql, cost_usd=cost, scores=scores)


def run(records: list[CaseRecord], *, mode: str = "plans", day: int = 1, config: str = "c",
        neighbours: bool = False, where: str = "r.json") -> SourcedRun:
    board = Board.model_construct(config=config, results=records)
    hood = NeighbourRun(count=10, seed=1, candidates=40, max_rows=50, generator_version=3) if neighbours else None
    return SourcedRun("record", where, mode, DAY.replace(day=day), 1, hood, {config: board})


@pytest.mark.parametrize(("records", "mode", "strict", "lenient"), [
    # one character per case of the page, cases ordered by suite, case id and role
    ([rec("a", "pass"), rec("b", "fail")], "plans", "pf", "pf"),
    ([rec("b", "fail"), rec("a", "pass")], "plans", "pf", "pf"),
    # every pass must pass (the gate's key_passes): a case flaky across passes fails
    ([rec("a", "pass"), rec("a", "fail", pass_index=2)], "plans", "f", "f"),
    # lenient: the lenient verdict where there is one
    ([rec("a", "fail", lenient="pass")], "plans", "f", "p"),
    # where nothing executes the status is the verdict (no execution verdict on retrieval cases)
    # (and there is no lenient reading: None, never a row of fails)
    ([rec("a", "pass", mode="retrieval", execution=None), rec("b", "fail", mode="retrieval", execution=None)],
     "retrieval", "pf", None),
    # an executing mode reads executed results: a routing case (no execution verdict) is not run
    ([rec("a", "pass", execution=None, kind="routing"), rec("b", "pass")], "plans", ".p", ".p"),
    # a skip is not a verdict
    ([rec("a", "skip"), rec("b", "pass")], "plans", ".p", ".p"),
])
def test_each_case_reads_as_the_gate_reads_it(records, mode, strict, lenient):
    data = dashboard_data([run(records, mode=mode)])
    (made,) = data.runs
    assert (made.strict, made.lenient, made.robust) == (strict, lenient, None)


def test_runs_of_other_cases_mark_the_cases_they_did_not_run():
    data = dashboard_data([run([rec("a", "pass")], day=2), run([rec("b", "fail")], day=1, where="older.json")])
    assert [c.case_id for c in data.cases] == ["a", "b"]
    assert [(r.where, r.strict) for r in data.runs] == [("older.json", ".f"), ("r.json", "p.")]  # oldest first


def test_a_run_on_neighbours_reads_an_overturned_pass_as_a_fail_there_only():
    records = [rec("a", "pass", overturned=True), rec("b", "pass"), rec("c", "fail")]
    (made,) = dashboard_data([run(records, neighbours=True)]).runs
    assert (made.strict, made.robust, made.neighbours) == ("ppf", "fpf", "K 10, seed 1")


def test_a_record_of_several_suites_is_one_run_per_suite_and_roles_are_cases():
    records = [rec("a", "pass", suite="s1"), rec("a", "fail", suite="s1", role="viewer"), rec("a", "pass", suite="s2")]
    data = dashboard_data([run(records)])
    assert [c.key for c in data.cases] == ["s1/a@analyst", "s1/a@viewer", "s2/a@analyst"]
    assert [(r.suite, r.strict) for r in data.runs] == [("s1", "pf."), ("s2", "..p")]
    assert len({r.id for r in data.runs}) == 2


def test_reasons_and_sql_are_kept_once_and_a_passing_case_has_no_reason():
    first = [rec("a", "fail", reason="wrong rows", sql="SELECT 1"), rec("b", "pass", sql="SELECT 2", reason="")]
    second = [rec("a", "fail", reason="wrong rows", sql="SELECT 1"), rec("b", "fail", reason="timeout", sql="SELECT 2")]
    data = dashboard_data([run(first, day=1), run(second, day=2)])
    assert data.reasons == ["wrong rows", "timeout"] and data.sql == ["SELECT 1", "SELECT 2"]
    assert [(r.reasons, r.sql) for r in data.runs] == [([0, -1], [0, 1]), ([0, 1], [0, 1])]


def test_cost_counts_every_case_run_and_questions_come_from_the_suites():
    records = [rec("a", "pass", cost=0.002), rec("a", "pass", pass_index=2, cost=0.003), rec("b", "fail")]
    data = dashboard_data([run(records)], questions={"s": {"a": ("How many?", "SELECT count(*) FROM t")}})
    (made,) = data.runs
    assert made.cost_usd == pytest.approx(0.005) and made.case_runs == 3
    assert (data.cases[0].question, data.cases[0].gold_sql) == ("How many?", "SELECT count(*) FROM t")
    assert data.cases[1].question is None


def test_the_same_runs_give_the_same_data_whatever_order_they_are_read_in():
    runs = [run([rec("a", "pass", reason="x")], day=1, where="1.json"),
            run([rec("b", "fail", reason="y")], day=2, where="2.json"),
            run([rec("a", "fail", reason="y")], day=2, where="3.json")]
    assert dashboard_data(runs).model_dump_json() == dashboard_data(list(reversed(runs))).model_dump_json()


def test_the_repositorys_records_read_back(tmp_path: Path):
    """The committed records (every mode the repository records), through the files."""
    root = Path(__file__).resolve().parents[2] / "benchmarks"
    data = dashboard_data(read_sources([root]))
    assert {r.mode for r in data.runs} == {"plans", "retrieval"}
    for made in data.runs:
        assert len(made.strict) == len(made.reasons) == len(made.sql) == len(data.cases)
        assert (made.lenient is None) == (made.mode == "retrieval")
        assert made.strict.count("p") + made.strict.count("f") > 0
        assert made.where.endswith(".json") and not made.where.startswith("/")


def test_how_the_rows_differed_and_why_a_neighbour_overturned_are_kept_per_case():
    wrong = rec("a", "fail", reason="wrong_rows")
    wrong.scores["result_match"] = Score(value=0.0, passed=False, detail={"message": "2 rows, the gold has 3"})
    overturned = rec("b", "pass")
    overturned.scores["neighbour_match"] = Score(value=0.0, passed=False, detail={
        "reason": "fails_on_neighbour", "message": "rows differ", "neighbour": "n03.sqlite"})
    data = dashboard_data([run([wrong, overturned, rec("c", "pass")], neighbours=True)])
    (made,) = data.runs
    assert [data.reasons[n] if n >= 0 else None for n in made.differences] == [
        "2 rows, the gold has 3", "on neighbour n03.sqlite: rows differ", None]
    assert (made.strict, made.robust) == ("fpp", "ffp")


def test_the_gold_audit_of_the_runs_is_kept_once_in_order():
    flag = DashFlag(suite="s", case_id="a", kind="tie_dependent", message="ties under LIMIT 3")
    other = DashFlag(suite="s", case_id="0", kind="empty_gold", message="no rows")
    first = run([rec("a", "pass")], day=1)
    second = run([rec("a", "pass")], day=2)
    first = SourcedRun(**{**first.__dict__, "audit": (flag,)})
    second = SourcedRun(**{**second.__dict__, "audit": (flag, other)})
    assert dashboard_data([first, second]).audit == [other, flag]


def test_a_record_keeps_its_runs_gold_audit_and_the_page_reads_it_back(tmp_path: Path):
    from nl2sql_assets.evaluation.history.records import load_record, records_from_report, write_record
    from nl2sql_assets.evaluation.neighbours.audit import AuditFlag
    from nl2sql_assets.evaluation.reporting.report import build_report
    from tests.unit.test_gate import report_parts

    report = build_report(*report_parts({"c00": "pass", "c01": "fail"}, mode="plans"))
    flag = AuditFlag(suite="s", case="c01", kind="empty_on_original", message="the gold returns no row")
    report = report.model_copy(update={"gold_audit": [flag]})
    (record,) = records_from_report(report)
    path = write_record(record, tmp_path)
    assert load_record(path).gold_audit == [flag]
    data = dashboard_data(read_sources([tmp_path]))
    assert data.audit == [DashFlag(suite="s", case_id="c01", kind="empty_on_original",
                                   message="the gold returns no row")]
