"""Ties where the order decides: the gold with its sort keys appended (one row past its LIMIT), and
whether equal keys sit where the order decides what is returned. The gold audit flags such a gold
(``order_sensitive``); the witness search never measures a prediction against one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TieProbe:
    """The gold with its sort keys appended as columns (and one row past its LIMIT): the rows it
    gives show whether the sort keys tie where the order decides the result."""

    sql: str
    limit: int | None  # the gold's LIMIT (None: it has none; then only an order the case counts matters)
    keys: int  # sort keys appended, the last columns of each row


def tie_probe(sql: str, dialect: str = "sqlite", order_matters: bool = False) -> TieProbe | None:
    """The probe of a plain SELECT with ORDER BY, and a LIMIT or an order the case counts (None for
    anything else: DISTINCT, a compound query, no ORDER BY). ORDER BY keys that name a select alias
    or a position are read as the expression they stand for."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        return None
    order, limit = tree.args.get("order"), tree.args.get("limit")
    if not isinstance(tree, exp.Select) or order is None or tree.args.get("distinct"):
        return None
    n: int | None = None
    if limit is not None:
        value = limit.expression
        if not isinstance(value, exp.Literal) or value.is_string:
            return None
        n = int(value.this)
    elif not order_matters:
        return None
    selected = [e.this if isinstance(e, exp.Alias) else e for e in tree.expressions]
    aliases = {e.alias.lower(): e.this for e in tree.expressions if isinstance(e, exp.Alias)}
    keys = []
    for ordered in order.expressions:
        key = ordered.this
        if isinstance(key, exp.Literal) and not key.is_string and 1 <= int(key.this) <= len(selected):
            key = selected[int(key.this) - 1]
        elif isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases:
            key = aliases[key.name.lower()]
        keys.append(key.copy())
    probe = tree.copy()
    probe.set("expressions", [*probe.expressions, *(exp.alias_(k, f"tie_key_{i}") for i, k in enumerate(keys))])
    if n is not None:
        probe.set("limit", exp.Limit(expression=exp.Literal.number(n + 1)))
    return TieProbe(probe.sql(dialect=dialect), n, len(keys))


def unbroken_tie(rows: list[list[Any]], probe: TieProbe, order_matters: bool) -> bool:
    """Whether the sort keys (each row's last ``probe.keys`` values) tie where the order decides,
    between rows that read differently: across the LIMIT's cut (which of the tied rows is kept),
    or, where the case counts the order, between any two neighbouring rows it returns. Tied rows
    that show the same values are the same answer whichever comes first."""
    keys = [tuple(row[-probe.keys:]) for row in rows]
    shown = [tuple(row[:-probe.keys]) for row in rows]

    def ambiguous(i: int) -> bool:
        return keys[i] == keys[i + 1] and shown[i] != shown[i + 1]

    returned = len(keys) if probe.limit is None else min(probe.limit, len(keys))
    if probe.limit is not None and len(keys) > probe.limit > 0 and ambiguous(probe.limit - 1):
        return True
    return order_matters and any(ambiguous(i) for i in range(returned - 1))
