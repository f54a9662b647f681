"""outcome: did each role get what the case says it should (answer, refusal, not answerable, clarify)?

A refusal must carry the one generic message: a message naming a table would tell a
role what it may not read, so it fails here even though the status is right.
"""

from __future__ import annotations

from functools import cache
from typing import ClassVar

from pydantic import BaseModel

from nl2sql_assets.config import StrictModel
from nl2sql_assets.engine.result import QUESTION_NOT_ANSWERABLE, SECURITY_VIOLATION, QueryResult
from nl2sql_assets.evaluation.judging.scorers.base import CaseRun, NoConfig, Score


@cache
def generic_refusal() -> str:
    from nl2sql_assets.engine.validator import GENERIC_REFUSAL

    return GENERIC_REFUSAL


def _has_rows(result: QueryResult) -> bool:
    return any(rs.rows for rs in result.result_sets)


def _got(result: QueryResult) -> str:
    code = f" {result.error_code}" if result.error_code else ""
    return f"status {result.status}{code}"


class OutcomeDetail(StrictModel):
    """What the role should have got, what it got, and why that is a pass or a fail."""

    expected: str
    got: str
    reason: str
    message: str


def _verdict(ok: bool, reason: str, message: str, result: QueryResult, expected: str) -> Score:
    detail = OutcomeDetail(expected=expected, got=_got(result), reason="ok" if ok else reason,
                           message=f"got {_got(result)} as expected" if ok else message)
    return Score(value=1.0 if ok else 0.0, passed=ok, detail=detail.model_dump())


def _error_outcome(result: QueryResult, expected: str, code: str) -> Score:
    if result.status != "error" or result.error_code != code:
        return _verdict(False, "wrong_outcome", f"expected {code}, got {_got(result)}", result, expected)
    if _has_rows(result):
        return _verdict(False, "rows_returned", f"{code} came with rows", result, expected)
    if code == SECURITY_VIOLATION and (result.error_message or "") != generic_refusal():
        return _verdict(
            False,
            "not_generic",
            f"the refusal is not the generic message: {result.error_message!r}",
            result,
            expected,
        )
    return _verdict(True, "ok", "", result, expected)


class Outcome:
    interface_version: ClassVar[int] = 1
    config_model: ClassVar[type[BaseModel]] = NoConfig
    detail_model: ClassVar[type[BaseModel]] = OutcomeDetail
    modes: ClassVar[frozenset[str]] = frozenset({"full", "plans"})

    @classmethod
    def from_config(cls, cfg: BaseModel) -> Outcome:
        return cls()

    def score(self, run: CaseRun) -> Score:
        result = run.result
        expected = run.expected
        if expected == "allowed":
            ok = result.status == "success"
            msg = "" if ok else f"expected an answer, got {_got(result)}" + (
                f": {result.error_message}" if result.error_message else ""
            )
            return _verdict(ok, "wrong_outcome", msg, result, expected)
        if expected == "refused":
            return _error_outcome(result, expected, SECURITY_VIOLATION)
        if expected == "unanswerable":
            return _error_outcome(result, expected, QUESTION_NOT_ANSWERABLE)
        if expected == "clarify":
            ok = result.status == "needs_clarification"
            return _verdict(ok, "wrong_outcome", f"expected needs_clarification, got {_got(result)}", result, expected)
        return Score()
