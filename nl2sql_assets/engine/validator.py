"""The logical validator: does a plan name real tables and columns, and may this role read them?

It runs before any SQL exists, on the PlanModel itself, so a bad plan costs no query and a
refused one touches no data. One pass resolves every table and column the plan reads
(sub-plans included, with correlated references to enclosing plans); then the outcome is
decided, security first:

1. **RBAC** (``SECURITY_VIOLATION``): a table or column the role may not read, anywhere in the
   plan. This wins over every naming error, so a plan that touches a denied table is refused
   even when it also misspells something, and the refiner never gets a message about the
   insides of a table the role may not see. The message is ``GENERIC_REFUSAL``, which names
   no table; only with ``refusal_names_tables=True`` does it list what was refused.
2. **Names and shape** (``VALIDATION_ERROR``): unknown tables, aliases and columns, ambiguous
   unqualified columns, misplaced select aliases, ``*`` outside ``count(*)``, aggregates where
   SQL forbids them, wrong argument counts. These messages name the faulty names: they go to
   the refiner, never to the user.
3. **Row budget** (a soft rule, never an error): when ``row_budget`` is set and the plan may
   return more rows than that (no LIMIT, or a larger one, and not a single-row aggregate),
   ``limit_applied`` tells the executor to fetch at most ``row_budget`` rows.

Name resolution follows SQL: a qualified column names a table alias (or the table's name when
it has no alias) of its own plan or of an enclosing one, the nearest first; an unqualified
column belongs to the nearest plan that has it and must be in exactly one table there; a
select alias may stand for its expression in ORDER BY, GROUP BY and HAVING of its own plan.
A bare ORDER BY key (``order_by: [{expr: column}]``) that names a select alias is the alias;
inside an ORDER BY expression SQLite and DuckDB read a same-named column of the plan's tables
instead, so the column it is. Where a select alias and a column share a name, the policy
counts both readings, so an alias can never hide a read of a denied column.

The final-SQL policy check (``nl2sql_assets.policy``) judges the SQL that really runs and has
the last word; this validator exists to give the refiner clear messages about plans.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.config import DatasourceAccess
from nl2sql_assets.datasources.schema import SchemaSnapshot, TableInfo
from nl2sql_assets.engine.plan import (
    AGGREGATES,
    BetweenExpr,
    BinaryExpr,
    CaseExpr,
    CastExpr,
    ColumnExpr,
    DatePartExpr,
    ExistsExpr,
    FunctionExpr,
    InListExpr,
    InSubqueryExpr,
    LiteralExpr,
    PlanModel,
    ScalarSubqueryExpr,
    SelectItem,
    StarExpr,
    UnaryExpr,
)
from nl2sql_assets.engine.result import SECURITY_VIOLATION, VALIDATION_ERROR
from nl2sql_assets.policy.check import GENERIC_REFUSAL  # one refusal message for both checks

# (fewest, most) arguments; None = no upper bound.
_ARITY: dict[str, tuple[int, int | None]] = {
    "count": (1, 1),
    "sum": (1, 1),
    "avg": (1, 1),
    "min": (1, 1),
    "max": (1, 1),
    "group_concat": (1, 2),
    "lower": (1, 1),
    "upper": (1, 1),
    "length": (1, 1),
    "abs": (1, 1),
    "round": (1, 2),
    "coalesce": (2, None),
    "substr": (2, 3),
    "trim": (1, 2),
    "nullif": (2, 2),
    "ifnull": (2, 2),
    "replace": (3, 3),
}
_ALIAS_CLAUSES = frozenset({"ORDER BY", "GROUP BY", "HAVING"})
_NO_AGGREGATE_CLAUSES = frozenset({"WHERE", "GROUP BY", "ON"})


class ValidationOutcome(BaseModel):
    """What the validator decided, and what the plan reads (names as the schema spells them)."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    error_code: str | None = None
    message: str | None = None
    tables: list[str] = Field(default_factory=list)
    columns: list[str] = Field(default_factory=list)  # "Table.Column"
    denied_tables: list[str] = Field(default_factory=list)
    denied_columns: list[str] = Field(default_factory=list)  # "Table.Column"
    limit_applied: int | None = None


@dataclass
class _Scope:
    """The tables one plan has brought into scope so far, and its select aliases."""

    parent: _Scope | None
    # lower-cased table ref -> its table (None when the schema has no such table)
    refs: dict[str, TableInfo | None] = field(default_factory=dict)
    # lower-cased select alias -> its select item
    aliases: dict[str, SelectItem] = field(default_factory=dict)
    # the refs as the plan writes them, for messages
    shown: list[str] = field(default_factory=list)


class _Resolver:
    """Walks a plan once, collecting what it reads and every naming or shape error."""

    def __init__(self, schema: SchemaSnapshot) -> None:
        self.schema = schema
        self.errors: list[str] = []
        self.tables: set[str] = set()
        self.columns: set[tuple[str, str]] = set()

    def error(self, message: str) -> None:
        if message not in self.errors:
            self.errors.append(message)

    # ------------------------------------------------------------ plans

    def plan(self, plan: PlanModel, parent: _Scope | None) -> None:
        scope = _Scope(parent)
        self.add_table(scope, plan.from_.name, plan.from_.ref)
        for join in plan.joins:
            self.add_table(scope, join.table.name, join.table.ref)
            # ON sees the tables joined so far (and enclosing plans), as both engines require.
            self.expr(join.on, scope, "ON")
        for item in plan.select:
            if item.alias:
                scope.aliases.setdefault(item.alias.lower(), item)
        for item in plan.select:
            self.expr(item.expr, scope, "SELECT")
        if plan.where is not None:
            self.expr(plan.where, scope, "WHERE")
        for e in plan.group_by:
            self.expr(e, scope, "GROUP BY")
        if plan.having is not None:
            self.expr(plan.having, scope, "HAVING")
        for o in plan.order_by:
            if isinstance(o.expr, ColumnExpr):
                self.column(o.expr, scope, "ORDER BY", bare=True)
            else:
                self.expr(o.expr, scope, "ORDER BY")

    def add_table(self, scope: _Scope, name: str, ref: str) -> None:
        info = self.schema.table(name)
        if info is None:
            self.error(f"unknown table {name!r}")
        else:
            self.tables.add(info.name)
        scope.refs[ref.lower()] = info
        scope.shown.append(ref)

    # ------------------------------------------------------------ expressions

    def expr(self, node: object, scope: _Scope, clause: str, in_aggregate: bool = False) -> None:
        if isinstance(node, LiteralExpr):
            return
        if isinstance(node, ColumnExpr):
            self.column(node, scope, clause)
        elif isinstance(node, FunctionExpr):
            self.function(node, scope, clause, in_aggregate)
        elif isinstance(node, BinaryExpr):
            self.expr(node.left, scope, clause, in_aggregate)
            self.expr(node.right, scope, clause, in_aggregate)
        elif isinstance(node, UnaryExpr | CastExpr | DatePartExpr):
            self.expr(node.arg, scope, clause, in_aggregate)
        elif isinstance(node, InListExpr):
            self.expr(node.arg, scope, clause, in_aggregate)
            for v in node.values:
                self.expr(v, scope, clause, in_aggregate)
        elif isinstance(node, BetweenExpr):
            for part in (node.arg, node.low, node.high):
                self.expr(part, scope, clause, in_aggregate)
        elif isinstance(node, CaseExpr):
            for w in node.whens:
                self.expr(w.when, scope, clause, in_aggregate)
                self.expr(w.then, scope, clause, in_aggregate)
            if node.else_ is not None:
                self.expr(node.else_, scope, clause, in_aggregate)
        elif isinstance(node, ExistsExpr | ScalarSubqueryExpr):
            self.plan(node.plan, scope)
        elif isinstance(node, InSubqueryExpr):
            self.expr(node.arg, scope, clause, in_aggregate)
            self.plan(node.plan, scope)
        elif isinstance(node, StarExpr):
            self.error(f"'*' is allowed only as count(*) (found in {clause})")
        else:  # pragma: no cover - PlanModel admits no other node
            self.error(f"unsupported expression {type(node).__name__} in {clause}")

    def function(self, node: FunctionExpr, scope: _Scope, clause: str, in_aggregate: bool) -> None:
        low, high = _ARITY[node.name]
        n = len(node.args)
        if n < low or (high is not None and n > high):
            want = f"{low}" if low == high else (f"at least {low}" if high is None else f"{low} to {high}")
            self.error(f"{node.name}() takes {want} argument(s), got {n}")
        is_aggregate = node.name in AGGREGATES
        if is_aggregate:
            if in_aggregate:
                self.error(f"aggregate {node.name}() inside another aggregate")
            if clause in _NO_AGGREGATE_CLAUSES:
                self.error(f"aggregate {node.name}() is not allowed in {clause}")
            if node.distinct and n != 1:
                self.error(f"{node.name}(DISTINCT ...) takes exactly one argument")
        if node.name == "count" and n == 1 and isinstance(node.args[0], StarExpr):
            return  # count(*) reads the table, no column
        for arg in node.args:
            self.expr(arg, scope, clause, in_aggregate or is_aggregate)

    def column(self, node: ColumnExpr, scope: _Scope, clause: str, bare: bool = False) -> None:
        if node.table is not None:
            self.qualified(node.table, node.name, scope)
            return
        name = node.name
        alias_item = scope.aliases.get(name.lower()) if clause in _ALIAS_CLAUSES else None
        level, matches, unknown = self.unqualified(name, scope)
        if alias_item is not None:
            if bare:
                return  # a bare ORDER BY key: SQL reads the select alias
            if level is not scope:
                # The alias, which hides enclosing plans' columns; a same-named column of an
                # enclosing plan still counts as read, in case an engine reads it instead.
                self.columns.update(matches)
                return
            if len(matches) == 1 and self.same_column(alias_item, matches[0], scope):
                self.columns.add(matches[0])
                return
            if clause != "ORDER BY":
                # GROUP BY and HAVING: SQLite and DuckDB do not agree on which one they read.
                self.columns.update(matches)
                self.error(
                    f"{name!r} in {clause} is both a select alias and a column; qualify the column or rename the alias"
                )
                return
            # Inside an ORDER BY expression both engines read the column: resolve it as one.
        if len(matches) == 1:
            self.columns.add(matches[0])
        elif len(matches) > 1:
            owners = " and ".join(t for t, _ in matches)
            self.error(f"column {name!r} is ambiguous (in {owners}); qualify it with a table alias")
        elif not unknown:
            hint = ""
            if name.lower() in scope.aliases:
                hint = " (select aliases may be used only in ORDER BY, GROUP BY and HAVING)"
            self.error(f"unknown column {name!r} in {clause}{hint}")

    def qualified(self, ref: str, name: str, scope: _Scope) -> tuple[str, str] | None:
        s: _Scope | None = scope
        while s is not None:
            if ref.lower() in s.refs:
                info = s.refs[ref.lower()]
                if info is None:
                    return None  # its table is unknown: already reported
                col = info.column(name)
                if col is None:
                    self.error(f"table {info.name} (as {ref!r}) has no column {name!r}")
                    return None
                self.columns.add((info.name, col.name))
                return info.name, col.name
            s = s.parent
        visible = sorted({r for s2 in _chain(scope) for r in s2.shown})
        self.error(f"unknown table or alias {ref!r} in column {ref}.{name}; in scope: {', '.join(visible)}")
        return None

    def unqualified(self, name: str, scope: _Scope) -> tuple[_Scope | None, list[tuple[str, str]], bool]:
        """The nearest plan whose tables hold ``name``, the (table, column) matches there, and
        whether an unknown table was in the way (then a miss is not worth reporting)."""
        unknown = False
        for s in _chain(scope):
            matches = []
            for info in s.refs.values():
                if info is None:
                    unknown = True
                    continue
                col = info.column(name)
                if col is not None:
                    matches.append((info.name, col.name))
            if matches:
                return s, matches, unknown
        return None, [], unknown

    def same_column(self, item: SelectItem, match: tuple[str, str], scope: _Scope) -> bool:
        """Whether a select alias stands for exactly the column ``match`` (so either reading agrees)."""
        e = item.expr
        if not isinstance(e, ColumnExpr):
            return False
        if e.table is None:
            level, matches, _ = self.unqualified(e.name, scope)
            return level is scope and matches == [match]
        info = scope.refs.get(e.table.lower())
        col = info.column(e.name) if info is not None else None
        return info is not None and col is not None and (info.name, col.name) == match


def _chain(scope: _Scope) -> list[_Scope]:
    out = []
    s: _Scope | None = scope
    while s is not None:
        out.append(s)
        s = s.parent
    return out


def _resolve(plan: PlanModel, schema: SchemaSnapshot) -> _Resolver:
    resolver = _Resolver(schema)
    resolver.plan(plan, None)
    return resolver


# ---------------------------------------------------------------- public helpers


def tables_read(plan: PlanModel, schema: SchemaSnapshot | None = None) -> set[str]:
    """Every table the plan reads, sub-plans included. Names as the plan writes them; with a
    ``schema``, as the schema spells them (unknown ones stay as written)."""
    names: set[str] = set()

    def visit(p: PlanModel) -> None:
        for ref in p.tables:
            info = schema.table(ref.name) if schema is not None else None
            names.add(info.name if info is not None else ref.name)
        for sub in _sub_plans(p):
            visit(sub)

    visit(plan)
    return names


def columns_read(plan: PlanModel, schema: SchemaSnapshot) -> set[str]:
    """Every ``Table.Column`` the plan reads (as the schema spells them). A plan that does not
    resolve against ``schema`` raises ValueError listing what is wrong."""
    resolver = _resolve(plan, schema)
    if resolver.errors:
        raise ValueError("; ".join(resolver.errors))
    return {f"{t}.{c}" for t, c in resolver.columns}


def _sub_plans(plan: PlanModel) -> list[PlanModel]:
    found: list[PlanModel] = []

    def walk(node: object) -> None:
        if isinstance(node, ExistsExpr | ScalarSubqueryExpr):
            found.append(node.plan)
        elif isinstance(node, InSubqueryExpr):
            walk(node.arg)
            found.append(node.plan)
        elif isinstance(node, FunctionExpr):
            for a in node.args:
                walk(a)
        elif isinstance(node, BinaryExpr):
            walk(node.left)
            walk(node.right)
        elif isinstance(node, UnaryExpr | CastExpr | DatePartExpr):
            walk(node.arg)
        elif isinstance(node, InListExpr):
            walk(node.arg)
            for v in node.values:
                walk(v)
        elif isinstance(node, BetweenExpr):
            walk(node.arg)
            walk(node.low)
            walk(node.high)
        elif isinstance(node, CaseExpr):
            for w in node.whens:
                walk(w.when)
                walk(w.then)
            walk(node.else_)

    for join in plan.joins:
        walk(join.on)
    for item in plan.select:
        walk(item.expr)
    walk(plan.where)
    for e in plan.group_by:
        walk(e)
    walk(plan.having)
    for o in plan.order_by:
        walk(o.expr)
    return found


def _has_aggregate(node: object) -> bool:
    """An aggregate call in this expression, not counting sub-plans."""
    if isinstance(node, FunctionExpr):
        return node.name in AGGREGATES or any(_has_aggregate(a) for a in node.args)
    if isinstance(node, BinaryExpr):
        return _has_aggregate(node.left) or _has_aggregate(node.right)
    if isinstance(node, UnaryExpr | CastExpr | DatePartExpr):
        return _has_aggregate(node.arg)
    if isinstance(node, InListExpr):
        return _has_aggregate(node.arg) or any(_has_aggregate(v) for v in node.values)
    if isinstance(node, BetweenExpr):
        return any(_has_aggregate(p) for p in (node.arg, node.low, node.high))
    if isinstance(node, CaseExpr):
        parts = [p for w in node.whens for p in (w.when, w.then)] + [node.else_]
        return any(_has_aggregate(p) for p in parts)
    if isinstance(node, InSubqueryExpr):
        return _has_aggregate(node.arg)
    return False


def _single_row(plan: PlanModel) -> bool:
    """An aggregate without GROUP BY returns at most one row, whatever its LIMIT."""
    return not plan.group_by and any(_has_aggregate(item.expr) for item in plan.select)


# ---------------------------------------------------------------- the check


def validate_plan(
    plan: PlanModel,
    schema: SchemaSnapshot,
    role_access: DatasourceAccess | None,
    *,
    role: str,
    refusal_names_tables: bool = False,
    row_budget: int | None = None,
) -> ValidationOutcome:
    """Check ``plan`` against ``schema`` and ``role_access`` (None: no RBAC) for ``role``.

    ``role`` names who asks (for callers and their logs); the decision depends only on
    ``role_access``, the policy of that role for this datasource.
    """
    del role  # the policy is already the role's; the refusal message never names the role
    resolver = _resolve(plan, schema)
    tables = sorted(resolver.tables)
    columns = sorted(f"{t}.{c}" for t, c in resolver.columns)

    denied_tables: list[str] = []
    denied_columns: list[str] = []
    if role_access is not None:
        denied_tables = [t for t in tables if not role_access.allows_table(t)]
        denied_columns = sorted(
            f"{t}.{c}" for t, c in resolver.columns if not role_access.allows_column(t, c)
        )

    limit_applied = None
    if row_budget is not None and (plan.limit is None or plan.limit > row_budget) and not _single_row(plan):
        limit_applied = row_budget

    common = {
        "tables": tables,
        "columns": columns,
        "denied_tables": denied_tables,
        "denied_columns": denied_columns,
        "limit_applied": limit_applied,
    }
    if denied_tables or denied_columns:
        message = GENERIC_REFUSAL
        if refusal_names_tables:
            named = denied_tables + [c for c in denied_columns if c.split(".", 1)[0] not in denied_tables]
            message = f"{GENERIC_REFUSAL} (restricted: {', '.join(named)})"
        return ValidationOutcome(ok=False, error_code=SECURITY_VIOLATION, message=message, **common)
    if resolver.errors:
        return ValidationOutcome(
            ok=False, error_code=VALIDATION_ERROR, message="; ".join(resolver.errors), **common
        )
    return ValidationOutcome(ok=True, **common)
