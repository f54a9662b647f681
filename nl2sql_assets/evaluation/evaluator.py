"""The result comparison at the path the README names; its home is ``nl2sql_assets.evaluation.judging``."""

from nl2sql_assets.evaluation.judging.comparison import compare_results, compare_results_lenient

__all__ = ["compare_results", "compare_results_lenient"]
