"""Near-miss mutants of a gold query: the wrong SQL an engine plausibly writes, one small edit away.

A neighbour database is worth keeping when it tells such a mutant apart from the gold (test-suite
accuracy, Zhong et al. 2020). Each rule below is one kind of edit over sqlglot's tree: it looks at
one node and returns what to put in its place (a copy), or None where it does not apply. A rule is
registered once, in ``RULES``; ``mutants`` applies every rule at every node, one edit at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sqlglot import exp

#: An edit: given one node (and the SQL's dialect), what may replace it (nothing where it does not apply).
Rule = Callable[[exp.Expression, str], list[exp.Expression]]

_COMPARISON_SWAPS: dict[type[exp.Expression], tuple[type[exp.Expression], ...]] = {
    exp.GT: (exp.GTE, exp.LT),
    exp.GTE: (exp.GT, exp.LTE),
    exp.LT: (exp.LTE, exp.GT),
    exp.LTE: (exp.LT, exp.GTE),
    exp.EQ: (exp.NEQ,),
    exp.NEQ: (exp.EQ,),
}
_AGGREGATE_SWAPS: dict[type[exp.Expression], tuple[type[exp.Expression], ...]] = {
    exp.Max: (exp.Min,),
    exp.Min: (exp.Max,),
    exp.Sum: (exp.Avg, exp.Count),
    exp.Avg: (exp.Sum,),
}


@dataclass(frozen=True)
class Mutant:
    """One near miss: which rule made it and the SQL it reads as."""

    rule: str
    sql: str


def _in_a_join_condition(node: exp.Expression) -> bool:
    return isinstance(node.parent, exp.Join) or any(isinstance(p, exp.Join) for p in _parents(node))


def _parents(node: exp.Expression) -> Iterator[exp.Expression]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def comparison(node: exp.Expression, dialect: str) -> list[exp.Expression]:
    """``>`` for ``>=``, ``<`` for ``>``, ``!=`` for ``=`` (join keys left alone: a join on
    ``!=`` is no near miss)."""
    swaps = _COMPARISON_SWAPS.get(type(node), ())
    if not swaps or _in_a_join_condition(node):
        return []
    return [kind(this=node.this.copy(), expression=node.expression.copy()) for kind in swaps]


def connective(node: exp.Expression, dialect: str) -> list[exp.Expression]:
    """AND for OR and OR for AND."""
    if isinstance(node, exp.And):
        return [exp.Or(this=node.this.copy(), expression=node.expression.copy())]
    if isinstance(node, exp.Or):
        return [exp.And(this=node.this.copy(), expression=node.expression.copy())]
    return []


def negation(node: exp.Expression, dialect: str) -> list[exp.Expression]:
    """A WHERE or HAVING condition negated, or its NOT dropped."""
    if not isinstance(node.parent, exp.Where | exp.Having):
        return []
    if isinstance(node, exp.Not):
        return [node.this.copy()]
    return [exp.Not(this=exp.Paren(this=node.copy()))]


def dropped_predicate(node: exp.Expression, dialect: str) -> list[exp.Expression]:
    """One side of an AND in a WHERE or HAVING left out."""
    if not isinstance(node, exp.And) or not any(isinstance(p, exp.Where | exp.Having) for p in _parents(node)):
        return []
    return [node.this.copy(), node.expression.copy()]


def aggregate(node: exp.Expression, dialect: str) -> list[exp.Expression]:
    """MAX for MIN, AVG for SUM, COUNT(DISTINCT x) for COUNT(x) and back."""
    if isinstance(node, exp.Count):
        inner = node.this
        if isinstance(inner, exp.Distinct):
            return [exp.Count(this=inner.expressions[0].copy())] if len(inner.expressions) == 1 else []
        if inner is None or isinstance(inner, exp.Star):
            return []
        return [exp.Count(this=exp.Distinct(expressions=[inner.copy()]))]
    return [kind(this=node.this.copy()) for kind in _AGGREGATE_SWAPS.get(type(node), ())]


def distinct(node: exp.Expression, dialect: str) -> list[exp.Expression]:
    """SELECT DISTINCT for SELECT and back."""
    if not isinstance(node, exp.Select):
        return []
    copy = node.copy()
    copy.set("distinct", None if node.args.get("distinct") else exp.Distinct())
    return [copy]


def join_kind(node: exp.Expression, dialect: str) -> list[exp.Expression]:
    """An inner join made a left join, a left join an inner one."""
    if not isinstance(node, exp.Join) or node.args.get("on") is None:
        return []
    copy = node.copy()
    if (node.args.get("side") or "").upper() == "LEFT":
        copy.set("side", None)
    elif not node.args.get("side") and not node.args.get("kind"):
        copy.set("side", "LEFT")
    else:
        return []
    return [copy]


def order(node: exp.Expression, dialect: str) -> list[exp.Expression]:
    """An ORDER BY key in the other direction."""
    if not isinstance(node, exp.Ordered):
        return []
    copy = node.copy()
    from sqlglot.dialects.dialect import Dialect

    descending = not node.args.get("desc")
    copy.set("desc", descending)
    # NULLs where the dialect puts them by default in the new direction: no NULLS clause is added
    ordering = Dialect.get_or_raise(dialect).NULL_ORDERING
    copy.set("nulls_first", {"nulls_are_small": not descending, "nulls_are_large": descending}.get(ordering, False))
    return [copy]


def group_by(node: exp.Expression, dialect: str) -> list[exp.Expression]:
    """One key of a GROUP BY of several left out."""
    if not isinstance(node, exp.Group) or len(node.expressions) < 2:
        return []
    return [exp.Group(expressions=[e.copy() for j, e in enumerate(node.expressions) if j != i])
            for i in range(len(node.expressions))]


def row_window(node: exp.Expression, dialect: str) -> list[exp.Expression]:
    """LIMIT and OFFSET one more and one fewer."""
    if not isinstance(node, exp.Limit | exp.Offset):
        return []
    value = node.expression
    if not isinstance(value, exp.Literal) or value.is_string:
        return []
    n = int(value.this)
    out = []
    for m in (n - 1, n + 1):
        if m >= (1 if isinstance(node, exp.Limit) else 0):
            copy = node.copy()
            copy.set("expression", exp.Literal.number(m))
            out.append(copy)
    return out


def literal(node: exp.Expression, dialect: str) -> list[exp.Expression]:
    """A number compared with, nudged by one (outside LIMIT and OFFSET, which ``row_window`` edits)."""
    if not isinstance(node, exp.Literal) or node.is_string or not isinstance(node.parent, tuple(_COMPARISON_SWAPS)):
        return []
    try:
        value = int(node.this)
    except ValueError:
        value_f = float(node.this)
        return [exp.Literal.number(value_f - 1), exp.Literal.number(value_f + 1)]
    return [exp.Literal.number(value - 1), exp.Literal.number(value + 1)]


#: Every rule by name, in the order mutants are listed.
RULES: dict[str, Rule] = {
    "comparison": comparison,
    "connective": connective,
    "negation": negation,
    "dropped_predicate": dropped_predicate,
    "aggregate": aggregate,
    "distinct": distinct,
    "join_kind": join_kind,
    "order": order,
    "group_by": group_by,
    "row_window": row_window,
    "literal": literal,
}


def mutants(sql: str, dialect: str = "sqlite", rules: dict[str, Rule] | None = None) -> list[Mutant]:
    """Every one-edit mutant of ``sql`` (each distinct SQL once, never the gold itself); none of
    SQL the reader cannot parse (the gold audit flags it ``gold_unparsable``)."""
    import sqlglot

    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        return []
    gold = tree.sql(dialect=dialect)
    seen = {gold}
    out: list[Mutant] = []
    nodes = list(tree.walk())
    for name, rule in (rules or RULES).items():
        for index, node in enumerate(nodes):
            for replacement in rule(node, dialect):
                copy = tree.copy()
                target = list(copy.walk())[index]  # the same node in the copy (walk order is fixed)
                if target is copy:
                    copy = replacement
                else:
                    target.replace(replacement)
                text = copy.sql(dialect=dialect)
                if text not in seen:
                    seen.add(text)
                    out.append(Mutant(name, text))
    return out
