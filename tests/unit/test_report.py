"""Boards built from hand-written case records: each number below is worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nl2sql_assets.evaluation.judging.scorers.base import Score
from nl2sql_assets.evaluation.judging.stats import Rate
from nl2sql_assets.evaluation.reporting.board import EvalReport, load_report
from nl2sql_assets.evaluation.reporting.report import build_report, to_markdown
from nl2sql_assets.evaluation.running.results import (
    CaseRecord,
    ConfigMeta,
    DatabaseRef,
    RunMeta,
    RunStamp,
    SuiteRef,
)
from nl2sql_assets.llm.calls import Usage

STAMP = RunStamp(started_at=datetime(2026, 3, 1, 9, 30, tzinfo=UTC),
                 finished_at=datetime(2026, 3, 1, 9, 41, tzinfo=UTC),
                 package_version="0.1.0", git_commit="a" * 40, git_dirty=False)


def rec(case: str, status: str = "pass", *, role: str = "analyst", config: str = "default",
        mode: str = "full", execution: str | None = "same", lenient: str | None = None, **kw) -> CaseRecord:
    return CaseRecord(suite="chinook", case_id=case, role=role, config=config, mode=mode,
                      expected=kw.pop("expected", "allowed"), status=status,
                      execution_status=status if execution == "same" else execution,
                      lenient_status=lenient, **kw)


def meta(**kw) -> RunMeta:
    base = dict(mode="full", suites=[SuiteRef(name="chinook", path="suites/chinook.yaml", digest="d1")],
                roles=["analyst", "viewer"], passes=1, curated=True, run_stamp=STAMP,
                database=DatabaseRef(datasource_id="chinook", engine="sqlite", schema_fingerprint="fp",
                                     tables=11, columns=64),
                configs={"default": ConfigMeta(models={"planner": "openai/gpt-x"}, planned_cases=6,
                                               completed_cases=6)},
                scorers=["result_match", "outcome", "faithfulness"])
    base.update(kw)
    return RunMeta(**base)


def table_of_six() -> list[CaseRecord]:
    """c1 right; c2 right rows but an unfaithful answer; c3 right only leniently; r1 a routing
    case; c4 an execution error; c5 skipped (a clarify case with clarify off)."""
    return [
        rec("c1", "pass", lenient="pass", tags=["join"], difficulty="easy",
            faithfulness={"faithful": True, "unsupported_numbers": [], "unsupported_entities": [], "checked": 2}),
        rec("c2", "fail", execution="pass", lenient="fail", tags=["join", "aggregation"], difficulty="hard",
            reason="faithfulness: 1,300 is not in the rows",
            faithfulness={"faithful": False, "unsupported_numbers": ["1,300"],
                          "unsupported_entities": ["**Rock**"], "checked": 3}),
        rec("c3", "fail", lenient="pass", tags=["aggregation"], difficulty="hard",
            reason="result_match: columns in another order",
            scores={"result_match": Score(value=0.0, passed=False, detail={"lenient": True}),
                    "outcome": Score(value=1.0, passed=True)}),
        rec("r1", "pass", execution=None, tags=["routing"]),
        rec("c4", "error", role="viewer", error_code="EXECUTION_ERROR", error_message="no such column"),
        rec("c5", "skip", role="viewer", execution="skip", expected="clarify"),
    ]


def test_accuracies_from_a_hand_table() -> None:
    board = build_report(table_of_six(), meta()).configs["default"]
    acc = board.accuracy
    # five runs scored (c5 skipped): c1 and r1 pass
    assert (acc.overall.passed, acc.overall.total) == (2, 5)
    # lenient: c1, c3 and r1 (no lenient verdict: its status)
    assert (acc.lenient.passed, acc.lenient.total) == (3, 5)
    # execution leaves the routing case out: c1, c2 pass of c1..c4
    assert (acc.execution.passed, acc.execution.total) == (2, 4)
    # c3's rows match leniently and its outcome passed
    assert (acc.execution_lenient.passed, acc.execution_lenient.total) == (3, 4)
    assert acc.by_tag["join"].passed == 1 and acc.by_tag["join"].total == 2
    assert acc.by_tag["aggregation"].passed == 0 and acc.by_tag["aggregation"].total == 2
    assert acc.by_difficulty["hard"].total == 2 and acc.by_difficulty["easy"].passed == 1


def test_summary_counts_each_verdict_per_role() -> None:
    board = build_report(table_of_six(), meta()).configs["default"]
    assert board.summary.roles["analyst"] == {"pass": 2, "fail": 2, "error": 0, "env_error": 0, "skip": 0}
    assert board.summary.roles["viewer"] == {"pass": 0, "fail": 0, "error": 1, "env_error": 0, "skip": 1}
    assert board.summary.total == {"pass": 2, "fail": 2, "error": 1, "env_error": 0, "skip": 1}
    assert board.errors_by_code == {"EXECUTION_ERROR": 1}


def test_faithfulness_lists_each_unfaithful_answer() -> None:
    board = build_report(table_of_six(), meta()).configs["default"]
    faith = board.faithfulness
    assert faith is not None
    assert (faith.answers, faith.faithful, faith.rate) == (2, 1, 0.5)
    assert [(u.case, u.role) for u in faith.unfaithful] == [("c2", "analyst")]
    assert faith.unfaithful[0].unsupported_numbers == ["1,300"]
    assert faith.unfaithful[0].unsupported_entities == ["**Rock**"]


def test_generated_accuracy_reads_the_curated_off_rerun() -> None:
    rerun = rec("c1", "fail", reason="result_match: rows differ", cost_usd=0.02,
                usage={"planner": Usage(input_tokens=100, output_tokens=10)})
    records = [
        rec("c1", "pass", source="verified", generated=rerun, cost_usd=0.0),
        rec("c2", "pass", cost_usd=0.01, usage={"planner": Usage(input_tokens=50, output_tokens=5)}),
    ]
    report = build_report(records, meta())
    acc = report.configs["default"].accuracy
    assert acc.overall.passed == 2
    assert acc.generated.passed == 1 and acc.generated.total == 2
    assert acc.by_source["verified"].passed == 1
    assert acc.generated_by_source["verified"].passed == 0
    assert acc.generated_by_source["generated"].passed == 1
    assert report.accuracy == 1.0 and report.accuracy_generated == 0.5
    board = report.configs["default"]
    # the rerun's tokens and dollars are spent too
    assert board.tokens_by_node["planner"] == Usage(input_tokens=150, output_tokens=15)
    assert board.cost.total_usd == pytest.approx(0.03)
    assert board.cost.per_case_usd == pytest.approx(0.015)


def three_passes() -> list[CaseRecord]:
    """A passes thrice with the same SQL; B is flaky (and its SQL changes); C always fails."""
    out = []
    for i, (a, b, c) in enumerate([("pass", "pass", "fail"), ("pass", "fail", "fail"),
                                   ("pass", "pass", "fail")], start=1):
        out.append(rec("A", a, pass_index=i, sql="SELECT 1", rows_sha256="h1"))
        out.append(rec("B", b, pass_index=i, sql="SELECT 2" if i != 2 else "SELECT 2 LIMIT 5",
                       rows_sha256="h2"))
        out.append(rec("C", c, pass_index=i, sql="SELECT 3", rows_sha256="h3"))
    return out


def test_pass_k_over_three_passes_drops_the_flaky_case() -> None:
    board = build_report(three_passes(), meta(passes=3)).configs["default"]
    acc = board.accuracy
    assert (acc.overall.passed, acc.overall.total) == (5, 9)  # mean accuracy counts runs
    assert acc.pass_k.k == 3
    assert (acc.pass_k.overall.passed, acc.pass_k.overall.total) == (1, 3)  # only A
    assert acc.pass_k.overall.rate == pytest.approx(1 / 3)
    assert acc.pass_k.execution.passed == 1
    assert acc.pass_k.execution_lenient is not None and acc.pass_k.execution_lenient.passed == 1


def test_environment_errors_are_counted_apart_from_accuracy() -> None:
    records = [rec("c1", "pass", cost_usd=0.01), rec("c2", "fail", cost_usd=0.02),
               rec("c3", "error", execution="error", env_error="quota", error_code="PROVIDER_ERROR", cost_usd=0.0),
               rec("c4", "error", execution="error", env_error="rate_limit", error_code="PROVIDER_ERROR",
                   cost_usd=0.005)]
    board = build_report(records, meta()).configs["default"]
    assert (board.accuracy.execution.passed, board.accuracy.execution.total) == (1, 2)
    assert (board.accuracy.overall.passed, board.accuracy.overall.total) == (1, 2)
    assert board.env_errors == {"quota": 1, "rate_limit": 1}
    assert board.cost.total_usd == pytest.approx(0.035)  # what the outage's calls cost is still spent


def test_latency_leaves_warm_up_runs_apart() -> None:
    records = [rec("c1", latency_s=6.9, warmup=True, timings={"resolver": 6.5}),
               *(rec(f"c{i}", latency_s=0.2 + i / 100, timings={"resolver": 0.05}, oracle_latency_s=0.001 * i)
                 for i in range(2, 12))]
    lat = build_report(records, meta()).configs["default"].latency
    assert lat.p50 == pytest.approx(0.265) and lat.max == pytest.approx(0.31)
    assert (lat.warmup_runs, lat.warmup_max) == (1, 6.9)
    assert lat.by_node["resolver"].max == pytest.approx(0.05)
    assert lat.oracle_p50 == pytest.approx(0.0065)
    assert "1 warm-up run(s) apart, the longest 6.90 s" in to_markdown(build_report(records, meta()).configs["default"])


def test_determinism_over_passes() -> None:
    board = build_report(three_passes(), meta(passes=3)).configs["default"]
    det = board.determinism
    assert det is not None
    assert (det.deterministic_cases, det.total_cases) == (2, 3)
    assert det.nondeterministic == ["B@analyst"]
    one_pass = build_report([rec("A", "pass")], meta()).configs["default"]
    assert one_pass.determinism is None


def test_cost_latency_and_retries() -> None:
    records = [
        rec("c1", "pass", cost_usd=0.01, latency_s=1.0, retries=0),
        rec("c2", "pass", cost_usd=0.03, latency_s=2.0, retries=2),
        rec("c3", "fail", cost_usd=None, unknown_cost_calls=1, latency_s=3.0, retries=1),
    ]
    board = build_report(records, meta()).configs["default"]
    assert board.cost.total_usd == pytest.approx(0.04)
    assert board.cost.per_case_usd == pytest.approx(0.04 / 3)
    assert board.cost.unknown_cost_calls == 1
    assert board.latency.mean == pytest.approx(2.0)
    assert board.latency.p50 == pytest.approx(2.0)
    assert 2.0 < board.latency.p95 <= 3.0
    assert (board.retries.total, board.retries.cases_with_retries) == (3, 2)
    assert board.models == {"planner": "openai/gpt-x"}
    assert (board.planned_cases, board.completed_cases) == (6, 6)


def test_scorer_tallies_and_answerability() -> None:
    records = [
        rec("u1", "pass", expected="unanswerable", error_code="QUESTION_NOT_ANSWERABLE",
            scores={"outcome": Score(value=1.0, passed=True)}),
        rec("u2", "fail", expected="unanswerable", scores={"outcome": Score(value=0.0, passed=False)}),
        rec("a1", "fail", error_code="QUESTION_NOT_ANSWERABLE",
            scores={"outcome": Score(value=0.0, passed=False), "result_match": Score(value=0.0, passed=False)}),
        rec("a2", "error", scores={"outcome": Score(value=1.0, passed=True),
                                   "result_match": Score(detail={"error": "boom"})}),
        rec("a3", "pass", scores={"outcome": Score(value=1.0, passed=True),
                                  "result_match": Score(value=1.0, passed=True), "faithfulness": Score()}),
    ]
    board = build_report(records, meta()).configs["default"]
    outcome = board.scores["outcome"]
    assert (outcome.applied, outcome.passed, outcome.failed, outcome.errored) == (5, 3, 2, 0)
    assert outcome.mean == pytest.approx(0.6)
    match = board.scores["result_match"]
    assert (match.applied, match.passed, match.failed, match.errored) == (3, 1, 1, 1)
    assert board.scores["faithfulness"].applied == 0
    ans = board.answerability
    assert ans is not None
    assert (ans.correctly_declined.passed, ans.correctly_declined.total) == (1, 2)
    assert (ans.wrongly_declined.passed, ans.wrongly_declined.total) == (1, 3)


def test_retrieval_recall_summary() -> None:
    def scored(case: str, table: float, column: float, tables: int, columns: int) -> CaseRecord:
        detail = {"table_recall": table, "column_recall": column, "tables_sent": tables,
                  "columns_sent": columns, "missed_tables": [], "missed_columns": []}
        return rec(case, "pass" if column == 1.0 else "fail", mode="retrieval", execution=None,
                   config="retrieval",
                   scores={"retrieval_recall": Score(value=column, passed=column == 1.0, detail=detail)})
    records = [scored("c1", 1.0, 1.0, 8, 20), scored("c2", 1.0, 0.5, 8, 24), scored("c3", 0.5, 0.5, 7, 22)]
    board = build_report(records, meta(mode="retrieval", configs={})).configs["retrieval"]
    r = board.retrieval
    assert r is not None
    assert r.cases == 3
    assert r.table_recall == pytest.approx(2.5 / 3)
    assert r.column_recall == pytest.approx(2.0 / 3)
    assert (r.perfect_tables, r.perfect_columns) == (2, 1)
    assert (r.tables_sent, r.columns_sent) == (pytest.approx(23 / 3), pytest.approx(22.0))
    assert board.answerability is None
    assert board.accuracy.execution.total == 0


def test_wilson_interval_on_27_of_47_in_the_markdown() -> None:
    records = [rec(f"c{i:02d}", "pass" if i < 27 else "fail", reason="" if i < 27 else "result_match: rows differ")
               for i in range(47)]
    board = build_report(records, meta()).configs["default"]
    rate = board.accuracy.overall
    assert (rate.passed, rate.total) == (27, 47)
    assert (round(rate.low, 3), round(rate.high, 3)) == (0.433, 0.705)
    md = to_markdown(board)
    assert "57.4% (43.3%–70.5%)" in md
    assert "| c46 | analyst | 1 | fail | result_match: rows differ |" in md
    assert "Cost per case:" in md and "p50" in md


RATE_TEXT = [
    # passed, total, the share, the cell a page shows, the one-line count
    (27, 47, 27 / 47, "57.4% (43.3%–70.5%)", "57.4% (27/47, 95% CI 43.3%-70.5%)"),
    (0, 3, 0.0, "0.0% (0.0%–56.2%)", "0.0% (0/3, 95% CI 0.0%-56.2%)"),
    (0, 0, None, "n/a", "n/a (0/0)"),  # a rate over nothing is no rate, never 0
]


@pytest.mark.parametrize(("passed", "total", "share", "cell", "count"), RATE_TEXT)
def test_a_rate_and_its_text(passed: int, total: int, share: float | None, cell: str, count: str) -> None:
    rate = Rate.of(passed, total)
    assert rate.rate == share and rate.with_interval() == cell and rate.count_text() == count
    assert rate.text() == ("n/a" if share is None else cell.split(" ")[0])


def test_rate_with_nothing_counted() -> None:
    assert Rate.of(0, 0).model_dump() == {"passed": 0, "total": 0, "rate": None, "low": None, "high": None}
    # a report written before read its empty rates as 0.0: they read as no rate now
    assert Rate.model_validate({"passed": 0, "total": 0, "rate": 0.0, "low": 0.0, "high": 1.0}).rate is None


def test_json_round_trip_and_save_load(tmp_path) -> None:
    records = [*table_of_six(), rec("c1", "pass", config="mini")]
    report = build_report(records, meta(configs={"default": ConfigMeta(), "mini": ConfigMeta()}))
    assert EvalReport.model_validate_json(report.model_dump_json()) == report
    path = report.save(tmp_path / "out" / "eval_full.json")
    assert load_report(path) == report
    assert EvalReport.load(path).database.datasource_id == "chinook"
    # The derived figures are JSON fields too, for readers that do not run our code.
    import json

    data = json.loads(path.read_text())
    assert data["database"]["datasource_id"] == "chinook"
    assert data["accuracy"] == report.accuracy and data["accuracy_generated"] == report.accuracy_generated
    assert [p.name for p in path.parent.iterdir()] == ["eval_full.json"]  # no temp file left


def test_configs_in_order_and_compared_case_by_case() -> None:
    records = [
        rec("c1", "pass", config="big"), rec("c2", "pass", config="big"), rec("c3", "fail", config="big"),
        rec("c1", "pass", config="mini"), rec("c2", "fail", config="mini"), rec("c3", "pass", config="mini"),
    ]
    report = build_report(records, meta(configs={"big": ConfigMeta(), "mini": ConfigMeta()}))
    assert list(report.configs) == ["big", "mini"]
    assert report.accuracy == pytest.approx(2 / 3)
    comp = report.comparison
    assert comp is not None and comp.reference == "big"
    assert comp.headlines["mini"].overall.passed == 2
    diff = comp.differences[0]
    assert diff.config == "mini"
    assert diff.passes_only_here == ["c3@analyst"]
    assert diff.passes_only_in_reference == ["c2@analyst"]
    assert diff.p_value == pytest.approx(1.0)
    single = build_report(records[:3], meta(configs={"big": ConfigMeta()}))
    assert single.comparison is None


def test_meta_accepts_several_databases() -> None:
    dbs = [DatabaseRef(datasource_id=i, engine="duckdb", schema_fingerprint=i) for i in ("support", "chinook")]
    m = meta(database=dbs)
    assert [d.datasource_id for d in m.databases] == ["support", "chinook"]
    assert m.database.datasource_id == "support"
    with pytest.raises(ValueError, match="extra"):
        RunMeta.model_validate({**m.model_dump(), "unexpected": 1})


def test_spec_averages_are_per_question_run_with_their_token_source() -> None:
    """Spec 003: average input and output tokens per question run (measured or estimated), and the
    service's and the gold SQL's average latency over question runs (not distinct cases)."""
    from nl2sql_assets.llm.calls import Usage

    def q(case: str, tokens: tuple[int, int], latency: float, oracle: float | None, source: str) -> CaseRecord:
        return rec(case, "pass", usage={"planner": Usage(input_tokens=tokens[0], output_tokens=tokens[1]),
                                        "synthesizer": Usage(input_tokens=10, output_tokens=5)},
                   latency_s=latency, oracle_latency_s=oracle, token_source=source)

    records = [q("c1", (100, 20), 1.0, 0.002, "measured"), q("c1", (300, 40), 3.0, 0.002, "measured"),
               q("c2", (200, 30), 2.0, None, "estimated")]
    board = build_report(records, meta()).configs["default"]
    a = board.averages
    assert a is not None and a.question_runs == 3
    assert a.average_input_tokens == pytest.approx((110 + 310 + 210) / 3)
    assert a.average_output_tokens == pytest.approx((25 + 45 + 35) / 3)
    assert a.token_source == "mixed"  # some counts were ours: a cost drawn from them is an estimate
    assert a.average_service_latency_ms == pytest.approx(2000.0)
    assert a.average_oracle_latency_ms == pytest.approx(2.0) and a.oracle_timed_runs == 2  # c1's two runs
    assert "On average per question run (3): 210 input / 35 output tokens (mixed)" in to_markdown(board)
    probes_only = build_report([rec("p1", "pass", kind="probe")], meta()).configs["default"]
    assert probes_only.averages is None  # no question runs: no averages, never zeros
