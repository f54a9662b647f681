"""Candidate selection and uplift, as pure functions, on small hand-worked tables."""

from __future__ import annotations

import pytest

from nl2sql_assets.engine.candidates import CandidateOutcome, select_candidate
from nl2sql_assets.evaluation.reporting.uplift import candidate_uplift
from nl2sql_assets.evaluation.running.results import CaseRecord

A = [[1, "x"], [2, "y"]]
A_REORDERED = [[2, "y"], [1, "x"]]  # the same rows in another order: the same result set
B = [[1, "x"]]
C: list[list[object]] = []


def _outcomes(*rows: list[list[object]] | None) -> list[CandidateOutcome]:
    return [CandidateOutcome(i, r, None if r is not None else "VALIDATION_ERROR") for i, r in enumerate(rows)]


@pytest.mark.parametrize(
    ("rows", "chosen", "why"),
    [
        ((A,), 0, "one candidate is its own choice"),
        ((B, A, A), 1, "two of three agree: the earliest of the majority"),
        ((A, B, A_REORDERED), 0, "row order does not split a vote"),
        ((None, A, B), 1, "a failed candidate is dropped; A and B tie, A came first"),
        ((B, A), 0, "a tie goes to the earliest"),
        ((None, None, B), 2, "the only one that ran"),
        ((None, None), None, "every candidate failed: no choice"),
        ((C, C, A), 0, "an empty result is a result set like any other"),
        ((B, A, None, A, B, B), 0, "three B against two A"),
    ],
)
def test_the_selector_drops_failures_and_takes_the_most_common_result(rows: tuple, chosen: int | None,
                                                                      why: str) -> None:
    assert select_candidate(_outcomes(*rows)) == chosen, why


def _record(i: int, status: str, first: str | None, *, count: int = 3, extra: float = 0.1,
            latency: float = 1.0) -> CaseRecord:
    return CaseRecord(suite="s", case_id=f"c{i}", role="admin", config="plans", mode="plans", expected="allowed",
                      status=status, candidate_count=count, first_candidate_status=first,  # type: ignore[arg-type]
                      candidate_extra_s=extra, latency_s=latency)


def test_uplift_is_selected_minus_first_over_candidate_runs_with_mcnemar() -> None:
    records = [
        _record(1, "pass", "fail"),  # improved
        _record(2, "pass", "fail"),  # improved
        _record(3, "pass", "pass"),
        _record(4, "fail", "pass", extra=0.3),  # worsened
        _record(5, "fail", "fail", latency=3.0),
        _record(6, "pass", None, count=0, extra=0.0),  # no candidates: not counted
        _record(7, "skip", "pass"),  # skipped: not counted
    ]
    uplift = candidate_uplift(records)
    assert uplift is not None
    assert uplift.runs == 5
    assert (uplift.selected.passed, uplift.first.passed) == (3, 2)
    assert uplift.uplift == pytest.approx((3 - 2) / 5)
    assert (uplift.improved, uplift.worsened) == (2, 1)
    assert uplift.p_value == pytest.approx(1.0)  # 2 against 1 flips: min(1, 2 * 4/8)
    assert uplift.extra_latency_ms == pytest.approx(1000 * (0.1 * 4 + 0.3) / 5)
    assert uplift.latency_share == pytest.approx(0.7 / 7.0)
    assert "+0.200" in uplift.markdown() and "McNemar p = 1" in uplift.markdown()


def test_ten_improvements_and_no_loss_are_significant() -> None:
    uplift = candidate_uplift([_record(i, "pass", "fail") for i in range(10)])
    assert uplift is not None and uplift.uplift == 1.0
    assert uplift.p_value == pytest.approx(0.001953125)  # 2 / 2**10


def test_no_candidate_run_no_uplift() -> None:
    assert candidate_uplift([_record(1, "pass", None, count=0)]) is None
