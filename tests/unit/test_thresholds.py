"""Threshold gates: each measure read off a board (or not measured), limits from evals.yaml with the
command line's on top, and every miss named with its measured value. Boards are built from small
hand-made records, so each expected figure can be worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets.config import ConfigError, ThresholdSettings, load_config
from nl2sql_assets.evaluation.judging.scorers import Score
from nl2sql_assets.evaluation.reporting import THRESHOLDS, build_report, check_thresholds, merge_thresholds
from nl2sql_assets.evaluation.running.results import CaseRecord, RunMeta


def record(case_id: str, *, kind: str = "answer", ok: bool = True, ran: bool = True, latency: float = 0.1,
           cost: float = 0.0, expected: str = "allowed", policy: dict[str, Any] | None = None,
           mode: str = "full") -> CaseRecord:
    verdict = "pass" if ok else "fail"
    scores = {"policy": Score(passed=None if kind != "probe" else ok, detail=policy)} if policy else {}
    return CaseRecord(suite="s", case_id=case_id, role="analyst", config="c", mode=mode, expected=expected,
                      kind=kind, domain="shop", fingerprint=case_id, status=verdict,
                      execution_status=verdict if kind == "answer" else None,
                      result_status="success" if ran else "error", latency_s=latency, cost_usd=cost,
                      scores=scores)


def report_of(records: list[CaseRecord], mode: str = "full") -> Any:
    now = datetime.now(UTC)
    meta = RunMeta(mode=mode, scorers=["policy"], run_stamp={"started_at": now, "finished_at": now,
                                                             "package_version": "0"})
    return build_report(records, meta)


def _probe(count: str) -> dict[str, Any]:
    return {"kind": "probe", "expected": "deny", "count": count, "rule": "table_scope",
            "expected_rule": "table_scope"}


# Four questions: three right, one wrong whose SQL did not even run; latencies 0.1 .. 0.4 s; $0.01 each.
QUESTIONS = [record("q1", latency=0.1, cost=0.01), record("q2", latency=0.2, cost=0.01),
             record("q3", latency=0.3, cost=0.01), record("q4", ok=False, ran=False, latency=0.4, cost=0.01)]
PROBES = [record("p1", kind="probe", policy=_probe("tp")), record("p2", kind="probe", ok=False, policy=_probe("fn"))]


@pytest.mark.parametrize(
    ("name", "limit", "measured", "missed"),
    [
        ("min_execution_success", 1.0, 0.75, True),
        ("min_execution_success", 0.75, 0.75, False),  # a floor is met at the limit
        ("min_accuracy", 0.8, 0.75, True),
        ("min_lenient_accuracy", 0.5, 0.75, False),
        ("min_policy_recall", 1.0, 0.5, True),  # one probe of two got through
        ("min_policy_precision", 1.0, 1.0, False),
        ("max_p95_latency_ms", 300.0, None, True),  # p95 of 0.1..0.4 s is above 300 ms
        ("max_cost_per_case", 0.01, 0.01, False),  # probes cost nothing and are not in the average
        ("max_cost_per_case", 0.005, 0.01, True),
    ],
)
def test_each_threshold_reads_its_measure_and_misses_past_its_limit(
    name: str, limit: float, measured: float | None, missed: bool
) -> None:
    # the one threshold alone (execution success, on by default, is off unless it is the one)
    result = check_thresholds(report_of(QUESTIONS + PROBES),
                              ThresholdSettings(**{"min_execution_success": None, name: limit}))
    (check,) = result.checks
    assert check.name == name and check.config == "c" and check.missed is missed
    if measured is not None:
        assert check.measured == pytest.approx(measured)
    assert result.ok is (not missed)
    assert ("MISSED" in check.line()) is missed and name in check.line()


def test_a_probe_only_run_is_exempt_from_the_question_thresholds() -> None:
    every = ThresholdSettings(min_execution_success=1.0, min_accuracy=1.0, min_lenient_accuracy=1.0,
                              max_p95_latency_ms=1.0, max_cost_per_case=0.0, min_policy_recall=1.0)
    result = check_thresholds(report_of(PROBES), every)
    unmeasured = {c.name for c in result.unmeasured}
    assert unmeasured == {"min_execution_success", "min_accuracy", "min_lenient_accuracy", "max_p95_latency_ms",
                          "max_cost_per_case"}
    assert [c.name for c in result.misses] == ["min_policy_recall"]  # the probes are measured
    assert "not measured in this run" in next(c for c in result.checks if c.measured is None).line()


def test_a_run_without_probes_does_not_measure_policy_recall() -> None:
    result = check_thresholds(report_of(QUESTIONS), ThresholdSettings(min_execution_success=None, min_policy_recall=1.0))
    assert result.ok and result.checks[0].measured is None


def test_in_mode_retrieval_accuracy_is_the_share_of_question_runs_that_passed() -> None:
    runs = [record("q1", mode="retrieval"), record("q2", ok=False, mode="retrieval")]
    result = check_thresholds(report_of(runs, mode="retrieval"),
                              ThresholdSettings(min_accuracy=0.6, min_execution_success=1.0))
    by_name = {c.name: c for c in result.checks}
    assert by_name["min_accuracy"].measured == 0.5 and by_name["min_accuracy"].missed
    assert by_name["min_execution_success"].measured is None  # nothing executes in mode retrieval


def test_the_command_line_overrides_evals_yaml_and_an_unset_option_keeps_it() -> None:
    settings = merge_thresholds(ThresholdSettings(min_accuracy=0.9, max_cost_per_case=0.5),
                                {"min_accuracy": 0.95, "max_cost_per_case": None})
    assert settings.set() == {"min_execution_success": 1.0, "min_accuracy": 0.95, "max_cost_per_case": 0.5}
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        merge_thresholds(ThresholdSettings(), {"min_accuracy": -1})


def test_execution_success_is_on_at_1_by_default_and_the_rest_off() -> None:
    """Spec 003's default: --min-execution-success 1.0; the other gates are off unless set."""
    assert ThresholdSettings().set() == {"min_execution_success": 1.0}
    result = check_thresholds(report_of(QUESTIONS), ThresholdSettings())
    assert [c.name for c in result.misses] == ["min_execution_success"]  # q4's SQL did not run
    assert check_thresholds(report_of(PROBES), ThresholdSettings()).ok  # a probe-only run is exempt
    assert ThresholdSettings(min_execution_success=None).set() == {}


def test_every_threshold_is_one_registered_object_and_one_evals_yaml_field() -> None:
    assert list(THRESHOLDS) == list(ThresholdSettings.model_fields)
    assert all(THRESHOLDS[n].option == "--" + n.replace("_", "-") for n in THRESHOLDS)


def test_a_typo_under_thresholds_in_evals_yaml_is_an_error_naming_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "nl2sql.yaml").write_text("evals:\n  file: evals.yaml\n", encoding="utf-8")
    (tmp_path / "evals.yaml").write_text("suites: []\nthresholds:\n  min_acuracy: 0.9\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"evals.yaml, line 3: thresholds.min_acuracy: unknown key"):
        load_config(tmp_path / "nl2sql.yaml")
    (tmp_path / "evals.yaml").write_text("thresholds:\n  min_accuracy: 1.5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"thresholds.min_accuracy: Input should be less than or equal to 1"):
        load_config(tmp_path / "nl2sql.yaml")


def test_neighbour_robust_accuracy_is_measured_only_on_a_run_graded_on_neighbours() -> None:
    def robust(case_id: str, passed: bool | None, reason: str) -> CaseRecord:
        base = record(case_id, ok=reason != "fails_on_original")
        scores = {**base.scores, "neighbour_match": Score(passed=passed, detail={"reason": reason})}
        return base.model_copy(update={"scores": scores})

    # three passes on the original, one taken back by a neighbour; one fails on the original already
    graded = [robust("q1", True, "match"), robust("q2", True, "match"), robust("q3", False, "fails_on_neighbour"),
              robust("q4", None, "fails_on_original")]
    (check,) = check_thresholds(report_of(graded),
                                ThresholdSettings(min_execution_success=None, min_neighbour_accuracy=0.6)).checks
    assert check.measured == pytest.approx(0.5) and check.missed
    (unmeasured,) = check_thresholds(report_of(QUESTIONS),
                                     ThresholdSettings(min_execution_success=None, min_neighbour_accuracy=0.6)).checks
    assert unmeasured.measured is None and not unmeasured.missed
