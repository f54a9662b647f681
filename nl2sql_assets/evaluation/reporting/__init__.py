"""Reporting: boards built from case records and a run's metadata (accuracies with Wilson
intervals, pass^k, determinism, cost, latency, what each scorer contributes), their statistics,
and the regression gate's comparison of a run with a baseline."""

from nl2sql_assets.evaluation.judging.stats import Rate, percent, rate_cell
from nl2sql_assets.evaluation.reporting.gate import Baseline, ConfigComparison, GateResult, compare
from nl2sql_assets.evaluation.reporting.headline import Measure, headline, headline_metrics, headline_rows
from nl2sql_assets.evaluation.reporting.report import (
    Board,
    EvalReport,
    build_board,
    build_report,
    case_key,
    comparison_markdown,
    load_report,
    md_escape,
    save_report,
    to_markdown,
)

__all__ = [
    "Baseline",
    "Board",
    "ConfigComparison",
    "EvalReport",
    "GateResult",
    "Measure",
    "Rate",
    "build_board",
    "build_report",
    "case_key",
    "compare",
    "comparison_markdown",
    "headline",
    "headline_metrics",
    "headline_rows",
    "load_report",
    "md_escape",
    "percent",
    "rate_cell",
    "save_report",
    "to_markdown",
]
