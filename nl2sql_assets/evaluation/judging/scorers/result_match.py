"""result_match: did an allowed role get the reviewed rows (or a reviewed alternative)?

Strict comparison decides the verdict; the lenient reading rides along in ``detail`` so the
report can show both accuracies from one run.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from nl2sql_assets.config import StrictModel
from nl2sql_assets.evaluation.judging.scorers.base import CaseRun, NoConfig, Score


def _gold_answers(run: CaseRun) -> list[tuple[str, list[list[Any]]]]:
    """(label, rows) for the case's rows, then each alternative as ``alt_sql[i]`` (1-based)."""
    from nl2sql_assets.evaluation.judging.comparison import rows_from_dicts

    case = run.case
    answers = [("rows", rows_from_dicts(case.rows or [])[1])]
    for i, alt in enumerate(case.alt_rows, start=1):
        answers.append((f"alt_sql[{i}]", rows_from_dicts(alt)[1]))
    return answers


class LenientMatch(StrictModel):
    """The lenient reading of the same rows (extra columns, column order, text spellings forgiven)."""

    passed: bool
    reason: str
    matched: str | None = None


class ResultMatchDetail(StrictModel):
    """Which reviewed answer the rows matched (``rows`` or ``alt_sql[i]``), or why none did."""

    reason: str
    message: str
    matched: str | None = None
    lenient: LenientMatch


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
        result = run.result
        if result.status != "success":
            code = f" {result.error_code}" if result.error_code else ""
            text = f": {result.error_message}" if result.error_message else ""
            return _fail("status", f"status {result.status}{code}{text}")
        if len(result.result_sets) != 1:
            return _fail("result_sets", f"expected one result set, got {len(result.result_sets)}")
        got = run.rows if run.rows is not None else result.result_sets[0].rows

        from nl2sql_assets.evaluation.judging.comparison import explain_lenient, explain_strict

        answers = _gold_answers(run)
        strict_first = None
        matched: str | None = None
        for label, gold in answers:
            cmp = explain_strict(gold, got, case.order_matters)
            if strict_first is None:
                strict_first = cmp
            if cmp.passed:
                matched = label
                break
        lenient_first = None
        lenient_matched: str | None = matched  # lenient accepts all that strict accepts
        if matched is None:
            for label, gold in answers:
                cmp = explain_lenient(gold, got, case.order_matters)
                if lenient_first is None:
                    lenient_first = cmp
                if cmp.passed:
                    lenient_matched = label
                    break
        assert strict_first is not None
        passed = matched is not None
        lenient_passed = lenient_matched is not None
        detail = ResultMatchDetail(
            reason="match" if passed else strict_first.reason,
            message=f"rows match {matched}" if passed else strict_first.message,
            matched=matched,
            lenient=LenientMatch(
                passed=lenient_passed,
                reason="match" if lenient_passed or lenient_first is None else lenient_first.reason,
                matched=lenient_matched,
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
