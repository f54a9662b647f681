"""Reporting: boards built from case records and a run's metadata (accuracies with Wilson
intervals, pass^k, determinism, cost, latency, execution success, per-domain rates, coverage,
what each scorer contributes), their statistics, the regression gate's comparison of a run with a
baseline, and the threshold gates."""

from nl2sql_assets.evaluation.judging.stats import Rate, percent, rate_cell
from nl2sql_assets.evaluation.reporting.board import Board, EvalReport, load_report, save_report
from nl2sql_assets.evaluation.reporting.coverage import Coverage, DomainRates
from nl2sql_assets.evaluation.reporting.gate import Baseline, ConfigComparison, GateResult, compare
from nl2sql_assets.evaluation.reporting.headline import Measure, headline, headline_metrics, headline_rows
from nl2sql_assets.evaluation.reporting.report import (
    build_board,
    build_report,
    comparison_markdown,
    md_escape,
    to_markdown,
)
from nl2sql_assets.evaluation.reporting.tally import case_key
from nl2sql_assets.evaluation.reporting.thresholds import (
    THRESHOLDS,
    Threshold,
    ThresholdCheck,
    ThresholdResult,
    check_thresholds,
    merge_thresholds,
)

__all__ = [
    "THRESHOLDS",
    "Baseline",
    "Board",
    "ConfigComparison",
    "Coverage",
    "DomainRates",
    "EvalReport",
    "GateResult",
    "Measure",
    "Rate",
    "Threshold",
    "ThresholdCheck",
    "ThresholdResult",
    "build_board",
    "build_report",
    "case_key",
    "check_thresholds",
    "compare",
    "comparison_markdown",
    "headline",
    "headline_metrics",
    "headline_rows",
    "load_report",
    "md_escape",
    "merge_thresholds",
    "percent",
    "rate_cell",
    "save_report",
    "to_markdown",
]
