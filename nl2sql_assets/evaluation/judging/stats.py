"""Small, exact statistics for reading eval runs: intervals, paired flips, pass^k, latency.

Forty-odd cases cannot settle much on their own, so every accuracy carries a Wilson
interval, two runs are compared on the cases that flipped (McNemar's exact test), and
repeated passes are summarised per case (pass^k, determinism). Stdlib only: binomial terms
use ``math.comb`` on exact integers, so no p-value is lost to float underflow. ``Rate`` is a
share with its interval, as boards and scorer summaries keep it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import model_validator

from nl2sql_assets.config import StrictModel


def wilson_interval(passed: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for ``passed`` successes out of ``total``, as shares in 0..1.

    With ``total == 0`` nothing is known and the interval is the whole range, (0.0, 1.0).
    27 of 47 gives (0.433, 0.705) to three decimals.
    """
    if total < 0 or passed < 0 or passed > total:
        raise ValueError(f"need 0 <= passed <= total, got passed={passed}, total={total}")
    if z <= 0:
        raise ValueError(f"z must be positive, got {z}")
    if total == 0:
        return (0.0, 1.0)
    p = passed / total
    z2 = z * z
    denom = 1 + z2 / total
    centre = (p + z2 / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / denom
    # The exact bounds at the edges are 0 and 1; pin them so rounding never leaves -1e-17.
    low = 0.0 if passed == 0 else max(0.0, centre - half)
    high = 1.0 if passed == total else min(1.0, centre + half)
    return (low, high)


def mcnemar_exact(b: int, c: int) -> float:
    """McNemar's exact two-sided p-value on the discordant pairs of a paired comparison.

    ``b`` cases went pass -> fail and ``c`` fail -> pass. Under "both runs are equally good"
    each flip is a fair coin, so p = min(1, 2 * P(X <= min(b, c))) with X ~ Bin(b + c, 1/2).
    No flips at all gives 1.0. (10, 0) gives 0.00195; (5, 5) gives 1.0.
    """
    if b < 0 or c < 0:
        raise ValueError(f"flip counts must be non-negative, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass^k for one case: the chance that k passes drawn without
    replacement from its n passes (c of them successful) all succeeded, C(c, k) / C(n, k).

    With k == n it is 1 when every pass passed and 0 otherwise.
    """
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"need n >= 1 and 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if c < k:
        return 0.0
    return math.comb(c, k) / math.comb(n, k)


def pass_k(results: Mapping[str, Sequence[bool]], k: int | None = None) -> float:
    """The mean of ``pass_hat_k`` over cases (case id -> each pass's verdict).

    ``k`` defaults to the smallest number of passes any case has, so with the usual equal
    pass counts it is the share of cases that passed every pass. A case counts once however
    many passes it has; a flaky case lowers it where mean accuracy would not. An empty
    mapping gives 0.0.
    """
    if not results:
        return 0.0
    counts = {case: len(passes) for case, passes in results.items()}
    empty = [case for case, n in counts.items() if n == 0]
    if empty:
        raise ValueError(f"cases with no passes: {empty}")
    if k is None:
        k = min(counts.values())
    short = [case for case, n in counts.items() if n < k]
    if short:
        raise ValueError(f"k={k} is more than the passes of cases {short}")
    total = sum(pass_hat_k(len(p), sum(1 for v in p if v), k) for p in results.values())
    return total / len(results)


@dataclass(frozen=True)
class Determinism:
    """Whether repeated passes wrote the same SQL and returned the same rows.

    Only cases with at least two passes count. ``rate`` is None when no case has two.
    """

    deterministic_cases: int
    total_cases: int
    rate: float | None
    nondeterministic: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def determinism(runs: Mapping[str, Sequence[tuple[str | None, str | None]]]) -> Determinism:
    """Per case, the (sql, rows_sha256) of each pass; a case is deterministic when every pass
    has the identical pair. None compares equal to None, so a case that failed the same way
    every pass (no SQL, no rows) is deterministic too: the output did not change."""
    total = 0
    stable = 0
    unstable: list[str] = []
    for case, passes in runs.items():
        if len(passes) < 2:
            continue
        total += 1
        first = tuple(passes[0])
        if all(tuple(p) == first for p in passes[1:]):
            stable += 1
        else:
            unstable.append(case)
    return Determinism(
        deterministic_cases=stable,
        total_cases=total,
        rate=stable / total if total else None,
        nondeterministic=unstable,
    )


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (q in 0..100) with linear interpolation between closest ranks,
    as numpy's default: [1, 2, 3, 4] gives 2.5 at 50 and 3.85 at 95."""
    data = sorted(float(v) for v in values)
    if not data:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0..100, got {q}")
    pos = (len(data) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    frac = pos - lo
    return data[lo] + (data[hi] - data[lo]) * frac


def latency_summary(values: Iterable[float]) -> dict[str, float | None]:
    """Mean, median and 95th percentile of latencies; all None when there are none."""
    data = [float(v) for v in values]
    if not data:
        return {"mean": None, "p50": None, "p95": None}
    return {
        "mean": sum(data) / len(data),
        "p50": percentile(data, 50),
        "p95": percentile(data, 95),
    }


class Rate(StrictModel):
    """A share with its 95% Wilson interval. Over nothing (``total`` 0) there is no share:
    ``rate``, ``low`` and ``high`` are None (null in JSON, "n/a" on a page), never 0."""

    passed: int
    total: int
    rate: float | None
    low: float | None
    high: float | None

    @model_validator(mode="before")
    @classmethod
    def _nothing_counted_is_no_rate(cls, data: Any) -> Any:
        """Reports written before this kept 0.0 over nothing; they read as no rate."""
        if isinstance(data, dict) and not data.get("total"):
            return {**data, "rate": None, "low": None, "high": None}
        return data

    @classmethod
    def of(cls, passed: int, total: int) -> Rate:
        if total <= 0:
            return cls(passed=0, total=0, rate=None, low=None, high=None)
        low, high = wilson_interval(passed, total)
        return cls(passed=passed, total=total, rate=passed / total, low=float(low), high=float(high))

    def text(self) -> str:
        """``57.4%``, or ``n/a`` when nothing was counted."""
        return percent(self.rate)

    def with_interval(self, sep: str = "–") -> str:
        """``57.4% (43.3%–70.5%)``, or ``n/a`` when nothing was counted."""
        return rate_cell(self, sep)

    def low_high(self) -> str:
        """``43.3%-70.5%``, or ``n/a``."""
        return "n/a" if self.rate is None else f"{percent(self.low)}-{percent(self.high)}"

    def count_text(self) -> str:
        """``57.4% (27/47, 95% CI 43.3%-70.5%)``, or ``n/a (0/0)``."""
        if self.rate is None:
            return "n/a (0/0)"
        return f"{percent(self.rate)} ({self.passed}/{self.total}, 95% CI {percent(self.low)}-{percent(self.high)})"


def percent(value: float | None) -> str:
    """A share as a percentage to one decimal; ``n/a`` for no share at all."""
    return "n/a" if value is None else f"{value * 100:.1f}%"


def rate_cell(rate: Rate, sep: str = "–") -> str:
    """``57.4% (43.3%–70.5%)``, or ``n/a`` when nothing was counted."""
    if rate.rate is None:
        return "n/a"
    return f"{percent(rate.rate)} ({percent(rate.low)}{sep}{percent(rate.high)})"
