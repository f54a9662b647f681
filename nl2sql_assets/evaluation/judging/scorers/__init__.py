"""Scorers: the interface and the five built-ins (the registry that finds plugins is running.scorers).

Each scorer answers one question about one case run; a case passes when every scorer
that applies to it passes.
"""

from __future__ import annotations

from nl2sql_assets.evaluation.judging.scorers.base import (
    INTERFACE_VERSION,
    CaseRun,
    NoConfig,
    Score,
    Scorer,
    safe_score,
    score_run,
)
from nl2sql_assets.evaluation.judging.scorers.faithfulness import Faithfulness
from nl2sql_assets.evaluation.judging.scorers.outcome import Outcome
from nl2sql_assets.evaluation.judging.scorers.result_match import ResultMatch
from nl2sql_assets.evaluation.judging.scorers.retrieval_recall import RetrievalRecall
from nl2sql_assets.evaluation.judging.scorers.routing import Routing, RoutingConfig
from nl2sql_assets.evaluation.judging.scorers.verdict import EXECUTION_SCORERS, Verdict, case_status

#: The built-ins, in the order the report lists them.
BUILTIN_SCORERS: dict[str, type] = {
    "result_match": ResultMatch,
    "outcome": Outcome,
    "faithfulness": Faithfulness,
    "retrieval_recall": RetrievalRecall,
    "routing": Routing,
}


__all__ = [
    "BUILTIN_SCORERS",
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
    "Verdict",
    "case_status",
    "safe_score",
    "score_run",
]
