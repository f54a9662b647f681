"""Statistics on hand-worked tables: Wilson, McNemar, pass^k, determinism, percentiles."""

from __future__ import annotations

import math

import pytest

from nl2sql_assets.evaluation.judging.stats import (
    Determinism,
    determinism,
    latency_summary,
    mcnemar_exact,
    pass_hat_k,
    pass_k,
    percentile,
    wilson_interval,
)

# ---------------------------------------------------------------- Wilson

WILSON = [
    # passed, total, (low, high) to 3 decimals
    (27, 47, (0.433, 0.705)),  # the spec's example: 57.4%, about 14 points either way
    (0, 10, (0.000, 0.278)),
    (10, 10, (0.722, 1.000)),
    (5, 10, (0.237, 0.763)),
    (1, 1, (0.207, 1.000)),
    (0, 0, (0.000, 1.000)),  # nothing known: the whole range
]


@pytest.mark.parametrize(("passed", "total", "expected"), WILSON)
def test_wilson_interval(passed: int, total: int, expected: tuple[float, float]) -> None:
    low, high = wilson_interval(passed, total)
    assert (round(low, 3), round(high, 3)) == expected
    assert 0.0 <= low <= high <= 1.0


def test_wilson_edges_are_exact() -> None:
    assert wilson_interval(0, 10)[0] == 0.0
    assert wilson_interval(10, 10)[1] == 1.0


def test_wilson_widens_with_z() -> None:
    narrow = wilson_interval(27, 47, z=1.0)
    wide = wilson_interval(27, 47, z=2.576)
    assert wide[0] < narrow[0] and narrow[1] < wide[1]


@pytest.mark.parametrize(("passed", "total"), [(-1, 5), (6, 5), (0, -1)])
def test_wilson_rejects_impossible_counts(passed: int, total: int) -> None:
    with pytest.raises(ValueError, match="0 <= passed <= total"):
        wilson_interval(passed, total)


# ---------------------------------------------------------------- McNemar

MCNEMAR = [
    # lost (b), gained (c), p
    (10, 0, 2 / 2**10),  # ten lost, none gained: 0.00195
    (0, 10, 2 / 2**10),  # symmetric
    (5, 5, 1.0),
    (0, 0, 1.0),  # no flips say nothing
    (1, 0, 1.0),  # 2 * 0.5, capped at 1
    (3, 0, 0.25),  # 2 * 1/8
    (6, 1, 2 * (1 + 7) / 2**7),  # 0.125
    (8, 2, 2 * (1 + 10 + 45) / 2**10),  # 0.109375
]


@pytest.mark.parametrize(("b", "c", "p"), MCNEMAR)
def test_mcnemar_exact(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)


def test_mcnemar_spec_figures() -> None:
    assert round(mcnemar_exact(10, 0), 3) == 0.002
    assert mcnemar_exact(5, 5) == 1.0


def test_mcnemar_survives_many_flips() -> None:
    p = mcnemar_exact(1500, 0)  # 2**1500 is beyond a float; exact integers keep it finite
    assert p == 0.0 or (0 < p < 1e-300)
    assert mcnemar_exact(600, 600) == 1.0


def test_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        mcnemar_exact(-1, 2)


# ---------------------------------------------------------------- pass^k

PASS_HAT_K = [
    # n, c, k, expected
    (3, 2, 2, 1 / 3),  # C(2,2)/C(3,2)
    (3, 3, 3, 1.0),
    (5, 2, 3, 0.0),  # fewer successes than k
    (3, 2, 1, 2 / 3),  # k = 1 is the plain pass rate
    (5, 4, 2, 6 / 10),  # C(4,2)/C(5,2)
    (3, 2, 3, 0.0),  # k == n: passed every pass, or not
    (1, 1, 1, 1.0),
    (1, 0, 1, 0.0),
]


@pytest.mark.parametrize(("n", "c", "k", "expected"), PASS_HAT_K)
def test_pass_hat_k(n: int, c: int, k: int, expected: float) -> None:
    assert pass_hat_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 2, 0), (3, 2, 4)])
def test_pass_hat_k_rejects_impossible_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


def test_pass_k_defaults_to_every_pass() -> None:
    results = {
        "c1": [True, True, True],
        "c2": [True, False, True],  # flaky: counts as a fail at k = 3
        "c3": [False, False, False],
        "c4": [True, True, True],
    }
    assert pass_k(results) == 0.5  # k = 3: the share of cases that passed every pass
    assert pass_k(results, k=1) == pytest.approx((1 + 2 / 3 + 0 + 1) / 4)  # mean accuracy
    assert pass_k(results, k=2) == pytest.approx((1 + 1 / 3 + 0 + 1) / 4)


def test_pass_k_k_is_the_smallest_pass_count() -> None:
    results = {"a": [True, True, True], "b": [True, False]}
    assert pass_k(results) == pytest.approx((1 + 0) / 2)  # k = 2: C(3,2)/C(3,2) and C(1,2) = 0


def test_pass_k_errors_and_empty() -> None:
    assert pass_k({}) == 0.0
    with pytest.raises(ValueError, match="no passes"):
        pass_k({"a": []})
    with pytest.raises(ValueError, match="k=3 is more than the passes"):
        pass_k({"a": [True, True]}, k=3)


# ---------------------------------------------------------------- determinism


def test_determinism() -> None:
    runs = {
        "same": [("SELECT 1", "abc"), ("SELECT 1", "abc"), ("SELECT 1", "abc")],
        "other_sql": [("SELECT 1", "abc"), ("SELECT  1", "abc")],  # same rows, other SQL
        "other_rows": [("SELECT 1", "abc"), ("SELECT 1", "abd")],
        "failed_alike": [(None, None), (None, None)],  # no SQL either time: unchanged
        "once": [("SELECT 1", "abc")],  # one pass says nothing
    }
    assert determinism(runs) == Determinism(
        deterministic_cases=2,
        total_cases=4,
        rate=0.5,
        nondeterministic=["other_sql", "other_rows"],
    )


def test_determinism_with_single_passes_has_no_rate() -> None:
    result = determinism({"a": [("SELECT 1", "x")]})
    assert (result.total_cases, result.rate) == (0, None)
    assert result.to_dict() == {
        "deterministic_cases": 0,
        "total_cases": 0,
        "rate": None,
        "nondeterministic": [],
    }


# ---------------------------------------------------------------- percentiles and latency

PERCENTILES = [
    # values, q, expected (numpy's default linear interpolation)
    ([1, 2, 3, 4], 50, 2.5),
    ([1, 2, 3, 4], 95, 3.85),
    ([1, 2, 3, 4], 0, 1.0),
    ([1, 2, 3, 4], 100, 4.0),
    ([4, 1, 3, 2], 25, 1.75),  # input order does not matter
    ([7], 95, 7.0),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90, 9.1),
]


@pytest.mark.parametrize(("values", "q", "expected"), PERCENTILES)
def test_percentile(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("values", "q", "message"), [([], 50, "no values"), ([1], 101, "0..100"), ([1], -1, "0..100")]
)
def test_percentile_rejects_bad_input(values: list[float], q: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        percentile(values, q)


def test_latency_summary() -> None:
    summary = latency_summary([1.0, 2.0, 3.0, 4.0])
    assert summary == pytest.approx({"mean": 2.5, "p50": 2.5, "p95": 3.85})
    assert latency_summary([]) == {"mean": None, "p50": None, "p95": None}
    assert not any(math.isnan(v) for v in latency_summary([0.2]).values() if v is not None)
