"""The scorers: each built-in on hand-built case runs, the verdict rules, and the registry."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from nl2sql_assets.engine.result import (
    EXECUTION_ERROR,
    QUESTION_NOT_ANSWERABLE,
    SECURITY_VIOLATION,
    Answer,
    QueryResult,
    ResultSet,
)
from nl2sql_assets.engine.validator import GENERIC_REFUSAL
from nl2sql_assets.evaluation.judging.scorers import (
    BUILTIN_SCORERS,
    CaseRun,
    Faithfulness,
    NoConfig,
    Outcome,
    ResultMatch,
    RetrievalRecall,
    Routing,
    Score,
    case_status,
    score_run,
)
from nl2sql_assets.evaluation.running.scorers import BUILTINS, ScorerError, ScorerRegistry
from nl2sql_assets.evaluation.suites import EvalCase

# ---------------------------------------------------------------- building blocks


def make_case(**over: Any) -> EvalCase:
    data: dict[str, Any] = {
        "id": "t_001",
        "question": "How many customers per country?",
        "datasources": ["chinook"],
        "status": "approved",
        "outcome": {"admin": "allowed", "analyst": "allowed", "viewer": "refused"},
        "tables": ["Customer"],
        "columns": ["Customer.Country", "Customer.CustomerId"],
        "sql": "SELECT Country, COUNT(CustomerId) AS n FROM Customer GROUP BY Country",
        "rows": [{"Country": "USA", "n": 13}, {"Country": "Canada", "n": 8}],
        "alt_sql": ["SELECT COUNT(CustomerId) AS n, Country FROM Customer GROUP BY Country"],
        "alt_rows": [[{"n": 13, "Country": "USA"}, {"n": 8, "Country": "Canada"}]],
    }
    data.update(over)
    return EvalCase.model_validate(data)


def ok(rows: list[list[Any]], columns: list[str] | None = None, **over: Any) -> QueryResult:
    cols = columns if columns is not None else [f"c{i}" for i in range(len(rows[0]) if rows else 0)]
    data: dict[str, Any] = {
        "run_id": "r1",
        "question": "q",
        "role": "admin",
        "status": "success",
        "result_sets": [ResultSet(datasource="chinook", sql="SELECT 1", columns=cols, rows=rows)],
        "datasources": ["chinook"],
        "answer": Answer(summary="There are 2 countries."),
    }
    data.update(over)
    return QueryResult(**data)


def err(code: str, message: str, **over: Any) -> QueryResult:
    data: dict[str, Any] = {
        "run_id": "r1", "question": "q", "role": "viewer", "status": "error",
        "error_code": code, "error_message": message,
    }
    data.update(over)
    return QueryResult(**data)


def run_of(result: QueryResult, role: str = "admin", case: EvalCase | None = None, mode: str = "full",
           **over: Any) -> CaseRun:
    return CaseRun(
        case=case or make_case(), role=role, mode=mode, result=result, rows=result.rows, columns=result.columns,
        retrieval=over.pop("retrieval", result.retrieval), routed=over.pop("routed", result.routing), **over,
    )


GOLD = [["USA", 13], ["Canada", 8]]

# ---------------------------------------------------------------- result_match

RESULT_MATCH_TABLE = [
    # (label, role, result, passed, matched, lenient passed)
    ("gold rows", "admin", ok(GOLD), True, "rows", True),
    ("gold rows in another order (order does not matter)", "admin", ok([["Canada", 8], ["USA", 13]]), True,
     "rows", True),
    ("the reviewed alternative", "admin", ok([[13, "USA"], [8, "Canada"]]), True, "alt_sql[1]", True),
    ("a wrong count", "admin", ok([["USA", 13], ["Canada", 9]]), False, None, False),
    ("an extra key column: strict fails, lenient passes", "admin",
     ok([[1, "USA", 13], [2, "Canada", 8]]), False, None, True),
    ("an error result", "admin", err(EXECUTION_ERROR, "no such column"), False, None, False),
    ("two result sets", "admin",
     ok(GOLD, result_sets=[ResultSet(datasource="chinook", sql="x", columns=["a", "b"], rows=GOLD)] * 2),
     False, None, False),
]


@pytest.mark.parametrize(("label", "role", "result", "passed", "matched", "lenient"), RESULT_MATCH_TABLE,
                         ids=[row[0] for row in RESULT_MATCH_TABLE])
def test_result_match(label: str, role: str, result: QueryResult, passed: bool, matched: str | None,
                      lenient: bool) -> None:
    score = ResultMatch().score(run_of(result, role))
    assert score.passed is passed
    assert score.value == (1.0 if passed else 0.0)
    assert score.detail["matched"] == matched
    assert score.detail["lenient"]["passed"] is lenient
    assert {"reason", "message", "matched", "lenient"} <= set(score.detail)
    if not passed:
        assert score.detail["message"]


def test_result_match_gives_the_comparators_reason_code() -> None:
    score = ResultMatch().score(run_of(ok([["USA", 13]])))
    assert score.detail["reason"] in {"missing_rows", "row_count"}
    error = ResultMatch().score(run_of(err(EXECUTION_ERROR, "no such column: Foo", role="admin")))
    assert error.detail["reason"] == "status"
    assert "EXECUTION_ERROR" in error.detail["message"]


@pytest.mark.parametrize(
    ("label", "role", "case"),
    [
        ("a refused role", "viewer", make_case()),
        ("an unanswerable case", "admin",
         make_case(outcome={"admin": "unanswerable"}, sql=None, rows=None, alt_sql=[], alt_rows=[])),
        ("a routing case", "admin",
         make_case(kind="routing", sql=None, rows=None, alt_sql=[], alt_rows=[], status="draft")),
    ],
)
def test_result_match_does_not_apply(label: str, role: str, case: EvalCase) -> None:
    score = ResultMatch().score(run_of(ok(GOLD), role, case))
    assert score == Score()
    assert not score.applies


# ---------------------------------------------------------------- outcome

OUTCOME_TABLE = [
    ("allowed, answered", "admin", ok(GOLD), True),
    ("allowed, refused instead", "admin", err(SECURITY_VIOLATION, GENERIC_REFUSAL), False),
    ("refused with the generic message", "viewer", err(SECURITY_VIOLATION, GENERIC_REFUSAL), True),
    ("refused with a message naming a table", "viewer",
     err(SECURITY_VIOLATION, "role viewer may not read table Customer"), False),
    ("refused, but rows came back", "viewer",
     err(SECURITY_VIOLATION, GENERIC_REFUSAL,
         result_sets=[ResultSet(datasource="chinook", sql="x", columns=["a"], rows=[[1]])]), False),
    ("refused expected, answered", "viewer", ok(GOLD), False),
    ("refused expected, another error", "viewer", err(EXECUTION_ERROR, GENERIC_REFUSAL), False),
]


@pytest.mark.parametrize(("label", "role", "result", "passed"), OUTCOME_TABLE, ids=[r[0] for r in OUTCOME_TABLE])
def test_outcome(label: str, role: str, result: QueryResult, passed: bool) -> None:
    score = Outcome().score(run_of(result, role))
    assert score.passed is passed
    assert score.detail["expected"] == ("allowed" if role == "admin" else "refused")
    if not passed:
        assert score.detail["message"]


UNANSWERABLE = make_case(outcome={"admin": "unanswerable", "viewer": "clarify"}, sql=None, rows=None,
                         alt_sql=[], alt_rows=[], tables=[], columns=[])


@pytest.mark.parametrize(
    ("label", "role", "result", "passed"),
    [
        ("unanswerable, declined", "admin", err(QUESTION_NOT_ANSWERABLE, "None of the datasources can answer"), True),
        ("unanswerable, answered", "admin", ok(GOLD), False),
        ("unanswerable, declined with rows", "admin",
         err(QUESTION_NOT_ANSWERABLE, "x", result_sets=[ResultSet(datasource="c", sql="x", columns=["a"],
                                                                  rows=[[1]])]), False),
        ("unanswerable, refused instead", "admin", err(SECURITY_VIOLATION, GENERIC_REFUSAL), False),
        ("clarify, asked to narrow", "viewer",
         QueryResult(run_id="r", question="q", role="viewer", status="needs_clarification"), True),
        ("clarify, answered", "viewer", ok(GOLD), False),
    ],
)
def test_outcome_unanswerable_and_clarify(label: str, role: str, result: QueryResult, passed: bool) -> None:
    assert Outcome().score(run_of(result, role, UNANSWERABLE)).passed is passed


# ---------------------------------------------------------------- retrieval_recall

SENT_ALL = {"Customer": ["CustomerId", "Country", "City"], "Invoice": ["InvoiceId"]}


@pytest.mark.parametrize(
    ("label", "sent", "table_recall", "column_recall", "passed", "missed_columns"),
    [
        ("everything sent", SENT_ALL, 1.0, 1.0, True, []),
        ("names compare without case", {"customer": ["customerid", "COUNTRY"]}, 1.0, 1.0, True, []),
        ("one column of two missing", {"Customer": ["CustomerId"]}, 1.0, 0.5, False, ["Customer.Country"]),
        ("the table missing", {"Invoice": ["InvoiceId"]}, 0.0, 0.0, False,
         ["Customer.Country", "Customer.CustomerId"]),
    ],
)
def test_retrieval_recall(label: str, sent: dict[str, list[str]], table_recall: float, column_recall: float,
                          passed: bool, missed_columns: list[str]) -> None:
    score = RetrievalRecall().score(run_of(ok(GOLD), retrieval=sent))
    assert score.passed is passed
    assert score.value == pytest.approx(column_recall)
    assert score.detail["table_recall"] == pytest.approx(table_recall)
    assert score.detail["column_recall"] == pytest.approx(column_recall)
    assert score.detail["missed_columns"] == missed_columns
    assert score.detail["tables_sent"] == len(sent)
    assert score.detail["columns_sent"] == sum(len(v) for v in sent.values())


def test_retrieval_recall_three_of_four_columns() -> None:
    case = make_case(tables=["Customer", "Invoice"],
                     columns=["Customer.CustomerId", "Customer.Country", "Invoice.Total", "Invoice.InvoiceDate"])
    score = RetrievalRecall().score(run_of(ok(GOLD), case=case, retrieval={
        "Customer": ["CustomerId", "Country"], "Invoice": ["InvoiceDate", "BillingCountry"]}))
    assert (score.detail["table_recall"], score.value, score.passed) == (1.0, 0.75, False)
    assert score.detail["missed_tables"] == []
    assert score.detail["missed_columns"] == ["Invoice.Total"]
    assert "Invoice.Total" in score.detail["message"]


@pytest.mark.parametrize(
    ("label", "role", "case", "retrieval"),
    [
        ("no retrieval record", "admin", make_case(), None),
        ("a refused role", "viewer", make_case(), SENT_ALL),
        ("a case without tables", "admin", make_case(tables=[], columns=[]), SENT_ALL),
    ],
)
def test_retrieval_recall_does_not_apply(label: str, role: str, case: EvalCase, retrieval: Any) -> None:
    assert not RetrievalRecall().score(run_of(ok(GOLD), role, case, retrieval=retrieval)).applies


# ---------------------------------------------------------------- faithfulness


def test_faithfulness_checks_the_written_answer_against_the_rows() -> None:
    good = Faithfulness().score(run_of(ok(GOLD, answer=Answer(summary="USA has 13 customers, Canada 8."))))
    assert good.passed is True and good.detail["faithful"] is True
    assert good.detail["checked"] >= 2
    bad = Faithfulness().score(run_of(ok(GOLD, answer=Answer(summary="USA has 15 customers."))))
    assert bad.passed is False and bad.value == 0.0
    assert bad.detail["unsupported_numbers"] == ["15"]
    assert "15" in bad.detail["message"]


def test_faithfulness_reads_the_content_too() -> None:
    answer = Answer(summary="USA leads with 13 customers.", content="Canada follows with 9.")
    score = Faithfulness().score(run_of(ok(GOLD, answer=answer)))
    assert score.passed is False
    assert score.detail["unsupported_numbers"] == ["9"]


def test_faithfulness_does_not_apply_without_an_answer() -> None:
    assert not Faithfulness().score(run_of(err(SECURITY_VIOLATION, GENERIC_REFUSAL), "viewer")).applies
    assert not Faithfulness().score(run_of(ok(GOLD, answer=None))).applies


# ---------------------------------------------------------------- routing

TWO_DS = make_case(datasources=["chinook", "support"], sql=None, rows=None, alt_sql=[], alt_rows=[],
                   kind="routing", outcome={"admin": "allowed", "viewer": "refused"})


@pytest.mark.parametrize(
    ("label", "case", "used", "passed"),
    [
        ("exactly the case's datasource", make_case(), ["chinook"], True),
        ("another datasource", make_case(), ["support"], False),
        ("one too many", make_case(), ["chinook", "support"], False),
        ("none (an error before routing)", make_case(), [], False),
        ("both of two, any order", TWO_DS, ["support", "chinook"], True),
        ("one of two", TWO_DS, ["chinook"], False),
    ],
)
def test_routing_mode_full(label: str, case: EvalCase, used: list[str], passed: bool) -> None:
    score = Routing().score(run_of(ok(GOLD, datasources=used), case=case))
    assert score.passed is passed
    if not passed:
        assert score.detail["message"]


@pytest.mark.parametrize(
    ("label", "case", "routed", "top1", "shortlist"),
    [
        ("first and only", make_case(), ["chinook", "support"], True, True),
        ("second", make_case(), ["support", "chinook", "web"], False, True),
        ("third: past max_datasources", make_case(), ["support", "web", "chinook"], False, False),
        ("two needed, both shortlisted", TWO_DS, ["support", "chinook", "web"], True, True),
        ("two needed, one cut off", TWO_DS, ["chinook", "web", "support"], True, False),
        ("nothing ranked", make_case(), [], False, False),
    ],
)
def test_routing_mode_retrieval(label: str, case: EvalCase, routed: list[str], top1: bool, shortlist: bool) -> None:
    score = Routing(max_datasources=2).score(run_of(ok(GOLD), case=case, mode="retrieval", routed=routed))
    assert (score.detail["top1"], score.detail["shortlist"]) == (top1, shortlist)
    assert score.passed is (top1 and shortlist)
    assert score.detail["routed"] == routed
    assert score.detail["missed"] == [d for d in case.datasources if d not in routed[:2]]


def test_routing_does_not_apply() -> None:
    assert not Routing().score(run_of(ok(GOLD), "viewer")).applies
    assert not Routing().score(run_of(ok(GOLD), mode="retrieval", routed=None)).applies


# ---------------------------------------------------------------- case verdicts


def _s(passed: bool | None, **detail: Any) -> Score:
    return Score(value=None if passed is None else float(passed), passed=passed, detail=detail)


@pytest.mark.parametrize(
    ("label", "scores", "status", "reason"),
    [
        ("all pass", {"result_match": _s(True), "outcome": _s(True)}, "pass", ""),
        ("not applying does not count", {"result_match": Score(), "outcome": _s(True)}, "pass", ""),
        ("first failing scorer's message", {"result_match": _s(False, reason="cell_differs", message="row 2 differs"),
                                            "outcome": _s(True), "faithfulness": _s(False, message="said 15")},
         "fail", "result_match: row 2 differs"),
        ("an error wins over a failure", {"outcome": _s(False, message="x"),
                                          "plugin": _s(None, error="ValueError: boom")},
         "error", "plugin: error: ValueError: boom"),
        ("nothing applied", {"result_match": Score()}, "skip", ""),
    ],
)
def test_case_status(label: str, scores: dict[str, Score], status: str, reason: str) -> None:
    assert case_status(scores) == (status, reason)


def test_lenient_and_execution_verdicts() -> None:
    scores = {
        "result_match": _s(False, message="extra column", lenient={"passed": True}),
        "outcome": _s(True),
        "faithfulness": _s(False, message="said 15"),
    }
    assert case_status(scores)[0] == "fail"
    assert case_status(scores, only=("result_match", "outcome"))[0] == "fail"
    assert case_status({k: v for k, v in scores.items() if k != "faithfulness"}, lenient=True)[0] == "pass"
    assert case_status(scores, lenient=True)[0] == "fail"  # faithfulness still fails it
    assert case_status(scores, only=("outcome", "faithfulness"), lenient=True) == ("fail", "faithfulness: said 15")


# ---------------------------------------------------------------- plugins and the registry


class Fast:
    """The example plugin: fails an answer slower than five seconds."""

    interface_version = 1
    config_model = NoConfig
    modes = frozenset({"full"})

    @classmethod
    def from_config(cls, cfg: Any) -> Fast:
        return cls()

    def score(self, run: CaseRun) -> Score:
        if run.expected != "allowed":
            return Score()
        seconds = sum(run.result.timings.values())
        return Score(value=1.0 if seconds <= 5 else 0.0, passed=seconds <= 5, detail={"reason": f"took {seconds} s"})


class Boom(Fast):
    def score(self, run: CaseRun) -> Score:
        raise ZeroDivisionError("no rows to divide")


class FromTheFuture(Fast):
    interface_version = 2


def test_registry_lists_the_builtins_in_order() -> None:
    registry = ScorerRegistry.builtins()
    assert registry.names() == ["result_match", "policy", "outcome", "faithfulness", "retrieval_recall", "routing",
                                "neighbour_match"]
    assert set(BUILTINS) == set(registry.names()) == {*BUILTIN_SCORERS, "neighbour_match"}
    for cls in BUILTINS.values():
        assert cls.interface_version == 1


@pytest.mark.parametrize(
    ("mode", "built"),
    [
        ("plans", ["result_match", "policy", "outcome", "neighbour_match"]),
        ("full", ["result_match", "policy", "outcome", "faithfulness", "retrieval_recall", "routing",
                  "neighbour_match"]),
        ("retrieval", ["retrieval_recall", "routing"]),
    ],
)
def test_build_leaves_out_scorers_that_cannot_score_the_mode(mode: str, built: list[str]) -> None:
    registry = ScorerRegistry.builtins()
    assert list(registry.build(registry.names(), mode)) == built


def test_build_sets_routing_depth_from_configs() -> None:
    built = ScorerRegistry.builtins().build(["routing"], "retrieval", configs={"routing": {"max_datasources": 1}})
    score = built["routing"].score(run_of(ok(GOLD), case=TWO_DS, mode="retrieval", routed=["chinook", "support"]))
    assert score.detail["shortlist"] is False


def test_unknown_scorer_names_the_known_ones() -> None:
    with pytest.raises(ScorerError, match=r"unknown scorer.*'speed'.*result_match"):
        ScorerRegistry.builtins().build(["outcome", "speed"], "full")


def test_a_plugin_registered_in_code_scores() -> None:
    registry = ScorerRegistry.builtins()
    registry.add("fast", Fast)
    assert registry.names()[-1] == "fast"
    built = registry.build(["outcome", "fast"], "full")
    slow = ok(GOLD, timings={"planner": 4.0, "synthesizer": 2.5})
    scores = score_run(built, run_of(slow))
    assert scores["fast"].passed is False and scores["outcome"].passed is True
    assert case_status(scores) == ("fail", "fast: took 6.5 s")
    assert "fast" not in registry.build(["outcome", "fast"], "plans")  # full only


def test_a_raising_scorer_is_an_error_verdict_and_the_others_still_score() -> None:
    registry = ScorerRegistry.builtins()
    registry.add("boom", Boom)
    built = registry.build(["result_match", "boom", "outcome"], "full")
    scores = score_run(built, run_of(ok(GOLD)))
    assert scores["boom"].passed is None
    assert scores["boom"].detail == {"error": "ZeroDivisionError: no rows to divide"}
    assert scores["boom"].errored
    assert scores["result_match"].passed is True and scores["outcome"].passed is True
    assert case_status(scores)[0] == "error"


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (FromTheFuture, "interface_version is 2"),
        (type("NoVersion", (), {"config_model": NoConfig, "modes": frozenset({"full"})}), "no interface_version"),
        (type("BadModes", (Fast,), {"modes": frozenset({"turbo"})}), "modes must be"),
        (type("BadConfig", (Fast,), {"config_model": dict}), "config_model"),
    ],
)
def test_a_bad_plugin_is_rejected(cls: type, message: str) -> None:
    registry = ScorerRegistry.builtins()
    with pytest.raises(ScorerError, match=message):
        registry.add("bad", cls)
    assert "bad" not in registry.names()


def test_a_name_cannot_be_taken_twice() -> None:
    registry = ScorerRegistry.builtins()
    with pytest.raises(ScorerError, match="already registered"):
        registry.add("outcome", Fast)
    registry.add("outcome", Fast, replace=True)
    assert registry.get("outcome") is Fast


class _EntryPoint(SimpleNamespace):
    def load(self) -> Any:
        return self.target


def _fake_entry_points(monkeypatch: pytest.MonkeyPatch, points: list[_EntryPoint]) -> list[str]:
    asked: list[str] = []

    def entry_points(*, group: str) -> list[_EntryPoint]:
        asked.append(group)
        return points

    monkeypatch.setattr("importlib.metadata.entry_points", entry_points)
    return asked


def test_default_discovers_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _fake_entry_points(monkeypatch, [_EntryPoint(name="fast", value="my_pkg.scorers:Fast", target=Fast)])
    registry = ScorerRegistry.default()
    assert asked == ["nl2sql.scorers"]
    assert registry.names() == [*BUILTINS, "fast"]
    assert isinstance(registry.build(["fast"], "full")["fast"], Fast)


def test_an_entry_point_speaking_another_version_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_entry_points(monkeypatch, [_EntryPoint(name="future", value="pkg:Future", target=FromTheFuture)])
    with pytest.raises(ScorerError, match=r"entry point 'future' = 'pkg:Future'.*interface_version is 2"):
        ScorerRegistry.default()


def test_an_entry_point_that_fails_to_import_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken(_EntryPoint):
        def load(self) -> Any:
            raise ImportError("No module named 'my_pkg'")

    _fake_entry_points(monkeypatch, [Broken(name="fast", value="my_pkg.scorers:Fast")])
    with pytest.raises(ScorerError, match=r"'fast' = 'my_pkg.scorers:Fast'.*could not be loaded.*my_pkg"):
        ScorerRegistry.default()


def test_a_scorer_is_built_once_from_its_config_defaults() -> None:
    built_with: list[Any] = []

    class Counting(Fast):
        config_model: ClassVar[Any] = type("Cfg", (NoConfig,), {"__annotations__": {"limit": float}, "limit": 5.0})

        @classmethod
        def from_config(cls, cfg: Any) -> Counting:
            built_with.append(cfg)
            return cls()

    registry = ScorerRegistry.builtins()
    registry.add("counting", Counting)
    registry.build(["counting"], "full")
    assert len(built_with) == 1 and built_with[0].limit == 5.0


# ---------------------------------------------------------------- neighbour_match's summary


@pytest.mark.parametrize(("reasons", "questions", "robust", "overturned", "unchecked"), [
    # (the detail reason of each scored run; None: the scorer did not apply) -> the summary's counts
    (["match", "match", "fails_on_neighbour", "fails_on_original"], 4, 2, 1, 0),
    (["match", "no_sql", None], 1, 1, 0, 1),  # a pass without SQL is not graded, and not in the rate
    (["fails_on_original"], 1, 0, 0, 0),
])
def test_the_neighbour_summary_counts_robust_runs_over_the_questions_graded(
        reasons: list[str | None], questions: int, robust: int, overturned: int, unchecked: int) -> None:
    from nl2sql_assets.evaluation.judging.scorers import Scored
    from nl2sql_assets.evaluation.neighbours.scorer import NeighbourMatch

    passed = {"match": True, "fails_on_neighbour": False}
    scores = [Scored(case_id=f"c{i}", role="admin", pass_index=1,
                     score=Score(passed=passed.get(r or ""), detail={"reason": r, "neighbour": "n.sqlite"} if r else {}))
              for i, r in enumerate(reasons)]
    summary = NeighbourMatch.summarize(scores)
    assert summary is not None
    assert (summary.questions, summary.robust.passed, len(summary.overturned), summary.unchecked) == (
        questions, robust, overturned, unchecked)
    assert summary.metrics()["neighbour_overturned"] == overturned


def test_no_neighbour_verdict_at_all_is_no_summary() -> None:
    from nl2sql_assets.evaluation.judging.scorers import Scored
    from nl2sql_assets.evaluation.neighbours.scorer import NeighbourMatch

    assert NeighbourMatch.summarize([Scored(case_id="c", role="admin", pass_index=1, score=Score())]) is None
