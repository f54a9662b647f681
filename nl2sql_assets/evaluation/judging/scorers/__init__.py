"""Scorers: the interface and the six built-ins (the registry that finds plugins is running.scorers).

Each scorer answers one question about one case run; a case passes when every scorer
that applies to it passes.
"""

from __future__ import annotations

from typing import Any

from nl2sql_assets.evaluation.judging.scorers.base import (
    INTERFACE_VERSION,
    CaseRun,
    NoConfig,
    Score,
    Scored,
    Scorer,
    ScorerSummary,
    Summarizes,
    TurnRun,
    safe_score,
    score_run,
)
from nl2sql_assets.evaluation.judging.scorers.faithfulness import Faithfulness, FaithfulnessSummary
from nl2sql_assets.evaluation.judging.scorers.outcome import Outcome
from nl2sql_assets.evaluation.judging.scorers.policy import Policy, PolicyDetail, PolicySummary
from nl2sql_assets.evaluation.judging.scorers.result_match import ResultMatch
from nl2sql_assets.evaluation.judging.scorers.retrieval_recall import RetrievalRecall, RetrievalSummary
from nl2sql_assets.evaluation.judging.scorers.routing import Routing, RoutingConfig, RoutingSummary
from nl2sql_assets.evaluation.judging.scorers.verdict import (
    EXECUTION_SCORERS,
    Verdict,
    case_status,
    execution_lenient_status,
)

#: The built-ins, in the order the report lists them.
BUILTIN_SCORERS: dict[str, type] = {
    "result_match": ResultMatch,
    "policy": Policy,
    "outcome": Outcome,
    "faithfulness": Faithfulness,
    "retrieval_recall": RetrievalRecall,
    "routing": Routing,
}

#: Boards and records written before scorers owned their summaries kept these three under their
#: own names (that key -> the scorer whose summary it is); reading one moves them under the scorer.
LEGACY_SUMMARY_KEYS: dict[str, str] = {"retrieval": "retrieval_recall", "routing": "routing",
                                       "faithfulness": "faithfulness"}


def pop_legacy_summaries(data: dict[str, Any]) -> dict[str, Any]:
    """Take those three out of ``data`` (a board's or a record's metrics, as JSON), by scorer."""
    return {scorer: summary for key, scorer in LEGACY_SUMMARY_KEYS.items()
            if (summary := data.pop(key, None)) is not None}


__all__ = [
    "BUILTIN_SCORERS",
    "EXECUTION_SCORERS",
    "INTERFACE_VERSION",
    "LEGACY_SUMMARY_KEYS",
    "CaseRun",
    "Faithfulness",
    "FaithfulnessSummary",
    "NoConfig",
    "Outcome",
    "Policy",
    "PolicyDetail",
    "PolicySummary",
    "ResultMatch",
    "RetrievalRecall",
    "RetrievalSummary",
    "Routing",
    "RoutingConfig",
    "RoutingSummary",
    "Score",
    "Scored",
    "Scorer",
    "ScorerSummary",
    "Summarizes",
    "TurnRun",
    "Verdict",
    "case_status",
    "execution_lenient_status",
    "pop_legacy_summaries",
    "safe_score",
    "score_run",
]
