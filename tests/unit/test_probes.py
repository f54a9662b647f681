"""Policy probes: SQL sent to the final-SQL check under a role and the case's policy, scored by the
policy scorer (TP, FP, FN, TN, precision, recall, the governing rule); the kinds of case each mode
runs; a case's own policy; a run's own in-code scorers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import BaseModel

from nl2sql_assets.config import ProjectConfig
from nl2sql_assets.evaluation.judging.scorers import NoConfig, Score, Scored, ScorerSummary
from nl2sql_assets.evaluation.judging.scorers.policy import Policy, PolicySummary
from nl2sql_assets.evaluation.running.selection import SelectionError
from nl2sql_assets.evaluation.suites import EvalCase
from tests.unit.test_runner import run_eval, small_cases, small_project, write_small_suite


def probe(case_id: str, sql: str, outcome: dict[str, str], rule: str | None, **extra: object) -> EvalCase:
    return EvalCase.model_validate({"id": case_id, "question": f"probe {case_id}", "datasources": ["chinook"],
                                    "status": "approved", "kind": "probe", "outcome": outcome, "rule": rule,
                                    "sql": sql, **extra})


PROBES = [
    # Refused for analyst and viewer by table_scope; the admin may read it (a control run).
    probe("p_scope", "SELECT FirstName FROM Employee", {"admin": "allowed", "analyst": "refused",
                                                       "viewer": "refused"}, "table_scope"),
    probe("p_write", "DELETE FROM Track", {"admin": "refused", "viewer": "refused"}, "read_only"),
    # Refused, but by table_scope: caught (a TP) yet the probe fails, so a moved rule is seen.
    probe("p_wrong_rule", "SELECT Email FROM Customer", {"viewer": "refused"}, "column_scope"),
    # Expected refused, but the policy lets it through: a bypass (FN).
    probe("p_bypass", "SELECT Name FROM Genre", {"viewer": "refused"}, "table_scope"),
    probe("p_control", "SELECT Name FROM Genre ORDER BY GenreId LIMIT 5", {"viewer": "allowed"}, None),
    # An allow control the policy refuses: a false positive.
    probe("p_strict", "SELECT FirstName FROM Customer", {"viewer": "allowed"}, None),
]


@pytest.fixture
def project(tmp_path: Path, chinook_path: Path) -> ProjectConfig:
    config = small_project(tmp_path, chinook_path)
    write_small_suite(tmp_path, [*small_cases(chinook_path), *PROBES])
    return config


def _records(report: object) -> dict[tuple[str, str], object]:
    board = next(iter(report.configs.values()))  # type: ignore[attr-defined]
    return {(r.case_id, r.role): r for r in board.results}


def test_probes_go_to_the_policy_check_and_are_scored_by_rule(project: ProjectConfig) -> None:
    report = run_eval(project, mode="plans")
    records = _records(report)
    scope = records[("p_scope", "analyst")]
    assert (scope.kind, scope.status, scope.error_code, scope.policy_rule) == (
        "probe", "pass", "SECURITY_VIOLATION", "table_scope")
    assert scope.execution_status is None and scope.usage == {} and scope.cost_usd == 0.0  # no model call
    assert records[("p_scope", "admin")].status == "pass" and records[("p_scope", "admin")].policy_rule is None
    assert records[("p_write", "admin")].policy_rule == "read_only"
    wrong = records[("p_wrong_rule", "viewer")]
    assert wrong.status == "fail" and "refused by table_scope, expected column_scope" in wrong.reason
    bypass = records[("p_bypass", "viewer")]
    assert bypass.status == "fail" and "let the probe through" in bypass.reason
    assert records[("p_control", "viewer")].status == "pass"
    strict = records[("p_strict", "viewer")]
    assert strict.status == "fail" and "allow control was refused by table_scope" in strict.reason

    board = report.configs["plans"]
    summary = board.summaries()["policy"]
    assert isinstance(summary, PolicySummary)
    # TP: p_scope x2, p_write x2, p_wrong_rule; FN: p_bypass; FP: p_strict; TN: p_scope admin,
    # p_control, and the 8 allowed question runs of the small suite, none refused.
    assert (summary.true_positives, summary.false_negatives, summary.false_positives) == (5, 1, 1)
    assert summary.true_negatives == 2 + 8 and summary.probe_errors == 0 and summary.rule_mismatches == 1
    assert summary.precision == pytest.approx(5 / 6) and summary.recall == pytest.approx(5 / 6)
    governing = {p.case: (p.expected_rule, p.rule, p.count) for p in summary.probes}
    assert governing["p_wrong_rule@viewer"] == ("column_scope", "table_scope", "tp")
    assert governing["p_bypass@viewer"] == ("table_scope", None, "fn")
    assert {p.policy for p in summary.probes} == {"project"}  # none of these carries a policy of its own
    assert "expected column_scope (the project's policy)" in wrong.reason
    # Probes are not questions: execution accuracy, latency and cost per case leave them out.
    assert board.accuracy.execution.total == 14 and board.coverage is not None
    assert (board.coverage.query_count, board.coverage.probe_count) == (5, 6)


def test_a_legitimate_question_the_policy_refuses_lowers_precision(project: ProjectConfig) -> None:
    analyst = project.policies.roles["analyst"]
    access = analyst.datasources["chinook"].model_copy(update={"forbidden_joins": [["Customer", "Invoice"]]})
    project.policies.roles["analyst"] = analyst.model_copy(update={"datasources": {"chinook": access}})
    report = run_eval(project, mode="plans", cases=["small_003", "p_scope"])
    refused = _records(report)[("small_003", "analyst")]
    assert (refused.status, refused.error_code, refused.policy_rule) == ("fail", "SECURITY_VIOLATION", "forbidden_join")
    assert refused.error_message == "You are not allowed to see the data this question needs."  # generic
    summary = report.configs["plans"].summaries()["policy"]
    assert (summary.true_positives, summary.false_positives) == (2, 1)
    assert summary.precision == pytest.approx(2 / 3) and summary.recall == 1.0


def test_a_case_with_its_own_policy_runs_under_it(project: ProjectConfig, tmp_path: Path,
                                                  chinook_path: Path) -> None:
    own = {"roles": {"viewer": {"datasources": {"chinook": {"allow": ["Artist", "Album"],
                                                            "deny": ["Artist.Name"]}}}}}
    artists = small_cases(chinook_path)[0].model_copy(update={"outcome": {"viewer": "allowed"}})
    hidden = EvalCase.model_validate(artists.model_dump() | {"id": "own_refused", "outcome": {"viewer": "refused"},
                                                              "policy": {"roles": {"viewer": {"datasources": {
                                                                  "chinook": {"allow": ["Album"]}}}}}})
    names = probe("own_probe", "SELECT Name FROM Artist", {"viewer": "refused"}, "column_scope", policy=own)
    write_small_suite(tmp_path, [artists, hidden, names])
    report = run_eval(project, mode="plans")
    records = _records(report)
    assert records[("small_001", "viewer")].status == "pass"  # the project's policy lets the viewer count artists
    assert records[("own_refused", "viewer")].status == "pass"  # its own policy does not
    assert records[("own_refused", "viewer")].policy_rule == "table_scope"
    assert records[("own_probe", "viewer")].status == "pass"
    assert records[("own_probe", "viewer")].policy_rule == "column_scope"
    # The verdict says whose policy decided it: the case's own, or the project's.
    assert records[("own_probe", "viewer")].scores["policy"].detail["policy"] == "case"
    summary = report.configs["plans"].summaries()["policy"]
    assert isinstance(summary, PolicySummary)
    assert {p.case: p.policy for p in summary.probes} == {"own_probe@viewer": "case"}
    assert "| own_probe@viewer | deny | column_scope | column_scope | case | tp |" in summary.markdown()


def test_each_mode_leaves_out_the_kinds_it_does_not_run_and_counts_them(project: ProjectConfig,
                                                                        tmp_path: Path, chinook_path: Path) -> None:
    route = EvalCase(id="route", question="Where do support tickets live?", datasources=["chinook"],
                     status="approved", kind="routing", outcome={"admin": "allowed", "viewer": "allowed"})
    write_small_suite(tmp_path, [small_cases(chinook_path)[0], route, PROBES[1]])
    report = run_eval(project, mode="plans", passes=2)  # no --cases needed for the routing case
    assert report.left_out == {"routing": 4}
    assert {r.case_id for r in report.configs["plans"].results} == {"small_001", "p_write"}

    from nl2sql_assets.evaluation.running.modes import get_mode
    from nl2sql_assets.evaluation.running.runner import _kinds
    from nl2sql_assets.evaluation.running.selection import RoleRun

    runs = [RoleRun("s", PROBES[1], role) for role in PROBES[1].outcome]
    with pytest.raises(SelectionError, match="mode retrieval runs answer, routing cases; the selection holds only "
                                             "2 probe case run"):
        _kinds(runs, get_mode("retrieval"))
    kept, left = _kinds([RoleRun("s", route, "admin"), *runs], get_mode("retrieval"))
    assert [rr.case.id for rr in kept] == ["route"] and left == {"probe": 2}


# ---------------------------------------------------------------- the policy scorer's sums, by hand


def _scored(detail: dict[str, object], case: str = "c", role: str = "r", pass_index: int = 1) -> Scored:
    passed = None if detail.get("kind") == "query" else detail.get("count") in ("tp", "tn")
    return Scored(case_id=case, role=role, pass_index=pass_index, score=Score(passed=passed, detail=detail))


def _p(count: str, expected: str = "deny", rule: str | None = "table_scope", want: str | None = "table_scope",
       kind: str = "probe") -> dict[str, object]:
    return {"kind": kind, "expected": expected, "count": count, "rule": rule, "expected_rule": want}


@pytest.mark.parametrize(
    ("details", "tp", "fp", "fn", "precision", "recall"),
    [
        ([], None, None, None, None, None),  # nothing to sum: no summary
        ([_p("tp"), _p("tp")], 2, 0, 0, 1.0, 1.0),
        ([_p("tp"), _p("fn", rule=None)], 1, 0, 1, 1.0, 0.5),
        ([_p("tp"), _p("fp", "allow", want=None)], 1, 1, 0, 0.5, 1.0),
        # a legitimate question refused counts against precision; one answered counts nowhere but TN
        ([_p("tp"), _p("fp", "allow", "row_budget", None, "query"), _p("tn", "allow", None, None, "query")],
         1, 1, 0, 0.5, 1.0),
        ([_p("tn", "allow", None, None)], 0, 0, 0, None, None),  # no refusal, no probe to refuse
        ([_p("none", "allow", None, None, "query")], 0, 0, 0, None, None),  # failed before the policy decided
    ],
)
def test_policy_summary_counts(details: list[dict[str, object]], tp: int | None, fp: int | None, fn: int | None,
                               precision: float | None, recall: float | None) -> None:
    summary = Policy.summarize([_scored(d, case=f"c{i}") for i, d in enumerate(details)])
    if tp is None:
        assert summary is None
        return
    assert summary is not None
    assert (summary.true_positives, summary.false_positives, summary.false_negatives) == (tp, fp, fn)
    assert (summary.precision, summary.recall) == (precision, recall)


# ---------------------------------------------------------------- a run's own in-code scorers


class _LongestSummary(ScorerSummary):
    longest: int

    def metrics(self) -> dict[str, float]:
        return {"longest_question": float(self.longest)}


class QuestionLength:
    interface_version: ClassVar[int] = 1
    config_model: ClassVar[type[BaseModel]] = NoConfig
    summary_model: ClassVar[type[ScorerSummary]] = _LongestSummary
    modes: ClassVar[frozenset[str]] = frozenset({"plans"})

    @classmethod
    def from_config(cls, cfg: BaseModel) -> QuestionLength:
        return cls()

    def score(self, run: object) -> Score:
        length = len(run.case.question)  # type: ignore[attr-defined]
        return Score(value=1.0, passed=length < 60, detail={"length": length})

    @classmethod
    def summarize(cls, scores: Sequence[Scored]) -> _LongestSummary:
        return _LongestSummary(longest=max(int(s.score.detail["length"]) for s in scores))


def test_project_evals_run_takes_extra_in_code_scorers(project: ProjectConfig, tmp_path: Path,
                                                      chinook_path: Path) -> None:
    from nl2sql_assets.evaluation.running.scorers import scorer_class
    from nl2sql_assets.project import Project

    write_small_suite(tmp_path, small_cases(chinook_path)[:2])
    with Project(project) as proj:
        report = proj.evals.run(mode="plans", extra_scorers={"question_length": QuestionLength})
    board = report.configs["plans"]
    assert "question_length" in report.scorers
    assert board.scores["question_length"].applied == 6 and board.scores["question_length"].passed == 6
    assert board.scores["question_length"].summary == {"longest": len("How many employees do we have?")}
    assert scorer_class("question_length") is None  # for that run only: nothing registered for the process
