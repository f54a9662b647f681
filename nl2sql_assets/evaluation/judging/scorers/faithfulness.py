"""faithfulness: does the written answer state only numbers and names the rows support?

Right rows with a wrong sentence still mislead a user, so mode full checks the answer text
(summary and content) deterministically against the run's own rows. Mode plans has a fixed
fake sentence, so this scorer does not run there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from nl2sql_assets.config import StrictModel
from nl2sql_assets.evaluation.judging.scorers.base import CaseRun, NoConfig, Score, Scored, ScorerSummary
from nl2sql_assets.evaluation.judging.stats import percent


class FaithfulnessDetail(StrictModel):
    """One answer's check: what it states that the rows do not hold."""

    faithful: bool
    unsupported_numbers: list[Any] = Field(default_factory=list)
    unsupported_entities: list[Any] = Field(default_factory=list)
    checked: int = 0
    reason: str | None = None
    message: str | None = None

    def check(self) -> dict[str, Any]:
        """The check as case records show it (without the reason and message)."""
        return self.model_dump(include={"faithful", "unsupported_numbers", "unsupported_entities", "checked"})


class Unfaithful(StrictModel):
    case: str
    role: str
    pass_index: int = 1
    unsupported_numbers: list[Any] = Field(default_factory=list)
    unsupported_entities: list[Any] = Field(default_factory=list)


class FaithfulnessSummary(ScorerSummary):
    """How many written answers were checked, how many held only what the rows hold, and which did not."""

    answers: int
    faithful: int
    rate: float
    unfaithful: list[Unfaithful] = Field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        return {"faithfulness_rate": self.rate, "unfaithful_answers": self.answers - self.faithful}

    def markdown(self) -> str:
        return (f"Faithfulness: {self.faithful} of {self.answers} written answers state only what their rows "
                f"hold ({percent(self.rate)}).")


def answer_text(run: CaseRun) -> str:
    """The whole written answer: the summary, then the content when it adds something."""
    answer = run.result.answer
    if answer is None:
        return ""
    parts = [answer.summary.strip()]
    content = (answer.content or "").strip()
    if content and content != parts[0]:
        parts.append(content)
    return "\n\n".join(p for p in parts if p)


class Faithfulness:
    interface_version: ClassVar[int] = 1
    config_model: ClassVar[type[BaseModel]] = NoConfig
    detail_model: ClassVar[type[BaseModel]] = FaithfulnessDetail
    summary_model: ClassVar[type[ScorerSummary]] = FaithfulnessSummary
    modes: ClassVar[frozenset[str]] = frozenset({"full"})

    @classmethod
    def from_config(cls, cfg: BaseModel) -> Faithfulness:
        return cls()

    def score(self, run: CaseRun) -> Score:
        text = answer_text(run)
        if not text:
            return Score()  # a refusal or an error writes no answer
        from nl2sql_assets.evaluation.judging.faithfulness import check_faithfulness

        check = check_faithfulness(text, run.columns, run.rows or [], run.case.question)
        detail = FaithfulnessDetail(
            faithful=bool(check.faithful),
            unsupported_numbers=list(check.unsupported_numbers),
            unsupported_entities=list(check.unsupported_entities),
            checked=check.checked,
        )
        if not check.faithful:
            unsupported = [*check.unsupported_numbers, *check.unsupported_entities]
            detail.reason = "unsupported"
            detail.message = "the answer states what the rows do not hold: " + ", ".join(str(u) for u in unsupported)
        return Score(value=1.0 if check.faithful else 0.0, passed=bool(check.faithful),
                     detail=detail.model_dump(exclude_none=True))

    @staticmethod
    def detail_of(score: Score | None) -> FaithfulnessDetail | None:
        """A faithfulness score's check, typed; None when no answer was checked."""
        if score is None or score.passed is None:
            return None
        try:
            return FaithfulnessDetail.model_validate({"faithful": score.passed, **score.detail})
        except ValueError:
            return None

    @staticmethod
    def score_of(check: dict[str, Any]) -> Score:
        """The score a faithfulness check stands for (records once kept the check apart)."""
        faithful = bool(check.get("faithful"))
        return Score(value=1.0 if faithful else 0.0, passed=faithful, detail=dict(check))

    @classmethod
    def summarize(cls, scores: Sequence[Scored]) -> FaithfulnessSummary | None:
        checked = [(s, detail) for s in scores if (detail := cls.detail_of(s.score)) is not None]
        if not checked:
            return None
        unfaithful = [
            Unfaithful(case=s.case_id, role=s.role, pass_index=s.pass_index,
                       unsupported_numbers=list(d.unsupported_numbers),
                       unsupported_entities=list(d.unsupported_entities))
            for s, d in checked if not d.faithful
        ]
        faithful = len(checked) - len(unfaithful)
        return FaithfulnessSummary(answers=len(checked), faithful=faithful, rate=faithful / len(checked),
                                   unfaithful=unfaithful)
