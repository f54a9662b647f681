"""From scorer verdicts to a case's status and reason: pass only when every applicable scorer passed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from nl2sql_assets.evaluation.judging.scorers.base import Score
from nl2sql_assets.evaluation.judging.scorers.result_match import ResultMatch

EXECUTION_SCORERS = ("result_match", "outcome")
#: A case run's status: every applicable scorer passed, one failed, one raised, or none applied.
Verdict = Literal["pass", "fail", "error", "skip"]


def score_message(score: Score) -> str:
    """The human reason a scorer gave: its message, else its reason, else its error."""
    detail = score.detail
    for key in ("error", "message", "reason"):
        value = detail.get(key)
        if value:
            return f"error: {value}" if key == "error" else str(value)
    return "failed"


def case_status(
    scores: Mapping[str, Score],
    *,
    lenient: bool = False,
    only: Iterable[str] | None = None,
) -> tuple[Verdict, str]:
    """``(status, reason)``: "error" when a scorer raised, "fail" when one failed, "pass" when
    every applicable one passed, "skip" when none applied. ``lenient`` reads result_match's
    lenient verdict; ``only`` restricts the verdict to those scorers (execution status)."""
    keep = None if only is None else set(only)
    applied = 0
    first_fail: str | None = None
    first_error: str | None = None
    for name, score in scores.items():
        if keep is not None and name not in keep:
            continue
        if score.errored:
            applied += 1
            if first_error is None:
                first_error = f"{name}: {score_message(score)}"
            continue
        passed = score.passed
        if passed is None:
            continue
        applied += 1
        if lenient and name == "result_match":
            lenient_passed = ResultMatch.lenient_passed(score)
            passed = passed if lenient_passed is None else lenient_passed
        if not passed and first_fail is None:
            first_fail = f"{name}: {score_message(score)}"
    if first_error is not None:
        return "error", first_error
    if first_fail is not None:
        return "fail", first_fail
    return ("pass" if applied else "skip"), ""


def execution_lenient_status(scores: Mapping[str, Score], strict: Verdict | None) -> Verdict | None:
    """Execution status with result_match read leniently: a strict pass stays a pass, and a strict
    miss passes when result_match's lenient reading passed and no other execution scorer
    (outcome) failed."""
    if strict is None or strict in ("pass", "error", "skip"):
        return strict
    match = scores.get("result_match")
    if match is None or not ResultMatch.lenient_passed(match):
        return strict
    outcome = scores.get("outcome")
    if outcome is not None and outcome.applies and outcome.passed is not True:
        return strict
    return "pass"
