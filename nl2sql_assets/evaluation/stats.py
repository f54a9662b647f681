"""The statistics at the path the README names; their home is ``nl2sql_assets.evaluation.judging.stats``."""

from nl2sql_assets.evaluation.judging.stats import mcnemar_exact, pass_hat_k, wilson_interval

__all__ = ["mcnemar_exact", "pass_hat_k", "wilson_interval"]
