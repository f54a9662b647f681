"""A result against every reviewed answer of a case: its gold rows first, then each reviewed
alternative (``alt_sql[i]``, 1-based). One path for every command that gives a verdict: eval
run's ``result_match``, ``eval grade`` and the neighbour check all call ``match_answers`` (or
``first_strict_match``), so an alternative accepted by one is accepted by all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nl2sql_assets.evaluation.judging.comparison import MATCH, Comparison, explain_lenient, explain_strict

if TYPE_CHECKING:
    from nl2sql_assets.evaluation.suites.model import EvalCase

Rows = Sequence[Sequence[Any]]
#: the label of a case's own gold rows; an alternative is ``alt_sql[i]``
GOLD_LABEL = "rows"


def alternative_label(index: int) -> str:
    """The label of the ``index``-th (1-based) reviewed alternative."""
    return f"alt_sql[{index}]"


def case_answers(case: EvalCase) -> list[tuple[str, list[list[Any]]]]:
    """(label, rows) for the case's stored rows, then each stored alternative's rows."""
    from nl2sql_assets.evaluation.judging.comparison import rows_from_dicts

    answers = [(GOLD_LABEL, rows_from_dicts(case.rows or [])[1])]
    for i, alt in enumerate(case.alt_rows, start=1):
        answers.append((alternative_label(i), rows_from_dicts(alt)[1]))
    return answers


@dataclass(frozen=True)
class AnswerVerdict:
    """Strict and lenient readings of one result against a case's answers. ``matched`` names the
    answer the strict reading matched (None: none did, and ``strict`` is the comparison with the
    gold rows, which says what differs); ``lenient_matched`` the same for the lenient reading."""

    strict: Comparison
    lenient: Comparison
    matched: str | None
    lenient_matched: str | None

    @property
    def passed(self) -> bool:
        return self.matched is not None

    @property
    def lenient_passed(self) -> bool:
        return self.lenient_matched is not None


def match_answers(answers: Sequence[tuple[str, Rows]], got: Rows | None, order_matters: bool) -> AnswerVerdict:
    """The verdict of ``got`` against ``answers`` (the gold first): a pass when it matches any of
    them, strictly; the lenient reading looks only where the strict one found nothing (lenient
    accepts all that strict accepts)."""
    if not answers:
        raise ValueError("a case to match has at least its gold rows")
    first_strict: Comparison | None = None
    for label, rows in answers:
        cmp = explain_strict(rows, got, order_matters)
        if cmp.passed:
            matched = Comparison(True, MATCH, f"rows match {label}")
            return AnswerVerdict(strict=matched, lenient=matched, matched=label, lenient_matched=label)
        first_strict = first_strict or cmp
    assert first_strict is not None
    first_lenient: Comparison | None = None
    for label, rows in answers:
        cmp = explain_lenient(rows, got, order_matters)
        if cmp.passed:
            return AnswerVerdict(strict=first_strict, lenient=cmp, matched=None, lenient_matched=label)
        first_lenient = first_lenient or cmp
    assert first_lenient is not None
    return AnswerVerdict(strict=first_strict, lenient=first_lenient, matched=None, lenient_matched=None)


def first_strict_match(answers: Sequence[Rows | None], got: Rows | None, order_matters: bool) -> int | None:
    """The index of the first answer ``got`` matches strictly (an answer of None, one that could
    not be computed, matches nothing), or None. The fast path of ``match_answers`` for callers
    that need only the strict verdict (grading on neighbour databases)."""
    from nl2sql_assets.evaluation.judging.comparison import compare_results

    if got is None:
        return None
    for index, rows in enumerate(answers):
        if rows is not None and compare_results(rows, got, order_matters):
            return index
    return None
