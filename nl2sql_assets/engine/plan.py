"""PlanModel: the typed, dialect-neutral query AST the planner emits.

A plan is data, never SQL text: the validator checks every table and column it names
against the schema and the role's policy, and the generator renders it per dialect with
sqlglot. Every model is strict, and each expression carries a ``kind`` tag so the JSON
schema given to a model is a plain discriminated union.

What a plan can express: SELECT [DISTINCT] over one table with inner and left joins,
WHERE, GROUP BY, HAVING, ORDER BY (asc/desc), LIMIT and OFFSET; expressions are literals
(null included), columns, allow-listed functions (aggregates with DISTINCT, ``count(*)``),
arithmetic, comparison and boolean operators, LIKE, IN lists, BETWEEN, IS [NOT] NULL,
CASE, CAST to a few portable types, dialect-neutral date parts, and sub-plans:
``exists`` / ``not exists`` (correlated, for anti-joins and per-group maxima), ``in``
over a sub-plan, and a scalar sub-plan (``(SELECT MAX(...) ...)``).

What it cannot express: window functions, CTEs, UNION/INTERSECT/EXCEPT, derived tables
in FROM, right/full/cross joins, and free-form SQL. Answers that need them are written
with the constructs above (an anti-join via ``not exists`` instead of a ranking window).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

AGGREGATES = frozenset({"count", "sum", "avg", "min", "max", "group_concat"})
SCALAR_FUNCTIONS = frozenset(
    {"lower", "upper", "length", "abs", "round", "coalesce", "substr", "trim", "nullif", "ifnull", "replace"}
)

FunctionName = Literal[
    "count", "sum", "avg", "min", "max", "group_concat",
    "lower", "upper", "length", "abs", "round", "coalesce", "substr", "trim", "nullif", "ifnull", "replace",
]  # fmt: skip
BinaryOp = Literal[
    "=", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "and", "or", "like", "not_like", "||",
]  # fmt: skip
UnaryOp = Literal["not", "neg", "is_null", "is_not_null"]
DatePartName = Literal["year", "month", "day", "year_month", "date"]
CastType = Literal["integer", "real", "text"]


class _Node(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LiteralExpr(_Node):
    """A constant; ``value: null`` is SQL NULL."""

    kind: Literal["literal"] = "literal"
    value: str | int | float | bool | None


class ColumnExpr(_Node):
    """A column, qualified by a table alias (or table name) when ``table`` is set."""

    kind: Literal["column"] = "column"
    table: str | None = None
    name: str


class StarExpr(_Node):
    """``*``: only as the argument of ``count``."""

    kind: Literal["star"] = "star"


class FunctionExpr(_Node):
    """An allow-listed function. ``aggregate`` must agree with the function's kind."""

    kind: Literal["function"] = "function"
    name: FunctionName
    args: list[Expr] = Field(default_factory=list)
    aggregate: bool | None = None
    distinct: bool = False

    @model_validator(mode="after")
    def _check(self) -> FunctionExpr:
        is_agg = self.name in AGGREGATES
        if self.aggregate is None:
            self.aggregate = is_agg
        elif self.aggregate != is_agg:
            raise ValueError(f"{self.name} is {'an aggregate' if is_agg else 'not an aggregate'} function")
        if self.distinct and not is_agg:
            raise ValueError(f"distinct applies only to aggregate functions, not {self.name}")
        if any(isinstance(a, StarExpr) for a in self.args) and (self.name != "count" or len(self.args) != 1):
            raise ValueError("'*' is allowed only as count(*)")
        return self


class BinaryExpr(_Node):
    kind: Literal["binary"] = "binary"
    op: BinaryOp
    left: Expr
    right: Expr


class UnaryExpr(_Node):
    kind: Literal["unary"] = "unary"
    op: UnaryOp
    arg: Expr


class InListExpr(_Node):
    """``arg [NOT] IN (v1, v2, ...)``."""

    kind: Literal["in_list"] = "in_list"
    arg: Expr
    values: list[Expr] = Field(min_length=1)
    negated: bool = False


class BetweenExpr(_Node):
    kind: Literal["between"] = "between"
    arg: Expr
    low: Expr
    high: Expr
    negated: bool = False


class WhenClause(_Node):
    when: Expr
    then: Expr


class CaseExpr(_Node):
    """``CASE WHEN .. THEN .. [ELSE ..] END``."""

    kind: Literal["case"] = "case"
    whens: list[WhenClause] = Field(min_length=1)
    else_: Expr | None = Field(default=None, alias="else")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CastExpr(_Node):
    kind: Literal["cast"] = "cast"
    arg: Expr
    to: CastType


class DatePartExpr(_Node):
    """A dialect-neutral date part: ``year``/``month``/``day`` give integers,
    ``year_month`` a ``YYYY-MM`` string and ``date`` a ``YYYY-MM-DD`` string."""

    kind: Literal["date_part"] = "date_part"
    part: DatePartName
    arg: Expr


class ExistsExpr(_Node):
    """``[NOT] EXISTS (sub-plan)``; the sub-plan may refer to the outer query's aliases."""

    kind: Literal["exists"] = "exists"
    plan: PlanModel
    negated: bool = False


class InSubqueryExpr(_Node):
    """``arg [NOT] IN (sub-plan)``; the sub-plan selects exactly one column."""

    kind: Literal["in_subquery"] = "in_subquery"
    arg: Expr
    plan: PlanModel
    negated: bool = False

    @model_validator(mode="after")
    def _one_column(self) -> InSubqueryExpr:
        if len(self.plan.select) != 1:
            raise ValueError("an in_subquery sub-plan must select exactly one column")
        return self


class ScalarSubqueryExpr(_Node):
    """``(sub-plan)`` returning one value, e.g. the latest date in the data."""

    kind: Literal["scalar_subquery"] = "scalar_subquery"
    plan: PlanModel

    @model_validator(mode="after")
    def _one_column(self) -> ScalarSubqueryExpr:
        if len(self.plan.select) != 1:
            raise ValueError("a scalar_subquery sub-plan must select exactly one column")
        return self


Expr = Annotated[
    LiteralExpr
    | ColumnExpr
    | StarExpr
    | FunctionExpr
    | BinaryExpr
    | UnaryExpr
    | InListExpr
    | BetweenExpr
    | CaseExpr
    | CastExpr
    | DatePartExpr
    | ExistsExpr
    | InSubqueryExpr
    | ScalarSubqueryExpr,
    Field(discriminator="kind"),
]


class TableRef(_Node):
    name: str
    alias: str | None = None

    @property
    def ref(self) -> str:
        """How columns refer to this table: its alias, else its name."""
        return self.alias or self.name


class Join(_Node):
    type: Literal["inner", "left"] = "inner"
    table: TableRef
    on: Expr


class SelectItem(_Node):
    expr: Expr
    alias: str | None = None


class OrderItem(_Node):
    expr: Expr
    direction: Literal["asc", "desc"] = "asc"


class PlanModel(_Node):
    """One SELECT statement. ``from`` is the first table; ``joins`` add the others."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, title="PlanModel")

    distinct: bool = False
    select: list[SelectItem] = Field(min_length=1)
    from_: TableRef = Field(alias="from")
    joins: list[Join] = Field(default_factory=list)
    where: Expr | None = None
    group_by: list[Expr] = Field(default_factory=list)
    having: Expr | None = None
    order_by: list[OrderItem] = Field(default_factory=list)
    limit: Annotated[int, Field(ge=0)] | None = None
    offset: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _aliases_unique(self) -> PlanModel:
        refs = [self.from_.ref.lower()] + [j.table.ref.lower() for j in self.joins]
        if len(refs) != len(set(refs)):
            raise ValueError(f"table aliases must be unique within a plan: {refs}")
        if self.offset is not None and self.limit is None:
            raise ValueError("offset needs a limit")
        return self

    @property
    def tables(self) -> list[TableRef]:
        return [self.from_, *(j.table for j in self.joins)]

    def output_names(self) -> list[str]:
        """The result's column names: each alias, else the column's own name, else ``colN``."""
        names = []
        for i, item in enumerate(self.select, start=1):
            if item.alias:
                names.append(item.alias)
            elif isinstance(item.expr, ColumnExpr):
                names.append(item.expr.name)
            else:
                names.append(f"col{i}")
        return names

    def to_data(self) -> dict[str, Any]:
        """The plan as plain data, the way a suite file writes it: ``kind`` tags kept, empty
        defaults (false flags, empty lists, absent clauses) and the derived ``aggregate`` left out."""
        return _prune(self.model_dump(mode="json", by_alias=True))


_KEEP = frozenset({"kind", "value"})


def _prune(data: Any) -> Any:
    if isinstance(data, dict):
        return {
            k: _prune(v)
            for k, v in data.items()
            if k in _KEEP or (k != "aggregate" and v is not None and v is not False and v != [])
        }
    if isinstance(data, list):
        return [_prune(v) for v in data]
    return data


# PlanModel's rebuild resolves every forward reference it reaches; the other models complete
# themselves on first use (pydantic rebuilds a model with pending references when it is first
# validated), so the import does not build each nested schema again (about 50 ms).
PlanModel.model_rebuild()
