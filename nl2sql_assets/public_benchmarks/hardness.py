"""Spider's hardness levels (easy, medium, hard, extra), from the gold SQL, by Spider's own rules.

Spider's evaluator sorts a query by three counts taken on its outermost SELECT (nested queries
are counted, not looked into):

* **components 1**: a WHERE, a GROUP BY, an ORDER BY and a LIMIT count one each; every table
  joined beyond the first; every OR and every LIKE among the ON, WHERE and HAVING conditions;
* **components 2**: the nested queries: a sub-query as a value in an ON, WHERE or HAVING
  condition, and one for a chain of INTERSECT, EXCEPT and UNION;
* **others**: one each for more than one aggregate (aggregated select items, negated WHERE and
  HAVING conditions and aggregated ORDER BY keys, as Spider's counter reads them), more than
  one select item, more than one WHERE condition and more than one GROUP BY key.

Then: easy when components 1 <= 1 and nothing else; medium when (others <= 2, components 1 <= 1)
or (components 1 <= 2, others < 2), with no nesting; hard when (others > 2, components 1 <= 2)
or (components 1 in 3, others <= 2) with no nesting, or (components 1 <= 1, others 0, at most
one nested query); extra otherwise. Here the counts come from sqlglot's tree of the SQL.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

from sqlglot import exp

Hardness = Literal["easy", "medium", "hard", "extra"]


@dataclasses.dataclass(frozen=True)
class Counts:
    """The three counts Spider's hardness is decided on."""

    components1: int
    components2: int
    others: int


def hardness_of(counts: Counts) -> Hardness:
    c1, c2, others = counts.components1, counts.components2, counts.others
    if c1 <= 1 and others == 0 and c2 == 0:
        return "easy"
    if c2 == 0 and ((others <= 2 and c1 <= 1) or (c1 <= 2 and others < 2)):
        return "medium"
    if (c2 == 0 and ((others > 2 and c1 <= 2) or (2 < c1 <= 3 and others <= 2))) or (
            c1 <= 1 and others == 0 and c2 <= 1):
        return "hard"
    return "extra"


@functools.lru_cache(maxsize=8192)
def spider_hardness(sql: str, dialect: str = "sqlite") -> Hardness | None:
    """The hardness of ``sql``; None when sqlglot cannot read it as one query."""
    import sqlglot

    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except Exception:  # sqlglot's errors: the query keeps no label rather than a wrong one
        return None
    if not isinstance(tree, exp.Query):
        return None
    return hardness_of(count(tree))


def count(tree: exp.Query) -> Counts:
    # A chain of set operations nests one query at the top (Spider reads it right to left:
    # A UNION (B EXCEPT C)); the counts are the left-most SELECT's.
    nested = int(isinstance(tree, exp.SetOperation))
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    while isinstance(select, exp.Subquery):
        select = select.this
    if not isinstance(select, exp.Select):
        return Counts(0, nested, 0)
    where = select.args.get("where")
    having = select.args.get("having")
    group = select.args.get("group")
    order = select.args.get("order")
    joins = select.args.get("joins") or []
    conditions = [c for c in (where.this if where else None, having.this if having else None) if c is not None]
    conditions += [j.args["on"] for j in joins if j.args.get("on") is not None]

    c1 = sum(1 for part in (where, group, order, select.args.get("limit")) if part is not None)
    c1 += len(joins)
    for condition in conditions:
        c1 += sum(1 for node in _in_scope(condition) if isinstance(node, exp.Or))
        c1 += sum(1 for node in _in_scope(condition) if isinstance(node, exp.Like | exp.ILike))
    for condition in conditions:
        nested += sum(1 for node in _in_scope(condition) if isinstance(node, exp.Query) and node is not condition)

    aggregates = sum(1 for item in select.expressions if isinstance(_unalias(item), exp.AggFunc))
    aggregates += sum(1 for c in _conditions(where.this) if isinstance(c, exp.Not)) if where else 0
    aggregates += sum(1 for c in _conditions(having.this) if isinstance(c, exp.Not)) if having else 0
    if order is not None:
        for key in order.expressions:
            aggregates += sum(1 for node in _in_scope(key.this) if isinstance(node, exp.AggFunc))
    others = int(aggregates > 1) + int(len(select.expressions) > 1)
    others += int(where is not None and len(_conditions(where.this)) > 1)
    others += int(group is not None and len(group.expressions) > 1)
    return Counts(c1, nested, others)


def _unalias(node: exp.Expression) -> exp.Expression:
    return node.this if isinstance(node, exp.Alias) else node


def _conditions(node: exp.Expression) -> list[exp.Expression]:
    """The condition units of an AND/OR chain (parentheses looked through), as Spider lists them."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And | exp.Or):
        return _conditions(node.this) + _conditions(node.expression)
    return [node]


def _in_scope(node: exp.Expression):
    """Every node under ``node`` that belongs to its own query, nested queries included as nodes
    but not walked into."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, exp.Query) and current is not node:
            continue
        stack.extend(child for child in current.iter_expressions())
