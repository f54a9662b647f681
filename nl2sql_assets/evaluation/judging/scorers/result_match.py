"""result_match: did an allowed role get the reviewed rows (or a reviewed alternative)?

Strict comparison decides the verdict; the lenient reading rides along in ``detail`` so the
report can show both accuracies from one run. A follow-up is judged on every turn: an earlier
turn that failed (the engine gave no rows, or rows other than its reviewed SQL's) fails the case
with that turn's own reason (``earlier_turn``), whatever the final turn gave.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from nl2sql_assets.config import StrictModel
from nl2sql_assets.evaluation.judging.scorers.base import CaseRun, NoConfig, Score, TurnRun


class LenientMatch(StrictModel):
    """The lenient reading of the same rows (extra columns, column order, text spellings forgiven)."""

    passed: bool
    reason: str
    matched: str | None = None


class TurnVerdict(StrictModel):
    """One earlier turn of a follow-up, judged: strictly, and in the lenient reading."""

    turn: int  # 1-based, in the order played
    passed: bool
    lenient: bool
    reason: str
    message: str


class ResultMatchDetail(StrictModel):
    """Which reviewed answer the rows matched (``rows`` or ``alt_sql[i]``), or why none did; a
    follow-up's earlier turns, each judged."""

    reason: str
    message: str
    matched: str | None = None
    lenient: LenientMatch
    turns: list[TurnVerdict] = Field(default_factory=list)


EARLIER_TURN = "earlier_turn"


def judge_turn(number: int, turn: TurnRun) -> TurnVerdict:
    """An earlier turn passes when the engine answered it and, where the turn has reviewed SQL, with
    that SQL's rows (strictly; leniently for the lenient reading)."""
    result = turn.result
    if result.status != "success":
        code = f" {result.error_code}" if result.error_code else ""
        text = f": {result.error_message}" if result.error_message else ""
        return TurnVerdict(turn=number, passed=False, lenient=False, reason="status",
                           message=f"status {result.status}{code}{text}")
    if turn.gold_rows is None:
        return TurnVerdict(turn=number, passed=True, lenient=True, reason="match",
                           message="answered (the turn has no reviewed rows to compare)")
    from nl2sql_assets.evaluation.judging.answers import GOLD_LABEL, match_answers

    got = result.result_sets[0].rows if len(result.result_sets) == 1 else result.rows
    verdict = match_answers([(GOLD_LABEL, turn.gold_rows)], got, False)
    return TurnVerdict(turn=number, passed=verdict.passed, lenient=verdict.lenient_passed,
                       reason="match" if verdict.passed else verdict.strict.reason, message=verdict.strict.message)


def _fail(reason: str, message: str) -> Score:
    detail = ResultMatchDetail(reason=reason, message=message, lenient=LenientMatch(passed=False, reason=reason))
    return Score(value=0.0, passed=False, detail=detail.model_dump())


class ResultMatch:
    interface_version: ClassVar[int] = 1
    config_model: ClassVar[type[BaseModel]] = NoConfig
    detail_model: ClassVar[type[BaseModel]] = ResultMatchDetail
    modes: ClassVar[frozenset[str]] = frozenset({"full", "plans"})

    @classmethod
    def from_config(cls, cfg: BaseModel) -> ResultMatch:
        return cls()

    def score(self, run: CaseRun) -> Score:
        case = run.case
        if run.expected != "allowed" or case.kind != "answer" or case.sql is None:
            return Score()
        final = self._final(run)
        if not run.turns:
            return final
        turns = [judge_turn(n, turn) for n, turn in enumerate(run.turns, start=1)]
        detail = ResultMatchDetail.model_validate({**final.detail, "turns": [t.model_dump() for t in turns]})
        failed = next((t for t in turns if not t.passed), None)
        if failed is not None:  # the earlier turn's own reason stands before the final turn's
            where = f"turn {failed.turn} of {len(turns) + 1} ({run.turns[failed.turn - 1].question!r})"
            detail.reason, detail.message, detail.matched = EARLIER_TURN, f"{where}: {failed.message}", None
        if not all(t.lenient for t in turns):
            detail.lenient = LenientMatch(passed=False, reason=EARLIER_TURN)
        passed = failed is None and bool(final.passed)
        return Score(value=1.0 if passed else 0.0, passed=passed, detail=detail.model_dump())

    def _final(self, run: CaseRun) -> Score:
        """The verdict on the question the case asks (a follow-up's final turn)."""
        case = run.case
        result = run.result
        if result.status != "success":
            code = f" {result.error_code}" if result.error_code else ""
            text = f": {result.error_message}" if result.error_message else ""
            return _fail("status", f"status {result.status}{code}{text}")
        if len(result.result_sets) != 1:
            return _fail("result_sets", f"expected one result set, got {len(result.result_sets)}")
        got = run.rows if run.rows is not None else result.result_sets[0].rows

        from nl2sql_assets.evaluation.judging.answers import case_answers, match_answers

        verdict = match_answers(case_answers(case), got, case.order_matters)
        passed = verdict.passed
        detail = ResultMatchDetail(
            reason="match" if passed else verdict.strict.reason,
            message=verdict.strict.message,
            matched=verdict.matched,
            lenient=LenientMatch(
                passed=verdict.lenient_passed,
                reason="match" if verdict.lenient_passed else verdict.lenient.reason,
                matched=verdict.lenient_matched,
            ),
        )
        return Score(value=1.0 if passed else 0.0, passed=passed, detail=detail.model_dump())

    @staticmethod
    def lenient_passed(score: Score) -> bool | None:
        """The lenient verdict a result_match score carries (None when it carries none). Boards
        once wrote it as a bare flag; both spellings read."""
        value = score.detail.get("lenient")
        if isinstance(value, bool):
            return value
        if isinstance(value, dict) and isinstance(value.get("passed"), bool):
            return value["passed"]
        return None
