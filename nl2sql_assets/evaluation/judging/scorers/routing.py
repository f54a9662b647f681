"""routing: did the question go to the case's datasources?

Mode full checks what the run used; mode retrieval checks the ranking itself, both the top
pick (top1) and that every needed datasource is on the shortlist the engine would use.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, Field

from nl2sql_assets.config import ProjectConfig, StrictModel
from nl2sql_assets.evaluation.judging.scorers.base import CaseRun, Score


class RoutingConfig(StrictModel):
    """``max_datasources``: how deep the shortlist goes (a run takes it from the project's
    ``settings.routing.max_datasources``, through ``from_project``)."""

    max_datasources: Annotated[int, Field(gt=0)] = 2

    @classmethod
    def from_project(cls, project: ProjectConfig) -> dict[str, Any]:
        return {"max_datasources": project.settings.routing.max_datasources}


class Routing:
    interface_version: ClassVar[int] = 1
    config_model: ClassVar[type[BaseModel]] = RoutingConfig
    modes: ClassVar[frozenset[str]] = frozenset({"full", "retrieval"})

    def __init__(self, max_datasources: int = 2) -> None:
        self.max_datasources = max_datasources

    @classmethod
    def from_config(cls, cfg: BaseModel) -> Routing:
        assert isinstance(cfg, RoutingConfig)
        return cls(cfg.max_datasources)

    def score(self, run: CaseRun) -> Score:
        if run.expected != "allowed":
            return Score()
        read = {"full": self._used, "retrieval": self._ranking}[run.mode]  # one reading per mode it scores
        return read(run, list(run.case.datasources))

    def _used(self, run: CaseRun, wanted: list[str]) -> Score:
        used = list(run.result.datasources)
        missed = [d for d in wanted if d not in used]
        extra = [d for d in used if d not in wanted]
        passed = not missed and not extra
        detail: dict = {"used": used, "missed": missed, "extra": extra}
        if not passed:
            detail["reason"] = "wrong_datasources"
            detail["message"] = f"used {used or 'no datasource'}, expected {wanted}"
        return Score(value=1.0 if passed else 0.0, passed=passed, detail=detail)

    def _ranking(self, run: CaseRun, wanted: list[str]) -> Score:
        if run.routed is None:
            return Score()
        routed = list(run.routed)
        shortlist = routed[: self.max_datasources]
        top1 = bool(routed) and routed[0] in wanted
        missed = [d for d in wanted if d not in shortlist]
        in_shortlist = not missed
        passed = top1 and in_shortlist
        detail: dict = {"top1": top1, "shortlist": in_shortlist, "routed": routed, "missed": missed}
        if not passed:
            problems = []
            if not top1:
                problems.append(f"ranked {routed[0] if routed else 'nothing'} first")
            if missed:
                problems.append(f"left {missed} off the top {self.max_datasources}")
            detail["reason"] = "top1" if not top1 else "shortlist"
            detail["message"] = f"routing {' and '.join(problems)} (expected {wanted})"
        return Score(value=1.0 if passed else 0.0, passed=passed, detail=detail)
