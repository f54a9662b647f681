"""``check_sql``: may this role run this exact SQL? The one access decision on the final text.

Every path that runs SQL under a role (generated plans, curated answers, seed drafts) calls
it right before execution; a refusal means nothing runs and the caller answers with the
generic refusal. The plan validator still runs first on plans, for clear plan errors; where
the two disagree, this check wins because it judges what the database will actually read.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.config import DatasourceAccess
from nl2sql_assets.datasources.engines import engine_for_dialect
from nl2sql_assets.datasources.guard import allowed_function_names
from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.policy.facts import DatabaseWord, analyse
from nl2sql_assets.policy.rules import RULES, PolicyContext, PolicyRule

GENERIC_REFUSAL = "You are not allowed to see the data this question needs."

POLICY_CHECK_VERSION = 1
"""Bumped whenever a rule of the final-SQL check changes what it allows or refuses: reports and
records carry it, and the gate compares no two runs checked by different versions."""


class PolicyDecision(BaseModel):
    """The verdict on one statement for one role.

    ``rule`` names the rule that refused (None when allowed); ``detail`` says why, naming
    tables, so it is for logs and policy probes, never for the person who asked. ``message``
    is what that person may see: ``GENERIC_REFUSAL``, or None when allowed. ``fault`` says whose
    fault a refusal is: ``policy`` (access) or ``sql`` (the statement is wrong and cannot run).
    """

    model_config = ConfigDict(extra="forbid")

    allowed: bool
    rule: str | None = None
    fault: Literal["policy", "sql"] | None = None
    message: str | None = None
    detail: str | None = None
    denied: list[str] = Field(default_factory=list)
    tables: list[str] = Field(default_factory=list)
    columns: list[str] = Field(default_factory=list)  # "Table.Column", as the schema spells them

    def refusal(self, names_tables: bool = False) -> str:
        """The message to answer with: generic, or naming what was refused when asked to."""
        if names_tables and self.denied:
            return f"{GENERIC_REFUSAL} (restricted: {', '.join(self.denied)})"
        return GENERIC_REFUSAL


def check_sql(
    sql: str,
    *,
    dialect: str,
    schema: SchemaSnapshot,
    access: DatasourceAccess | None,
    role: str,
    dangerous_functions: Collection[str] | None = None,
    rules: Sequence[PolicyRule] = RULES,
    database: DatabaseWord | None = None,
) -> PolicyDecision:
    """Judge ``sql`` (the exact text the executor will run) for ``role``, whose policy for the
    datasource is ``access`` (None: the project defines no roles, so only the rules that hold
    for everyone apply). ``dangerous_functions`` are the functions no role may call (None: the
    built-in list for the dialect; a project passes ``policies.dangerous_for(dialect)``).
    ``database`` is a server's own word on the statement (its adapter's ``statement_reads``):
    every read it reports must be among the facts, else the check fails closed. Never raises for
    bad SQL: unreadable text is refused."""
    facts = analyse(sql, dialect, schema, database)
    engine = engine_for_dialect(dialect)
    if dangerous_functions is None:
        dangerous_functions = engine.dangerous_functions if engine is not None else ()
    ctx = PolicyContext(dialect=dialect, schema=schema, access=access, role=role,
                        dangerous_functions=frozenset(f.lower() for f in dangerous_functions),
                        allowed_functions=allowed_function_names(engine) if engine is not None else None)
    read = {"tables": sorted(facts.tables), "columns": facts.column_names}
    for rule in rules:
        finding = rule.check(facts, ctx)
        if finding is not None:
            return PolicyDecision(allowed=False, rule=rule.name, fault=finding.fault, message=GENERIC_REFUSAL,
                                  detail=finding.detail, denied=list(finding.denied), **read)
    return PolicyDecision(allowed=True, **read)
