"""The policy rules: small objects, each answering one question about a statement's facts.

A rule has a ``name`` (what a refusal reports as the rule that fired) and ``checks`` (one line
saying what it checks); ``check`` returns a ``Finding`` when the statement breaks it, else
None. ``RULES`` is the ordered registry ``check_sql`` runs, first finding wins: adding a rule
is one class here and one line in ``RULES``. A policy probe (a suite case of kind ``probe``)
names the rule it expects by ``name``: read_only, system_catalog, dangerous_function,
known_sources, resolved_names, table_scope, column_scope, forbidden_join, row_budget.
known_sources and resolved_names are this check's own fail-closed rules.

A finding says whose fault the refusal is: ``policy`` (the role may not read what the statement
reads, or the check cannot establish what it reads and fails closed) or ``sql`` (the statement
itself is wrong: the database cannot prepare it against the schema, e.g. an unknown or
ambiguous name). An engine that wrote wrong SQL made a mistake; it did not leak.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

from nl2sql_assets.config import DatasourceAccess
from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.policy.facts import QueryFacts, TableRef

# Catalogs and system objects no role reads, whatever the dialect: SQLite's sqlite_* tables and
# pragma_* functions, DuckDB's duckdb_*() functions, the information_schema / pg_catalog views. Each
# engine adds its own (``DatabaseEngine.system_*``: mysql.*, performance_schema, ...).
SYSTEM_PREFIXES = ("sqlite_", "pragma_", "duckdb_", "pg_")
SYSTEM_SCHEMAS = frozenset({"information_schema", "pg_catalog", "system", "temp"})
SYSTEM_FUNCTIONS = frozenset({"current_setting", "getvariable", "which_secret"})


@dataclasses.dataclass(frozen=True)
class SystemNames:
    """What counts as the system catalog in one dialect: the shared names and its engine's own."""

    prefixes: tuple[str, ...]
    schemas: frozenset[str]
    functions: frozenset[str]

    @classmethod
    def of(cls, dialect: str) -> SystemNames:
        from nl2sql_assets.datasources.engines import engine_for_dialect

        engine = engine_for_dialect(dialect)
        if engine is None:
            return cls(SYSTEM_PREFIXES, SYSTEM_SCHEMAS, SYSTEM_FUNCTIONS)
        return cls(tuple(dict.fromkeys((*SYSTEM_PREFIXES, *engine.system_prefixes))),
                   SYSTEM_SCHEMAS | engine.system_schemas, SYSTEM_FUNCTIONS | engine.system_functions)


@dataclasses.dataclass(frozen=True)
class PolicyContext:
    """Who asks, and about what: the role's policy for the datasource (None: no RBAC), and the
    functions no role may call in this dialect."""

    dialect: str
    schema: SchemaSnapshot
    access: DatasourceAccess | None
    role: str
    dangerous_functions: frozenset[str] = frozenset()
    #: the functions the dialect's engine lets a statement call at all (None: any but the dangerous)
    allowed_functions: frozenset[str] | None = None


Fault = Literal["policy", "sql"]


@dataclasses.dataclass(frozen=True)
class Finding:
    """Why a rule refuses. ``detail`` is for logs and probes; ``denied`` lists what a refusal
    may name when the project sets ``refusal_names_tables``; ``fault`` says whose fault it is."""

    detail: str
    denied: tuple[str, ...] = ()
    fault: Fault = "policy"


class PolicyRule:
    """One question about a statement. Subclasses set ``name`` and ``checks``."""

    name: ClassVar[str]
    checks: ClassVar[str]

    def check(self, facts: QueryFacts, ctx: PolicyContext) -> Finding | None:  # pragma: no cover - abstract
        raise NotImplementedError


class ReadOnlyQuery(PolicyRule):
    name = "read_only"
    checks = "the text is exactly one read query (SELECT, WITH, set operations) sqlglot can parse in the dialect"

    def check(self, facts: QueryFacts, ctx: PolicyContext) -> Finding | None:
        if facts.parse_error is None:
            return None
        if facts.database_error is not None:  # the database cannot read it either: bad SQL
            return Finding(f"not one readable query: {facts.database_error}", fault="sql")
        return Finding(f"not one readable query: {facts.parse_error}")


def _is_system(ref: TableRef, names: SystemNames) -> bool:
    return (
        ref.name.startswith(names.prefixes)
        or ref.name in names.schemas
        or ref.db in names.schemas
        or ref.catalog in names.schemas
    )


class SystemCatalog(PolicyRule):
    name = "system_catalog"
    checks = "no system table, catalog view or catalog function (sqlite_*, pragma_*, duckdb_*, information_schema, pg_catalog)"

    def check(self, facts: QueryFacts, ctx: PolicyContext) -> Finding | None:
        names = SystemNames.of(ctx.dialect)
        tables = sorted({r.name for r in facts.table_refs if _is_system(r, names)})
        functions = sorted(f for f in facts.functions if f.startswith(names.prefixes) or f in names.functions)
        named = tables + [f"{f}()" for f in functions if f not in tables]
        if not named:
            return None
        return Finding(f"reads the system catalog: {', '.join(named)}", denied=tuple(named))


class DangerousFunction(PolicyRule):
    name = "dangerous_function"
    checks = ("no function the policy lists for the dialect (file, network or native-code access), and on a "
              "server only the functions a data question needs, for any role")

    def check(self, facts: QueryFacts, ctx: PolicyContext) -> Finding | None:
        allowed = ctx.allowed_functions
        called = sorted(f for f in facts.functions
                        if f in ctx.dangerous_functions or (allowed is not None and f not in allowed))
        if not called:
            return None
        named = tuple(f"{f}()" for f in called)
        return Finding(f"calls a function no role may call: {', '.join(named)}", denied=named)


class KnownSources(PolicyRule):
    name = "known_sources"
    checks = "every FROM/JOIN source is a table of the datasource's schema, a CTE or a sub-query (no table functions)"

    def check(self, facts: QueryFacts, ctx: PolicyContext) -> Finding | None:
        outside, missing = [], []
        for ref in facts.table_refs:
            if ref.function:
                outside.append(f"{ref.name}()")
            elif ref.catalog or ref.db not in ctx.schema.own_schemas:
                outside.append(".".join(p for p in (ref.catalog, ref.db, ref.name) if p))
            elif ctx.schema.table(ref.name) is None:
                missing.append(ref.name)
        if outside:
            named = tuple(sorted(set(outside + missing)))
            return Finding(f"reads sources outside the datasource's schema: {', '.join(named)}", denied=named)
        if missing:  # a plain table name the schema does not have: the SQL is wrong
            named = tuple(sorted(set(missing)))
            message = facts.database_error or f"no such table: {', '.join(named)}"
            return Finding(f"reads tables the datasource does not have: {message}", denied=named, fault="sql")
        return None


class ResolvedNames(PolicyRule):
    name = "resolved_names"
    checks = "every column resolves to one table column, CTE output or select alias (fail closed)"

    def check(self, facts: QueryFacts, ctx: PolicyContext) -> Finding | None:
        if facts.database_error is not None:  # the database's own word: the SQL is wrong
            return Finding(f"the database cannot prepare the statement: {facts.database_error}", fault="sql")
        if not facts.unresolved:
            return None
        return Finding("names that do not resolve: " + "; ".join(facts.unresolved))


class TableScope(PolicyRule):
    name = "table_scope"
    checks = "the role may read every table the statement reads"

    def check(self, facts: QueryFacts, ctx: PolicyContext) -> Finding | None:
        if ctx.access is None:
            return None
        denied = sorted(t for t in facts.tables if not ctx.access.allows_table(t))
        if not denied:
            return None
        return Finding(f"role {ctx.role!r} may not read table(s) {', '.join(denied)}", denied=tuple(denied))


class ColumnScope(PolicyRule):
    name = "column_scope"
    checks = "the role may read every Table.Column the statement reads, in every clause and scope"

    def check(self, facts: QueryFacts, ctx: PolicyContext) -> Finding | None:
        if ctx.access is None:
            return None
        denied = sorted(f"{t}.{c}" for t, c in facts.columns if not ctx.access.allows_column(t, c))
        if not denied:
            return None
        return Finding(f"role {ctx.role!r} may not read column(s) {', '.join(denied)}", denied=tuple(denied))


class ForbiddenJoin(PolicyRule):
    name = "forbidden_join"
    checks = "no SELECT brings together in its FROM and JOINs a group of tables the role's policy keeps apart"

    def check(self, facts: QueryFacts, ctx: PolicyContext) -> Finding | None:
        if ctx.access is None or not ctx.access.forbidden_joins:
            return None
        for joined in facts.joins:
            group = ctx.access.forbids_join(joined)
            if group is not None:
                return Finding(f"role {ctx.role!r} may not join {' with '.join(group)} in one query",
                               denied=tuple(group))
        return None


class RowBudget(PolicyRule):
    name = "row_budget"
    checks = "the outermost LIMIT asks for no more rows than the role's budget (no LIMIT: the executor caps)"

    def check(self, facts: QueryFacts, ctx: PolicyContext) -> Finding | None:
        budget = ctx.access.row_budget if ctx.access is not None else None
        if budget is None:
            return None
        if facts.limit_unbounded is not None:
            return Finding(f"the row budget of role {ctx.role!r} is {budget} rows; {facts.limit_unbounded}")
        if facts.limit is not None and facts.limit > budget:
            return Finding(f"LIMIT {facts.limit} is above the row budget of role {ctx.role!r} ({budget} rows)")
        return None


#: The rules ``check_sql`` runs, in order; the first that finds something decides.
RULES: tuple[PolicyRule, ...] = (
    ReadOnlyQuery(),
    SystemCatalog(),
    DangerousFunction(),
    KnownSources(),
    ResolvedNames(),
    TableScope(),
    ColumnScope(),
    ForbiddenJoin(),
    RowBudget(),
)

#: Every rule's name, in the order they run (what a policy probe may expect).
RULE_NAMES: tuple[str, ...] = tuple(rule.name for rule in RULES)
