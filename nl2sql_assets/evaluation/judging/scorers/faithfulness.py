"""faithfulness: does the written answer state only numbers and names the rows support?

Right rows with a wrong sentence still mislead a user, so mode full checks the answer text
(summary and content) deterministically against the run's own rows. Mode plans has a fixed
fake sentence, so this scorer does not run there.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from nl2sql_assets.evaluation.judging.scorers.base import CaseRun, NoConfig, Score


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
        detail: dict[str, Any] = {
            "faithful": bool(check.faithful),
            "unsupported_numbers": list(check.unsupported_numbers),
            "unsupported_entities": list(check.unsupported_entities),
            "checked": check.checked,
        }
        if not check.faithful:
            unsupported = [*check.unsupported_numbers, *check.unsupported_entities]
            detail["reason"] = "unsupported"
            detail["message"] = "the answer states what the rows do not hold: " + ", ".join(
                str(u) for u in unsupported
            )
        return Score(value=1.0 if check.faithful else 0.0, passed=bool(check.faithful), detail=detail)
