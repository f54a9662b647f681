"""The SQL generator: a PlanModel rendered as SQLite or DuckDB SQL through a sqlglot tree.

Nothing is pasted into SQL text: every identifier is a quoted sqlglot identifier and every
literal a sqlglot literal, so names with spaces, reserved words or quotes, and strings with
quotes, are always rendered safely. The tree is built node by node, so operator precedence
is made explicit here with parentheses (sqlglot only keeps parentheses that are in its tree).

A plan should mean the same thing on both engines where that is cheap to arrange:

* ``like`` / ``not_like`` render as ``LIKE`` in SQLite (case-insensitive for ASCII) and as
  ``ILIKE`` in DuckDB (whose ``LIKE`` is case-sensitive), so a pattern matches the same rows.
* Date parts give the same values and types: ``year``/``month``/``day`` are integers,
  ``year_month`` is ``'YYYY-MM'`` and ``date`` is ``'YYYY-MM-DD'``. SQLite reads its dates
  from text (``STRFTIME``); DuckDB expects DATE or TIMESTAMP columns.
* ``group_concat`` is ``GROUP_CONCAT`` in SQLite and ``STRING_AGG(x, ',')`` in DuckDB.
* ORDER BY keeps each engine's own placement of NULLs (SQLite and MySQL: first when ascending,
  last when descending; Postgres: the other way round; DuckDB: last), which is what SQL written by
  hand for that engine gets.

Left to each engine, on purpose (the planner can cast when it matters): ``/`` between two
integers divides as integers in SQLite and gives a float in DuckDB; ``CAST(2.7 AS INTEGER)``
truncates in SQLite and rounds in DuckDB; ``x / 0`` is NULL in SQLite and an error or
infinity in DuckDB.

The top-level SELECT names every item the way ``PlanModel.output_names`` does (an unaliased
expression that is not a plain column is rendered ``AS "colN"``), so both engines return the
same column names. Sub-plans are rendered without those extra aliases.

``qualify_plan`` makes every name explicit before rendering, so the SQL has no name whose
meaning depends on an engine's scoping rules: each column carries its table alias, and a
select alias appears only where SQL reads it as the alias (a bare ORDER BY key); anywhere
else the alias's expression itself is written. The final-SQL policy check then reads exactly
what the validator read.
"""

from __future__ import annotations

import functools
import math

from sqlglot import exp

from nl2sql_assets.datasources.engines import SqlStyle, engine_for_dialect
from nl2sql_assets.datasources.schema import SchemaSnapshot, TableInfo
from nl2sql_assets.engine.plan import (
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
    OrderItem,
    PlanModel,
    ScalarSubqueryExpr,
    SelectItem,
    StarExpr,
    TableRef,
    UnaryExpr,
    WhenClause,
)

#: a sqlglot dialect one of our database engines speaks (``datasources.engines``)
Dialect = str

# Binding strength of the sqlglot nodes this module builds; higher binds tighter.
_OR, _AND, _NOT, _CMP, _CONCAT, _ADD, _MUL, _NEG, _ATOM = range(1, 10)
_PRECEDENCE: dict[type[exp.Expression], int] = {
    exp.Or: _OR,
    exp.And: _AND,
    exp.Not: _NOT,
    exp.EQ: _CMP,
    exp.NEQ: _CMP,
    exp.LT: _CMP,
    exp.LTE: _CMP,
    exp.GT: _CMP,
    exp.GTE: _CMP,
    exp.Like: _CMP,
    exp.ILike: _CMP,
    exp.In: _CMP,
    exp.Between: _CMP,
    exp.Is: _CMP,
    exp.DPipe: _CONCAT,
    exp.Add: _ADD,
    exp.Sub: _ADD,
    exp.Mul: _MUL,
    exp.Div: _MUL,
    exp.Mod: _MUL,
    exp.Neg: _NEG,
}

_COMPARISONS: dict[str, type[exp.Expression]] = {
    "=": exp.EQ,
    "!=": exp.NEQ,
    "<": exp.LT,
    "<=": exp.LTE,
    ">": exp.GT,
    ">=": exp.GTE,
}
_ARITHMETIC: dict[str, type[exp.Expression]] = {"+": exp.Add, "-": exp.Sub, "*": exp.Mul, "%": exp.Mod}
_AGGREGATE_NODES: dict[str, type[exp.Expression]] = {
    "count": exp.Count,
    "sum": exp.Sum,
    "avg": exp.Avg,
    "min": exp.Min,
    "max": exp.Max,
}
_ARG = "__nl2sql_arg__"


@functools.lru_cache(maxsize=128)
def _template(dialect: str, text: str) -> exp.Expression:
    """A date part's SQL template parsed once; its ``{}`` is the column ``__nl2sql_arg__``."""
    import sqlglot

    return sqlglot.parse_one(text.format(_ARG), read=dialect)


def _native_nulls_first(dialect: str, desc: bool) -> bool:
    """Whether ``dialect``'s engine puts NULLs first in an order of this direction by itself."""
    from sqlglot.dialects.dialect import Dialect

    ordering = Dialect.get_or_raise(dialect).NULL_ORDERING
    return {"nulls_are_small": not desc, "nulls_are_large": desc, "nulls_are_first": True}.get(ordering, False)


@functools.lru_cache(maxsize=64)
def _cast_type(dialect: str, name: str) -> exp.DataType:
    return exp.DataType.build(name, dialect=dialect)


def _style(dialect: str) -> SqlStyle:
    engine = engine_for_dialect(dialect)
    if engine is None:
        raise ValueError(f"unsupported dialect {dialect!r}: no database engine of ours speaks it")
    return engine.sql_style


def generate_sql(plan: PlanModel, dialect: Dialect) -> str:
    """Render ``plan`` as one SELECT statement in ``dialect`` (the sqlglot dialect of one of our
    database engines: sqlite, duckdb, postgres, mysql)."""
    style = _style(dialect)
    # copy=False: the tree is this call's own, so sqlglot need not copy it before rendering.
    return _Renderer(dialect, style).select(plan, top=True).sql(dialect=dialect, copy=False)


# ---------------------------------------------------------------- explicit names


_ALIAS_CLAUSES = frozenset({"ORDER BY", "GROUP BY", "HAVING"})


class _Names:
    """One plan's table references (lower-cased ref -> (table, ref as written)) and select aliases."""

    def __init__(self, plan: PlanModel, schema: SchemaSnapshot, parent: _Names | None) -> None:
        self.parent = parent
        self.refs: dict[str, tuple[TableInfo | None, str]] = {
            t.ref.lower(): (schema.table(t.name), t.ref) for t in plan.tables
        }
        self.aliases: dict[str, SelectItem] = {}
        for item in plan.select:
            if item.alias:
                self.aliases.setdefault(item.alias.lower(), item)

    def owners(self, name: str) -> list[str]:
        """The refs of this plan whose table has a column ``name``."""
        return [ref for info, ref in self.refs.values() if info is not None and info.column(name) is not None]

    def spelled(self, ref: str, name: str) -> str:
        """``name`` as the schema spells it in the table ``ref`` names (here or in an enclosing
        plan), else as written."""
        level: _Names | None = self
        while level is not None:
            found = level.refs.get(ref.lower())
            if found is not None:
                column = found[0].column(name) if found[0] is not None else None
                return column.name if column is not None else name
            level = level.parent
        return name


def qualify_plan(plan: PlanModel, schema: SchemaSnapshot) -> PlanModel:
    """``plan`` with every column qualified by its table alias and every select-alias reference
    outside a bare ORDER BY key replaced by the alias's expression, resolved the way the
    validator resolves them, and every table and column spelled as the schema spells it (a plan
    names them as a person writes them unquoted; the SQL quotes them, and a server such as
    Postgres matches a quoted name exactly). Names the validator would reject are left as they are."""
    return _Qualifier(schema).plan(plan, None)


class _Qualifier:
    def __init__(self, schema: SchemaSnapshot) -> None:
        self.schema = schema

    def plan(self, plan: PlanModel, parent: _Names | None) -> PlanModel:
        names = _Names(plan, self.schema, parent)
        update: dict[str, object] = {
            "from_": self.table(plan.from_),
            "select": [i.model_copy(update={"expr": self.expr(i.expr, names, "SELECT")}) for i in plan.select],
            "joins": [j.model_copy(update={"on": self.expr(j.on, names, "ON"), "table": self.table(j.table)})
                      for j in plan.joins],
            "group_by": [self.expr(e, names, "GROUP BY") for e in plan.group_by],
            "order_by": [self.order(o, names) for o in plan.order_by],
        }
        if plan.where is not None:
            update["where"] = self.expr(plan.where, names, "WHERE")
        if plan.having is not None:
            update["having"] = self.expr(plan.having, names, "HAVING")
        return plan.model_copy(update=update)

    def table(self, ref: TableRef) -> TableRef:
        """The table as the schema spells it; its columns keep naming it as the plan wrote it (an
        alias of that spelling where it had none)."""
        info = self.schema.table(ref.name)
        if info is None or info.name == ref.name:
            return ref
        return ref.model_copy(update={"name": info.name, "alias": ref.alias or ref.name})

    def order(self, item: OrderItem, names: _Names) -> OrderItem:
        if isinstance(item.expr, ColumnExpr):
            return item.model_copy(update={"expr": self.column(item.expr, names, "ORDER BY", bare=True)})
        return item.model_copy(update={"expr": self.expr(item.expr, names, "ORDER BY")})

    def expr(self, node: object, names: _Names, clause: str) -> object:
        def e(child: object) -> object:
            return self.expr(child, names, clause)

        if isinstance(node, ColumnExpr):
            return self.column(node, names, clause)
        if isinstance(node, FunctionExpr):
            return node.model_copy(update={"args": [e(a) for a in node.args]})
        if isinstance(node, BinaryExpr):
            return node.model_copy(update={"left": e(node.left), "right": e(node.right)})
        if isinstance(node, UnaryExpr | CastExpr | DatePartExpr):
            return node.model_copy(update={"arg": e(node.arg)})
        if isinstance(node, InListExpr):
            return node.model_copy(update={"arg": e(node.arg), "values": [e(v) for v in node.values]})
        if isinstance(node, BetweenExpr):
            return node.model_copy(update={"arg": e(node.arg), "low": e(node.low), "high": e(node.high)})
        if isinstance(node, CaseExpr):
            whens = [WhenClause(when=e(w.when), then=e(w.then)) for w in node.whens]  # type: ignore[arg-type]
            return node.model_copy(update={"whens": whens, "else_": e(node.else_) if node.else_ is not None else None})
        if isinstance(node, ExistsExpr | ScalarSubqueryExpr):
            return node.model_copy(update={"plan": self.plan(node.plan, names)})
        if isinstance(node, InSubqueryExpr):
            return node.model_copy(update={"arg": e(node.arg), "plan": self.plan(node.plan, names)})
        return node

    def column(self, node: ColumnExpr, names: _Names, clause: str, bare: bool = False) -> object:
        if node.table is not None:
            spelled = names.spelled(node.table, node.name)
            return node if spelled == node.name else node.model_copy(update={"name": spelled})
        alias = names.aliases.get(node.name.lower()) if clause in _ALIAS_CLAUSES else None
        if alias is not None and bare:
            return node  # ORDER BY name: SQL reads the select alias
        level, owners = names, names.owners(node.name)
        while not owners and level.parent is not None:
            level = level.parent
            owners = level.owners(node.name)
        if alias is not None and (not owners or level is not names):
            # The name means the select item here: write its expression, so no engine has to choose.
            return self.expr(alias.expr, names, "SELECT")
        if len(owners) != 1:
            return node  # unknown or ambiguous: the validator reports it
        ref = owners[0]
        inner: _Names | None = names
        while inner is not None and inner is not level:
            if ref.lower() in inner.refs:
                return node  # a nearer plan hides that ref: leave the engine's own lookup
            inner = inner.parent
        return ColumnExpr(table=ref, name=level.spelled(ref, node.name))


def _ident(name: str) -> exp.Identifier:
    return exp.Identifier(this=name, quoted=True)


def _prec(node: exp.Expression) -> int:
    if isinstance(node, exp.Literal) and node.is_number and node.this.startswith("-"):
        return _NEG  # a negative number renders with a leading '-', like a negation
    return _PRECEDENCE.get(type(node), _ATOM)


def _wrap(node: exp.Expression, parens: bool) -> exp.Expression:
    return exp.Paren(this=node) if parens else node


class _Renderer:
    """Builds the sqlglot tree for one dialect."""

    def __init__(self, dialect: str, style: SqlStyle) -> None:
        self.dialect = dialect
        self.style = style

    # ------------------------------------------------------------ statements

    def select(self, plan: PlanModel, top: bool = False) -> exp.Select:
        names = plan.output_names() if top else None
        items: list[exp.Expression] = []
        for i, item in enumerate(plan.select):
            node = self.expr(item.expr)
            if item.alias:
                node = exp.Alias(this=node, alias=_ident(item.alias))
            elif names is not None and not isinstance(item.expr, ColumnExpr):
                node = exp.Alias(this=node, alias=_ident(names[i]))
            items.append(node)

        query = exp.Select(expressions=items)
        if plan.distinct:
            query = query.distinct(copy=False)
        query = query.from_(self.table(plan.from_), copy=False)
        for join in plan.joins:
            # Built directly: sqlglot's ``Select.join(join_type=...)`` parses a small statement to
            # read the join type, which was most of the SQL generation's time.
            node = exp.Join(this=self.table(join.table))
            if join.type == "left":
                node.set("side", "LEFT")
            else:
                node.set("kind", "INNER")
            node.set("on", self.expr(join.on))
            query.append("joins", node)
        if plan.where is not None:
            query = query.where(self.expr(plan.where), copy=False)
        if plan.group_by:
            query = query.group_by(*(self.expr(e) for e in plan.group_by), copy=False)
        if plan.having is not None:
            query = query.having(self.expr(plan.having), copy=False)
        if plan.order_by:
            query = query.order_by(
                *(self.ordered(o.expr, o.direction == "desc") for o in plan.order_by), copy=False
            )
        if plan.limit is not None:
            query = query.limit(exp.Literal.number(plan.limit), copy=False)
        if plan.offset is not None:
            query = query.offset(exp.Literal.number(plan.offset), copy=False)
        return query

    def table(self, ref: TableRef) -> exp.Table:
        alias = exp.TableAlias(this=_ident(ref.alias)) if ref.alias else None
        return exp.Table(this=_ident(ref.name), alias=alias)

    def ordered(self, expr: object, desc: bool) -> exp.Ordered:
        # Say where NULLs go exactly as the engine itself puts them, so sqlglot adds no clause:
        # small (SQLite, MySQL: first ascending, last descending), large (Postgres: the other
        # way round) or always last (DuckDB).
        return exp.Ordered(this=self.expr(expr), desc=desc, nulls_first=_native_nulls_first(self.dialect, desc))

    # ------------------------------------------------------------ expressions

    def expr(self, node: object) -> exp.Expression:
        if isinstance(node, ColumnExpr):
            return exp.Column(this=_ident(node.name), table=_ident(node.table) if node.table else None)
        if isinstance(node, LiteralExpr):
            return self.literal(node.value)
        if isinstance(node, BinaryExpr):
            return self.binary(node)
        if isinstance(node, FunctionExpr):
            return self.function(node)
        if isinstance(node, UnaryExpr):
            return self.unary(node)
        if isinstance(node, InListExpr):
            arg = self.expr(node.arg)
            out: exp.Expression = exp.In(
                this=_wrap(arg, _prec(arg) <= _CMP), expressions=[self.expr(v) for v in node.values]
            )
            return exp.Not(this=out) if node.negated else out
        if isinstance(node, BetweenExpr):
            arg, low, high = self.expr(node.arg), self.expr(node.low), self.expr(node.high)
            out = exp.Between(
                this=_wrap(arg, _prec(arg) <= _CMP),
                low=_wrap(low, _prec(low) <= _CMP),
                high=_wrap(high, _prec(high) <= _CMP),
            )
            return exp.Not(this=out) if node.negated else out
        if isinstance(node, CaseExpr):
            return exp.Case(
                ifs=[exp.If(this=self.expr(w.when), true=self.expr(w.then)) for w in node.whens],
                default=self.expr(node.else_) if node.else_ is not None else None,
            )
        if isinstance(node, CastExpr):
            return self.cast(self.expr(node.arg), node.to)
        if isinstance(node, DatePartExpr):
            return self.date_part(node.part, self.expr(node.arg))
        if isinstance(node, ExistsExpr):
            out = exp.Exists(this=self.select(node.plan))
            return exp.Not(this=out) if node.negated else out
        if isinstance(node, InSubqueryExpr):
            arg = self.expr(node.arg)
            out = exp.In(this=_wrap(arg, _prec(arg) <= _CMP), query=exp.Subquery(this=self.select(node.plan)))
            return exp.Not(this=out) if node.negated else out
        if isinstance(node, ScalarSubqueryExpr):
            return exp.Subquery(this=self.select(node.plan))
        if isinstance(node, StarExpr):
            return exp.Star()
        raise TypeError(f"cannot render plan node {type(node).__name__}")

    def literal(self, value: str | int | float | bool | None) -> exp.Expression:
        if value is None:
            return exp.Null()
        if isinstance(value, bool):
            return exp.Boolean(this=value)
        if isinstance(value, int):
            return exp.Literal.number(value)
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"cannot render the non-finite number {value!r} as SQL")
            return exp.Literal.number(repr(value))
        return exp.Literal.string(value)

    def binary(self, node: BinaryExpr) -> exp.Expression:
        op = node.op
        left, right = self.expr(node.left), self.expr(node.right)
        lp, rp = _prec(left), _prec(right)
        if op in ("and", "or"):
            p = _AND if op == "and" else _OR
            cls: type[exp.Expression] = exp.And if op == "and" else exp.Or
            return cls(this=_wrap(left, lp < p), expression=_wrap(right, rp <= p))
        if op in _COMPARISONS or op in ("like", "not_like"):
            # Comparisons never chain without parentheses: engines disagree on how they nest.
            left, right = _wrap(left, lp <= _CMP), _wrap(right, rp <= _CMP)
            if op in _COMPARISONS:
                return _COMPARISONS[op](this=left, expression=right)
            like = (exp.ILike if self.style.like == "ILIKE" else exp.Like)(this=left, expression=right)
            return exp.Not(this=like) if op == "not_like" else like
        if op == "||":
            # SQLite binds || tighter than arithmetic and DuckDB looser: parenthesise anything
            # that is not itself a concatenation on the left.
            return exp.DPipe(
                this=_wrap(left, lp < _ATOM and not isinstance(left, exp.DPipe)),
                expression=_wrap(right, rp < _ATOM),
                safe=True,
            )
        p = _MUL if op in ("*", "/", "%") else _ADD
        left, right = _wrap(left, lp < p), _wrap(right, rp <= p)
        if op == "/":
            # typed=True tells sqlglot the engine's own '/' is meant (it would cast in SQLite).
            return exp.Div(this=left, expression=right, typed=self.style.integer_division, safe=False)
        return _ARITHMETIC[op](this=left, expression=right)

    def unary(self, node: UnaryExpr) -> exp.Expression:
        arg = self.expr(node.arg)
        p = _prec(arg)
        if node.op == "not":
            return exp.Not(this=_wrap(arg, p <= _NOT))
        if node.op == "neg":
            return exp.Neg(this=_wrap(arg, p <= _NEG))
        test = exp.Is(this=_wrap(arg, p <= _CMP), expression=exp.Null())
        return exp.Not(this=test) if node.op == "is_not_null" else test

    def function(self, node: FunctionExpr) -> exp.Expression:
        if node.name == "count" and len(node.args) == 1 and isinstance(node.args[0], StarExpr):
            return exp.Count(this=exp.Star())
        args = [self.expr(a) for a in node.args]
        if node.distinct and args:
            args = [exp.Distinct(expressions=[args[0]]), *args[1:]]
        if node.name in _AGGREGATE_NODES:
            if len(args) == 1:
                return _AGGREGATE_NODES[node.name](this=args[0])
            return exp.Anonymous(this=node.name.upper(), expressions=args)  # arity error left to the engine
        if node.name == "group_concat":
            if self.style.string_agg == "STRING_AGG":
                sep = args[1] if len(args) > 1 else exp.Literal.string(",")
                return exp.Anonymous(
                    this="STRING_AGG", expressions=[args[0] if args else exp.Null(), sep, *args[2:]]
                )
            return exp.Anonymous(this="GROUP_CONCAT", expressions=args)
        # Scalar functions share name and argument order on both engines: render them as written.
        return exp.Anonymous(this=node.name.upper(), expressions=args)

    def cast(self, arg: exp.Expression, to: str) -> exp.Expression:
        return exp.Cast(this=arg, to=_cast_type(self.dialect, self.style.cast_types[to]).copy())

    def date_part(self, part: str, arg: exp.Expression) -> exp.Expression:
        tree = _template(self.dialect, self.style.date_parts[part]).copy()
        for column in list(tree.find_all(exp.Column)):
            if column.name == _ARG:
                if column is tree:
                    return arg
                column.replace(arg.copy())
        return tree
