"""routing: did the question go to the case's datasources?

Mode full checks what the run used; mode retrieval checks the ranking itself, both the top
pick (top1) and that every needed datasource is on the shortlist the engine would use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, Field

from nl2sql_assets.config import ProjectConfig, StrictModel
from nl2sql_assets.evaluation.judging.scorers.base import CaseRun, Score, Scored, ScorerSummary
from nl2sql_assets.evaluation.judging.stats import Rate, percent, rate_cell


class RoutingConfig(StrictModel):
    """``max_datasources``: how deep the shortlist goes (a run takes it from the project's
    ``settings.routing.max_datasources``, through ``from_project``)."""

    max_datasources: Annotated[int, Field(gt=0)] = 2

    @classmethod
    def from_project(cls, project: ProjectConfig) -> dict[str, Any]:
        return {"max_datasources": project.settings.routing.max_datasources}


class RoutingUsed(StrictModel):
    """Mode full: the datasources the run used, against the case's."""

    used: list[str] = Field(default_factory=list)
    missed: list[str] = Field(default_factory=list)
    extra: list[str] = Field(default_factory=list)
    reason: str | None = None
    message: str | None = None


class RoutingRanking(StrictModel):
    """Mode retrieval: the router's ranking, its top pick and its shortlist."""

    top1: bool
    shortlist: bool
    routed: list[str] = Field(default_factory=list)
    missed: list[str] = Field(default_factory=list)
    reason: str | None = None
    message: str | None = None


class RoutingSummary(ScorerSummary):
    """Mode retrieval's routing verdicts: top-1 hits and full shortlists."""

    cases: int
    top1: Rate
    shortlist: Rate

    def metrics(self) -> dict[str, float]:
        rates = {"routing_top1": self.top1.rate, "routing_shortlist": self.shortlist.rate}
        return {key: value for key, value in rates.items() if value is not None}  # a rate over nothing: none

    def markdown(self) -> str:
        return f"Routing: top-1 {rate_cell(self.top1)}, shortlist {rate_cell(self.shortlist)}."

    def text(self) -> str:
        return f"routing top-1 {self.top1.text()}, shortlist {self.shortlist.text()}"

    def cell(self) -> str:
        return f"top-1 {percent(self.top1.rate)}, shortlist {percent(self.shortlist.rate)}"


class Routing:
    interface_version: ClassVar[int] = 1
    config_model: ClassVar[type[BaseModel]] = RoutingConfig
    detail_model: ClassVar[type[BaseModel]] = RoutingRanking  # mode retrieval's; mode full writes RoutingUsed
    summary_model: ClassVar[type[ScorerSummary]] = RoutingSummary
    modes: ClassVar[frozenset[str]] = frozenset({"full", "retrieval"})

    def __init__(self, max_datasources: int = 2) -> None:
        self.max_datasources = max_datasources

    @classmethod
    def from_config(cls, cfg: BaseModel) -> Routing:
        assert isinstance(cfg, RoutingConfig)
        return cls(cfg.max_datasources)

    def score(self, run: CaseRun) -> Score:
        if run.expected != "allowed" or run.case.kind == "probe":  # a probe asks the policy, not a question
            return Score()
        read = {"full": self._used, "retrieval": self._ranking}[run.mode]  # one reading per mode it scores
        return read(run, list(run.case.datasources))

    def _used(self, run: CaseRun, wanted: list[str]) -> Score:
        used = list(run.result.datasources)
        detail = RoutingUsed(used=used, missed=[d for d in wanted if d not in used],
                             extra=[d for d in used if d not in wanted])
        passed = not detail.missed and not detail.extra
        if not passed:
            detail.reason = "wrong_datasources"
            detail.message = f"used {used or 'no datasource'}, expected {wanted}"
        return Score(value=1.0 if passed else 0.0, passed=passed, detail=detail.model_dump(exclude_none=True))

    def _ranking(self, run: CaseRun, wanted: list[str]) -> Score:
        if run.routed is None:
            return Score()
        routed = list(run.routed)
        shortlist = routed[: self.max_datasources]
        top1 = bool(routed) and routed[0] in wanted
        missed = [d for d in wanted if d not in shortlist]
        detail = RoutingRanking(top1=top1, shortlist=not missed, routed=routed, missed=missed)
        passed = top1 and not missed
        if not passed:
            problems = []
            if not top1:
                problems.append(f"ranked {routed[0] if routed else 'nothing'} first")
            if missed:
                problems.append(f"left {missed} off the top {self.max_datasources}")
            detail.reason = "top1" if not top1 else "shortlist"
            detail.message = f"routing {' and '.join(problems)} (expected {wanted})"
        return Score(value=1.0 if passed else 0.0, passed=passed, detail=detail.model_dump(exclude_none=True))

    @classmethod
    def summarize(cls, scores: Sequence[Scored]) -> RoutingSummary | None:
        """Over the rankings (mode retrieval); what mode full used is in the tally alone."""
        rankings: list[RoutingRanking] = []
        for s in scores:
            if s.score.passed is None:
                continue
            try:
                rankings.append(RoutingRanking.model_validate(s.score.detail))
            except ValueError:
                continue  # a full-mode detail: the datasources used, not a ranking
        if not rankings:
            return None
        n = len(rankings)
        return RoutingSummary(cases=n, top1=Rate.of(sum(r.top1 for r in rankings), n),
                              shortlist=Rate.of(sum(r.shortlist for r in rankings), n))
