"""Scorers: the interface, the five built-ins and the registry that finds plugins.

Each scorer answers one question about one case run; a case passes when every scorer
that applies to it passes.
"""

from __future__ import annotations

from nl2sql_assets.evaluation.judging.scorers.base import INTERFACE_VERSION, CaseRun, NoConfig, Score, Scorer
from nl2sql_assets.evaluation.judging.scorers.faithfulness import Faithfulness
from nl2sql_assets.evaluation.judging.scorers.outcome import Outcome
from nl2sql_assets.evaluation.judging.scorers.result_match import ResultMatch
from nl2sql_assets.evaluation.judging.scorers.retrieval_recall import RetrievalRecall
from nl2sql_assets.evaluation.judging.scorers.routing import Routing, RoutingConfig

#: The built-ins, in the order the report lists them.
BUILTIN_SCORERS: dict[str, type] = {
    "result_match": ResultMatch,
    "outcome": Outcome,
    "faithfulness": Faithfulness,
    "retrieval_recall": RetrievalRecall,
    "routing": Routing,
}

from nl2sql_assets.evaluation.judging.scorers.registry import (  # noqa: E402  (needs BUILTIN_SCORERS defined)
    ENTRY_POINT_GROUP,
    ScorerError,
    ScorerRegistry,
    safe_score,
    score_run,
)
from nl2sql_assets.evaluation.judging.scorers.verdict import EXECUTION_SCORERS, case_status  # noqa: E402

__all__ = [
    "BUILTIN_SCORERS",
    "ENTRY_POINT_GROUP",
    "EXECUTION_SCORERS",
    "INTERFACE_VERSION",
    "CaseRun",
    "Faithfulness",
    "NoConfig",
    "Outcome",
    "ResultMatch",
    "RetrievalRecall",
    "Routing",
    "RoutingConfig",
    "Score",
    "Scorer",
    "ScorerError",
    "ScorerRegistry",
    "case_status",
    "safe_score",
    "score_run",
]
