"""Threshold gates: floors and ceilings a run's boards must meet, beside the baseline gate.

Each threshold is a small object registered once in ``THRESHOLDS`` (one per measure): its name is
the field of ``evals.yaml``'s ``thresholds:`` (``config.ThresholdSettings``) and, with dashes, the
``eval run`` option. ``measure`` reads the measure off a board, or returns None when the run did
not measure it: a probe-only run has no execution measures, a run without probes no policy
recall. An unmeasured threshold is reported as such, never as missed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field

from nl2sql_assets.config import StrictModel, ThresholdSettings
from nl2sql_assets.evaluation.reporting.board import Board, EvalReport
from nl2sql_assets.evaluation.reporting.coverage import is_query
from nl2sql_assets.evaluation.running.modes import get_mode


class Threshold:
    """One measure with a floor (``min``) or a ceiling (``max``). Subclasses set the class
    attributes and ``measure``."""

    name: ClassVar[str]
    bound: ClassVar[Literal["min", "max"]]
    label: ClassVar[str]
    unit: ClassVar[Literal["share", "ms", "usd"]] = "share"

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    def measure(self, board: Board, mode: str) -> float | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def missed(self, value: float, limit: float) -> bool:
        return value < limit if self.bound == "min" else value > limit

    def show(self, value: float) -> str:
        if self.unit == "share":
            return f"{value:.1%}"
        if self.unit == "ms":
            return f"{value:.0f} ms"
        return f"${value:.4f}"


def _has_queries(board: Board) -> bool:
    if board.query_runs is not None:
        return board.query_runs > 0
    return any(is_query(r) and r.status != "skip" for r in board.results)


class MinExecutionSuccess(Threshold):
    name = "min_execution_success"
    bound = "min"
    label = "execution success"

    def measure(self, board: Board, mode: str) -> float | None:
        rate = board.execution_success
        return rate.rate if rate is not None and rate.total else None


class MinAccuracy(Threshold):
    name = "min_accuracy"
    bound = "min"
    label = "accuracy"

    def measure(self, board: Board, mode: str) -> float | None:
        if not _has_queries(board):
            return None
        rate = board.accuracy.execution if get_mode(mode).executes else board.accuracy.overall
        return rate.rate if rate.total else None


class MinLenientAccuracy(Threshold):
    name = "min_lenient_accuracy"
    bound = "min"
    label = "lenient accuracy"

    def measure(self, board: Board, mode: str) -> float | None:
        rate = board.accuracy.execution_lenient
        return rate.rate if get_mode(mode).executes and rate.total and _has_queries(board) else None


class MinNeighbourAccuracy(Threshold):
    name = "min_neighbour_accuracy"
    bound = "min"
    label = "neighbour-robust accuracy"

    def measure(self, board: Board, mode: str) -> float | None:
        summary = board.summaries().get("neighbour_match")
        rate = getattr(summary, "robust", None)
        return rate.rate if rate is not None and rate.total else None  # not graded on neighbours: not measured


def _policy(board: Board, field: str) -> float | None:
    summary = board.summaries().get("policy")
    return getattr(summary, field, None) if summary is not None else None


class MinPolicyRecall(Threshold):
    name = "min_policy_recall"
    bound = "min"
    label = "policy recall"

    def measure(self, board: Board, mode: str) -> float | None:
        return _policy(board, "recall")


class MinPolicyPrecision(Threshold):
    name = "min_policy_precision"
    bound = "min"
    label = "policy precision"

    def measure(self, board: Board, mode: str) -> float | None:
        return _policy(board, "precision")


class MaxP95Latency(Threshold):
    name = "max_p95_latency_ms"
    bound = "max"
    label = "p95 latency"
    unit = "ms"

    def measure(self, board: Board, mode: str) -> float | None:
        return board.latency.p95 * 1000 if _has_queries(board) else None


class MaxCostPerCase(Threshold):
    name = "max_cost_per_case"
    bound = "max"
    label = "cost per case"
    unit = "usd"

    def measure(self, board: Board, mode: str) -> float | None:
        return board.cost.per_case_usd if _has_queries(board) else None


#: Every threshold by name, in the order they are reported (one per measure).
THRESHOLDS: dict[str, Threshold] = {t.name: t for t in (
    MinExecutionSuccess(), MinAccuracy(), MinLenientAccuracy(), MinNeighbourAccuracy(), MinPolicyRecall(),
    MinPolicyPrecision(),
    MaxP95Latency(), MaxCostPerCase(),
)}


class ThresholdCheck(StrictModel):
    """One threshold on one board: its limit, what the board measured (None: not measured)."""

    config: str
    name: str
    limit: float
    measured: float | None = None
    missed: bool = False

    def line(self) -> str:
        t = THRESHOLDS[self.name]
        sign = ">=" if t.bound == "min" else "<="
        if self.measured is None:
            return f"{self.name} {sign} {t.show(self.limit)} [{self.config}]: not measured in this run"
        verdict = "MISSED" if self.missed else "met"
        return f"{self.name} {sign} {t.show(self.limit)} [{self.config}]: {verdict}, measured {t.show(self.measured)}"


class ThresholdResult(StrictModel):
    checks: list[ThresholdCheck] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.misses

    @property
    def misses(self) -> list[ThresholdCheck]:
        return [c for c in self.checks if c.missed]

    @property
    def unmeasured(self) -> list[ThresholdCheck]:
        return [c for c in self.checks if c.measured is None]


def merge_thresholds(settings: ThresholdSettings, overrides: Mapping[str, float | None]) -> ThresholdSettings:
    """``settings`` (evals.yaml's) with the thresholds given on the command line on top."""
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - set(THRESHOLDS))
    if unknown:
        raise ValueError(f"unknown threshold(s) {unknown}; known: {list(THRESHOLDS)}")
    return ThresholdSettings.model_validate({**settings.model_dump(), **given})


def check_thresholds(report: EvalReport, settings: ThresholdSettings) -> ThresholdResult:
    """Every threshold that is on, on every board of ``report``."""
    limits = settings.set()
    checks: list[ThresholdCheck] = []
    for config, board in report.configs.items():
        for name, threshold in THRESHOLDS.items():
            if name not in limits:
                continue
            value = threshold.measure(board, report.mode)
            missed = value is not None and threshold.missed(value, limits[name])
            checks.append(ThresholdCheck(config=config, name=name, limit=limits[name], measured=value, missed=missed))
    return ThresholdResult(checks=checks)
