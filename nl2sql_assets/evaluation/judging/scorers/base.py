"""The scorer contract: a small object that answers one question about one case run, and sums
its own answers up for a board.

A scorer writes its ``Score.detail`` through a typed detail model of its own (``detail_model``)
and reads it back through the same model in ``summarize``, which turns the scores of a board's
case runs into the scorer's contribution to it: a ``ScorerSummary`` subclass (``summary_model``) that
says how its numbers read (Markdown, a CLI clause, a results-page cell) and which ones to plot.
Boards, reports, the CLI, the results page and the Dagster metadata show whatever scorers
contribute, without knowing any of them. Both are optional: a scorer without ``summarize``
contributes its tally only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.config import StrictModel
from nl2sql_assets.engine.result import QueryResult
from nl2sql_assets.evaluation.suites import EvalCase, Outcome
from nl2sql_assets.policy.check import PolicyDecision

INTERFACE_VERSION = 1


class Score(StrictModel):
    """``value`` in 0..1 and ``passed``; both None when the scorer does not apply.
    ``passed`` None with ``detail["error"]`` set means the scorer raised. ``detail`` is the
    scorer's detail model as JSON."""

    value: float | None = None
    passed: bool | None = None
    detail: dict[str, Any] = Field(default_factory=dict)

    @property
    def applies(self) -> bool:
        return self.passed is not None or "error" in self.detail

    @property
    def errored(self) -> bool:
        return self.passed is None and "error" in self.detail


class TurnRun(StrictModel):
    """One earlier turn of a follow-up as it was played: its question, what the engine returned,
    and the rows of the turn's reviewed SQL on the case's datasource (None: the turn has no SQL,
    or it could not run; then only the turn's status is judged)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    question: str
    result: QueryResult
    gold_rows: list[list[Any]] | None = None


class CaseRun(StrictModel):
    """What a scorer is given: one case asked once, as one role, in one mode (a follow-up's
    earlier turns in ``turns``, in the order they were played)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    case: EvalCase
    role: str
    mode: str  # the mode's name; a scorer names the modes it can score
    result: QueryResult
    rows: list[list[Any]] | None = None  # the first result set's rows, every one
    columns: list[str] = Field(default_factory=list)
    retrieval: dict[str, list[str]] | None = None  # table -> columns the retriever sent
    routed: list[str] | None = None  # mode retrieval: datasources, best first
    policy: PolicyDecision | None = None  # a policy probe: the final-SQL check's decision on its SQL
    turns: list[TurnRun] = Field(default_factory=list)

    @property
    def expected(self) -> Outcome:
        return self.case.outcome[self.role]


class NoConfig(StrictModel):
    """The config model of a scorer that takes no settings."""


@dataclass(frozen=True)
class Scored:
    """One case run's score with the run it belongs to: what ``summarize`` is given."""

    case_id: str
    role: str
    pass_index: int
    score: Score


class ScorerSummary(StrictModel):
    """A scorer's own numbers on a board, beside its tally. Subclasses add the fields; these
    methods say how they read, so whoever shows a board needs to know no scorer."""

    def metrics(self) -> dict[str, float]:
        """Numbers to plot over time (Dagster metadata), under names unique across scorers."""
        return {}

    def markdown(self) -> str | None:
        """A sentence under the board's tables."""
        return None

    def text(self) -> str | None:
        """A clause of the CLI's line for a board whose runs execute nothing."""
        return None

    def beside_accuracy(self) -> str | None:
        """A clause of the CLI's line for a board whose runs execute SQL, after its accuracy."""
        return None

    def cell(self) -> str | None:
        """The results page's cell for a series whose runs execute nothing."""
        return None


@runtime_checkable
class Scorer(Protocol):
    """Interface version 1. ``detail_model``, ``summary_model`` and ``summarize`` are optional:
    a scorer with ``summarize`` names the ``ScorerSummary`` subclass it returns in ``summary_model``."""

    interface_version: ClassVar[int]
    config_model: ClassVar[type[BaseModel]]
    modes: ClassVar[frozenset[str]]

    @classmethod
    def from_config(cls, cfg: BaseModel) -> Scorer: ...

    def score(self, run: CaseRun) -> Score: ...


class Summarizes(Protocol):
    """What a scorer that sums its scores up for a board has beside ``Scorer``."""

    detail_model: ClassVar[type[BaseModel]]
    summary_model: ClassVar[type[ScorerSummary]]

    @classmethod
    def summarize(cls, scores: Sequence[Scored]) -> ScorerSummary | None: ...


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
