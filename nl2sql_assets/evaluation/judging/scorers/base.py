"""The scorer contract: a small object that answers one question about one case run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.engine.result import QueryResult
from nl2sql_assets.evaluation.suites import EvalCase, Outcome

INTERFACE_VERSION = 1


class Score(BaseModel):
    """``value`` in 0..1 and ``passed``; both None when the scorer does not apply.
    ``passed`` None with ``detail["error"]`` set means the scorer raised."""

    model_config = ConfigDict(extra="forbid")

    value: float | None = None
    passed: bool | None = None
    detail: dict[str, Any] = Field(default_factory=dict)

    @property
    def applies(self) -> bool:
        return self.passed is not None or "error" in self.detail

    @property
    def errored(self) -> bool:
        return self.passed is None and "error" in self.detail


class CaseRun(BaseModel):
    """What a scorer is given: one case asked once, as one role, in one mode."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    case: EvalCase
    role: str
    mode: str  # the mode's name; a scorer names the modes it can score
    result: QueryResult
    rows: list[list[Any]] | None = None  # the first result set's rows, every one
    columns: list[str] = Field(default_factory=list)
    retrieval: dict[str, list[str]] | None = None  # table -> columns the retriever sent
    routed: list[str] | None = None  # mode retrieval: datasources, best first

    @property
    def expected(self) -> Outcome:
        return self.case.outcome[self.role]


class NoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


@runtime_checkable
class Scorer(Protocol):
    interface_version: ClassVar[int]
    config_model: ClassVar[type[BaseModel]]
    modes: ClassVar[frozenset[str]]

    @classmethod
    def from_config(cls, cfg: BaseModel) -> Scorer: ...

    def score(self, run: CaseRun) -> Score: ...


def safe_score(scorer: Scorer, run: CaseRun) -> Score:
    """A scorer that raises gives an error verdict instead of stopping the run."""
    try:
        score = scorer.score(run)
    except Exception as exc:
        return Score(passed=None, detail={"error": f"{type(exc).__name__}: {exc}"})
    if not isinstance(score, Score):
        return Score(passed=None, detail={"error": f"TypeError: score() returned {type(score).__name__}, not Score"})
    return score


def score_run(scorers: Mapping[str, Scorer], run: CaseRun) -> dict[str, Score]:
    return {name: safe_score(scorer, run) for name, scorer in scorers.items()}
