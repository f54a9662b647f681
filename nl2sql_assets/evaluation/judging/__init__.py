"""Judging: how case runs are judged. The result comparison (strict and lenient), the
faithfulness check of a written answer, the scorers that apply them to a case run and sum their
verdicts up, and the statistics those sums and the reports use (Wilson intervals, McNemar's
exact test, pass^k)."""

from nl2sql_assets.evaluation.judging.comparison import (
    COMPARATOR_VERSION,
    Comparison,
    comparator_settings,
    compare_results,
    compare_results_lenient,
    explain_lenient,
    explain_strict,
    rows_from_dicts,
)
from nl2sql_assets.evaluation.judging.faithfulness import check_faithfulness
from nl2sql_assets.evaluation.judging.scorers import (
    BUILTIN_SCORERS,
    CaseRun,
    NoConfig,
    Score,
    Scored,
    Scorer,
    ScorerSummary,
    TurnRun,
    Verdict,
    case_status,
    score_run,
)
from nl2sql_assets.evaluation.judging.stats import Rate

__all__ = [
    "BUILTIN_SCORERS",
    "COMPARATOR_VERSION",
    "CaseRun",
    "Comparison",
    "NoConfig",
    "Rate",
    "Score",
    "Scored",
    "Scorer",
    "ScorerSummary",
    "TurnRun",
    "Verdict",
    "case_status",
    "check_faithfulness",
    "comparator_settings",
    "compare_results",
    "compare_results_lenient",
    "explain_lenient",
    "explain_strict",
    "rows_from_dicts",
    "score_run",
]
