"""What of a database a query leans on, read from its tree: the tables it reads, the values it
compares columns with, the thresholds on its aggregates, its sort keys under a LIMIT, what it
makes distinct or groups, the columns its predicates read, its outer joins; and, for two queries,
the kinds of edit that tell one from the other (``difference``).

Targeted neighbours (``targeted``) are built from a gold's focus; the witness search
(``witness``) from the focus of a gold and a prediction together, leaning on the kinds of edit
between them. Nothing here runs SQL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

#: A column as a query names it: (table, lower case; None where the query does not say), column (lower case).
ColumnRef = tuple[str | None, str]

#: The kinds of edit ``difference`` tells apart, each leaning on its own kind of data.
KINDS = ("literal", "comparison", "predicate", "join", "aggregate", "threshold", "order", "limit", "distinct",
         "group", "null", "function", "other")


@dataclass(frozen=True)
class Threshold:
    """An aggregate compared with a number (``HAVING COUNT(t.x) > 100``): the aggregate's name,
    the column it reads (None: ``COUNT(*)``), the number."""

    aggregate: str
    column: ColumnRef | None
    value: float


@dataclass
class Focus:
    """What one query, or several together, lean on (every name lower case)."""

    tables: set[str] = field(default_factory=set)
    #: column name -> the values compared with it (numbers, strings, ``LikePattern``)
    literals: dict[str, list[Any]] = field(default_factory=dict)
    thresholds: list[Threshold] = field(default_factory=list)
    #: sort keys that are columns; whether a sort key is an aggregate; whether a LIMIT cuts the order
    sort_columns: set[ColumnRef] = field(default_factory=set)
    aggregate_sort: bool = False
    limit: bool = False
    #: the most rows a LIMIT (with its OFFSET) keeps: ties tell only in a table with more rows
    cut: int = 0
    #: columns under DISTINCT, COUNT(DISTINCT ...) or GROUP BY: where repeated values tell
    distinct_columns: set[ColumnRef] = field(default_factory=set)
    #: columns a WHERE, HAVING, ON or aggregate reads: where NULLs tell
    predicate_columns: set[ColumnRef] = field(default_factory=set)
    aggregated_columns: set[ColumnRef] = field(default_factory=set)
    outer_join: bool = False
    joins: int = 0
    #: the kinds of edit between two queries (empty for one query's own focus)
    kinds: set[str] = field(default_factory=set)

    def merge(self, other: Focus) -> Focus:
        literals = {k: list(v) for k, v in self.literals.items()}
        for column, values in other.literals.items():
            known = literals.setdefault(column, [])
            known += [v for v in values if v not in known]
        return Focus(
            tables=self.tables | other.tables, literals=literals,
            thresholds=[*self.thresholds, *(t for t in other.thresholds if t not in self.thresholds)],
            sort_columns=self.sort_columns | other.sort_columns,
            aggregate_sort=self.aggregate_sort or other.aggregate_sort, limit=self.limit or other.limit,
            cut=max(self.cut, other.cut),
            distinct_columns=self.distinct_columns | other.distinct_columns,
            predicate_columns=self.predicate_columns | other.predicate_columns,
            aggregated_columns=self.aggregated_columns | other.aggregated_columns,
            outer_join=self.outer_join or other.outer_join, joins=max(self.joins, other.joins),
            kinds=self.kinds | other.kinds)

    @property
    def targets(self) -> set[str]:
        """The kinds of data worth building for this focus alone (a gold's targeted neighbour)."""
        out = {"literal"} if self.literals else set()
        if self.thresholds:
            out.add("threshold")
        if self.joins:
            out.add("join")
        if self.limit and (self.sort_columns or self.aggregate_sort):
            out.add("order")
        if self.distinct_columns or self.aggregated_columns:
            out.add("distinct")
        if self.predicate_columns:
            out.add("null")
        return out


def parse(sql: str, dialect: str) -> exp.Expression | None:
    import sqlglot

    try:
        return sqlglot.parse_one(sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        return None


def _number(node: exp.Expression) -> float | None:
    if isinstance(node, exp.Neg):
        inner = _number(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return float(node.this)
        except ValueError:
            return None
    return None


def _whole(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def _aliases(tree: exp.Expression) -> dict[str, str]:
    """Table alias (or name) -> table name, lower case, over the whole statement."""
    out: dict[str, str] = {}
    for table in tree.find_all(exp.Table):
        if table.name:
            out[(table.alias_or_name or table.name).lower()] = table.name.lower()
    return out


def _column(node: exp.Column, aliases: dict[str, str]) -> ColumnRef:
    table = node.table.lower() if node.table else None
    return (aliases.get(table, table) if table else None, node.name.lower())


def _select_aliases(tree: exp.Expression) -> dict[str, exp.Expression]:
    out: dict[str, exp.Expression] = {}
    for select in tree.find_all(exp.Select):
        for e in select.expressions:
            if isinstance(e, exp.Alias) and e.alias:
                out.setdefault(e.alias.lower(), e.this)
    return out


def _resolved(node: exp.Expression, aliases: dict[str, exp.Expression]) -> exp.Expression:
    """A select alias named in ORDER BY or HAVING read as the expression it stands for."""
    if isinstance(node, exp.Column) and not node.table and node.name.lower() in aliases:
        return aliases[node.name.lower()]
    return node


class LikePattern(str):
    """A LIKE pattern compared with a column (its spellings are written, not the pattern itself)."""


def focus_of(sql: str, dialect: str = "sqlite") -> Focus | None:
    """One query's focus (None where the reader cannot parse it)."""
    tree = parse(sql, dialect)
    return None if tree is None else tree_focus(tree)


def tree_focus(tree: exp.Expression) -> Focus:
    focus = Focus()
    aliases = _aliases(tree)
    selected = _select_aliases(tree)
    focus.tables = set(aliases.values())

    def add_literal(column: ColumnRef, value: Any) -> None:
        values = focus.literals.setdefault(column[1], [])
        if value not in values:
            values.append(value)

    for node in tree.find_all(exp.Predicate):
        if isinstance(node, exp.Like | exp.ILike):
            if isinstance(node.this, exp.Column) and isinstance(node.expression, exp.Literal):
                ref = _column(node.this, aliases)
                focus.predicate_columns.add(ref)
                add_literal(ref, LikePattern(str(node.expression.this)))
            continue
        sides = [node.args.get(k) for k in ("this", "expression", "low", "high")]
        sides += list(node.args.get("expressions") or [])
        sides = [_resolved(s, selected) for s in sides if isinstance(s, exp.Expression)]
        columns = [s for s in sides if isinstance(s, exp.Column)]
        aggregates = [s for s in sides if isinstance(s, exp.AggFunc)]
        for side in sides:
            number = _number(side)
            text = side.this if isinstance(side, exp.Literal) and side.is_string else None
            for column in columns:
                ref = _column(column, aliases)
                if number is not None:
                    add_literal(ref, _whole(number))
                elif text is not None:
                    add_literal(ref, str(text))
            for aggregate in aggregates:
                if number is None:
                    continue
                inner = aggregate.this.expressions[0] if isinstance(aggregate.this, exp.Distinct) \
                    and aggregate.this.expressions else aggregate.this
                ref = _column(inner, aliases) if isinstance(inner, exp.Column) else None
                found = Threshold(type(aggregate).__name__.lower(), ref, number)
                if found not in focus.thresholds:
                    focus.thresholds.append(found)
                if ref is not None and not isinstance(aggregate, exp.Count):
                    add_literal(ref, _whole(number))  # one row alone makes SUM(x), MAX(x) equal the number
        for column in node.find_all(exp.Column):
            focus.predicate_columns.add(_column(column, aliases))
    for select in tree.find_all(exp.Select):
        order = select.args.get("order")
        if select.args.get("limit") is not None or select.args.get("offset") is not None:
            focus.limit = True
            kept = sum(int(n) for n in (_number(select.args[k].expression) for k in ("limit", "offset")
                                        if select.args.get(k) is not None) if n is not None)
            focus.cut = max(focus.cut, kept)
        if order is not None:
            for ordered in order.expressions:
                key = _resolved(ordered.this, selected)
                if isinstance(key, exp.Column):
                    focus.sort_columns.add(_column(key, aliases))
                elif key.find(exp.AggFunc) is not None:
                    focus.aggregate_sort = True
                else:
                    focus.sort_columns |= {_column(c, aliases) for c in key.find_all(exp.Column)}
        if select.args.get("distinct"):
            focus.distinct_columns |= {_column(c, aliases) for e in select.expressions for c in e.find_all(exp.Column)}
        group = select.args.get("group")
        if group is not None:
            focus.distinct_columns |= {_column(c, aliases) for c in group.find_all(exp.Column)}
    for window in tree.find_all(exp.Window):
        focus.limit = True  # a ranking cuts its order as a LIMIT does
        for ordered in (window.args.get("order").expressions if window.args.get("order") else []):
            focus.sort_columns |= {_column(c, aliases) for c in ordered.find_all(exp.Column)}
    for aggregate in tree.find_all(exp.AggFunc):
        columns = {_column(c, aliases) for c in aggregate.find_all(exp.Column)}
        focus.aggregated_columns |= columns
        focus.predicate_columns |= columns
        if aggregate.find(exp.Distinct) is not None:
            focus.distinct_columns |= columns
    for join in tree.find_all(exp.Join):
        focus.joins += 1
        if (join.args.get("side") or "").upper() in ("LEFT", "RIGHT", "FULL"):
            focus.outer_join = True
        for column in (join.args.get("on") or exp.Null()).find_all(exp.Column):
            focus.predicate_columns.add(_column(column, aliases))
    return focus


# ---------------------------------------------------------------- two queries


def canonical(tree: exp.Expression, dialect: str) -> str:
    """The query's text with what never changes its rows left out: output column aliases (a
    reference to one read as its expression), and table aliases where each table is read once."""
    tree = tree.copy()
    selected = _select_aliases(tree)
    for node in list(tree.find_all(exp.Ordered, exp.Having)):
        for column in list(node.find_all(exp.Column)):
            if not column.table and column.name.lower() in selected:
                column.replace(selected[column.name.lower()].copy())
    for alias in list(tree.find_all(exp.Alias)):
        if isinstance(alias.parent, exp.Select) and alias.arg_key == "expressions":
            alias.replace(alias.this)
    tables = list(tree.find_all(exp.Table))
    names = Counter(t.name.lower() for t in tables)
    if all(n == 1 for n in names.values()) and not tree.find(exp.Subquery, exp.CTE, exp.Lateral):
        aliases = _aliases(tree)
        for column in tree.find_all(exp.Column):
            if column.table:
                column.set("table", exp.to_identifier(aliases.get(column.table.lower(), column.table.lower())))
        for table in tables:
            table.set("alias", None)
    return tree.sql(dialect=dialect, normalize=True, identify=False)


def _features(tree: exp.Expression) -> Counter[tuple[str, str]]:
    """Each kind of edit's marks in one tree: which literals, comparisons, joins, aggregates,
    sort keys and directions, limits, DISTINCT, groups and functions it has."""
    out: Counter[tuple[str, str]] = Counter()
    selected = _select_aliases(tree)
    for node in tree.walk():
        if isinstance(node, exp.Literal) and not isinstance(node.parent, exp.Limit | exp.Offset):
            out["literal", node.sql()] += 1
        elif isinstance(node, exp.Like | exp.ILike | exp.In | exp.Between):
            out["predicate", type(node).__name__] += 1
        elif isinstance(node, exp.Is):
            out["null", node.sql()] += 1
        elif isinstance(node, exp.Binary) and isinstance(node, exp.Predicate):
            out["comparison", type(node).__name__] += 1
        elif isinstance(node, exp.And | exp.Or | exp.Not):
            out["predicate", type(node).__name__] += 1
        elif isinstance(node, exp.Join):
            out["join", f"{node.args.get('side') or ''} {node.args.get('kind') or ''}"] += 1
        elif isinstance(node, exp.AggFunc):
            out["aggregate", f"{type(node).__name__} {node.find(exp.Distinct) is not None}"] += 1
        elif isinstance(node, exp.Ordered):
            key = _resolved(node.this, selected)
            out["order", f"{key.sql(normalize=True)} {bool(node.args.get('desc'))}"] += 1
        elif isinstance(node, exp.Limit | exp.Offset):
            out["limit", node.sql()] += 1
        elif isinstance(node, exp.Select) and node.args.get("distinct"):
            out["distinct", ""] += 1
        elif isinstance(node, exp.Group):
            out["group", node.sql(normalize=True)] += 1
        elif isinstance(node, exp.Func):
            out["function", type(node).__name__] += 1
        elif isinstance(node, exp.Column):
            out["other", node.name.lower()] += 1
    for comparison in tree.find_all(exp.Predicate):
        if any(isinstance(_resolved(s, selected), exp.AggFunc) for s in comparison.iter_expressions()):
            out["threshold", comparison.sql(normalize=True)] += 1
    return out


def difference(gold_sql: str, predicted_sql: str, dialect: str = "sqlite") -> Focus | None:
    """What the witness search leans on for a prediction against its gold: both queries' focus
    together, with the kinds of edit between them (``other`` where they differ in something
    unnamed). None where the two read the same once aliases are left out (nothing to search for),
    or where either cannot be parsed."""
    gold, predicted = parse(gold_sql, dialect), parse(predicted_sql, dialect)
    if gold is None or predicted is None:
        return None
    if canonical(gold, dialect) == canonical(predicted, dialect):
        return None
    a, b = _features(gold), _features(predicted)
    kinds = {kind for kind, _ in (a - b) + (b - a)}
    if any(isinstance(n, exp.Join) for n in gold.walk()) != any(isinstance(n, exp.Join) for n in predicted.walk()):
        kinds.add("join")
    focus = tree_focus(gold).merge(tree_focus(predicted))
    focus.kinds = kinds or {"other"}
    return focus


def merged(foci: Iterable[Focus | None]) -> Focus:
    out = Focus()
    for focus in foci:
        if focus is not None:
            out = out.merge(focus)
    return out


def resolve(column: ColumnRef, tables: Sequence[Any]) -> list[tuple[Any, int]]:
    """The (table, column index) pairs a query's column may be, among ``tables`` (``formats.Table``):
    its own table's where the query names it, else every table in the focus that has such a column."""
    table_name, name = column
    out = []
    for table in tables:
        if table_name is not None and table.name.lower() != table_name:
            continue
        for i, c in enumerate(table.columns):
            if c.name.lower() == name:
                out.append((table, i))
    return out
