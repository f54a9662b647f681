"""Judging: how one case run is judged. The result comparison (strict and lenient), the
faithfulness check of a written answer, and the scorers that apply them to a case run."""

from nl2sql_assets.evaluation.judging.comparison import (
    COMPARATOR_VERSION,
    Comparison,
    compare_results,
    compare_results_lenient,
    explain_lenient,
    explain_strict,
    rows_from_dicts,
)
from nl2sql_assets.evaluation.judging.faithfulness import check_faithfulness

__all__ = [
    "COMPARATOR_VERSION",
    "Comparison",
    "check_faithfulness",
    "compare_results",
    "compare_results_lenient",
    "explain_lenient",
    "explain_strict",
    "rows_from_dicts",
]
