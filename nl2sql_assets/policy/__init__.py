"""Access policy on the final SQL: what a statement reads, resolved by the database's own
scoping rules, judged by a registry of small rules (no dagster, no engine imports)."""

from nl2sql_assets.policy.check import GENERIC_REFUSAL, POLICY_CHECK_VERSION, PolicyDecision, check_sql
from nl2sql_assets.policy.facts import QueryFacts, TableRef, analyse
from nl2sql_assets.policy.rules import RULE_NAMES, RULES, Finding, PolicyContext, PolicyRule

__all__ = [
    "GENERIC_REFUSAL",
    "POLICY_CHECK_VERSION",
    "RULES",
    "RULE_NAMES",
    "Finding",
    "PolicyContext",
    "PolicyDecision",
    "PolicyRule",
    "QueryFacts",
    "TableRef",
    "analyse",
    "check_sql",
]
