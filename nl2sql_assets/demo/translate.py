"""The shipped suites moved to a server: their SQL translated from the engine it was written for
into the server's dialect.

sqlglot does the translation (``strftime`` becomes ``TO_CHAR`` or ``DATE_FORMAT``, ``||`` becomes
``CONCAT`` on MySQL), then the rules it does not apply itself, each a difference between the
engines a user moving SQL meets:

* a derived table without an alias (``FROM (SELECT ...)``) gets one: Postgres before 16 and MySQL
  refuse it unnamed, SQLite and DuckDB do not;
* SQLite's ``DATE(x)`` (the text ``YYYY-MM-DD``) becomes ``CAST(x AS DATE)``, which every server
  has and which reads back as the same text;
* SQLite's ``LIKE`` ignores letter case: it becomes ``ILIKE`` where the server's ``LIKE`` does not
  (Postgres), as the engine's SQL generator renders a plan's ``like``;
* ORDER BY places NULLs, and ``x / 0`` is treated, as the server itself does (what SQL written for it
  by hand gets, and what the SQL generator renders a plan as), not spelled out as SQLite's: neighbour
  databases hold NULLs and empty tables, where a gold and its plan must not part on the dialect;

and, for a server that folds unquoted names to lower case (Postgres), every name is written in
lower case, as the demo's tables there are named. Hand-written plans move too: where ``/`` divides
integers as integers on the server (Postgres) and did not where the plan was written (DuckDB),
each division's left side is cast to ``real``. ``REVIEWED`` holds the SQL written by hand where
the translation still reads differently on the server; none is needed for the shipped suites
today (every answerable case gives the original's rows; ``tests/servers`` checks it on both servers).
"""

from __future__ import annotations

from typing import Any

import sqlglot
from pydantic import BaseModel
from sqlglot import exp

from nl2sql_assets.datasources.engines import engine_for_dialect
from nl2sql_assets.engine.plan import BinaryExpr, CastExpr, PlanModel
from nl2sql_assets.evaluation.suites.model import EarlierTurn, EvalCase, EvalSuite

#: (server engine, case id, what) -> SQL reviewed by hand, where sqlglot's translation is wrong;
#: ``what`` is ``sql``, ``alt_sql[i]`` or ``turns[i]`` (0-based)
REVIEWED: dict[tuple[str, str, str], str] = {}


def translate_sql(sql: str, source: str, target: str, *, fold_names: bool = False) -> str:
    """``sql`` written for ``source`` (a sqlglot dialect) as ``target`` writes it."""
    tree = sqlglot.parse_one(sql, read=source)
    for n, subquery in enumerate(list(tree.find_all(exp.Subquery))):
        if isinstance(subquery.parent, exp.From | exp.Join) and not subquery.alias:
            subquery.set("alias", exp.TableAlias(this=exp.to_identifier(f"derived_{n + 1}")))
    if source == "sqlite":
        for node in list(tree.find_all(exp.Date)):
            args = [a for a in (node.this, *node.expressions) if a is not None]
            if len(args) == 1:
                node.replace(exp.Cast(this=args[0], to=exp.DataType.build("DATE")))
        if engine_for_dialect(target).sql_style.like == "ILIKE":  # SQLite's LIKE ignores letter case
            for like in list(tree.find_all(exp.Like)):
                like.replace(exp.ILike(this=like.this, expression=like.expression))
    _native_nulls_and_division(tree, target)
    if fold_names:
        for ident in tree.find_all(exp.Identifier):
            ident.set("this", ident.this.lower())
    return tree.sql(dialect=target, pretty=True)


def _native_nulls_and_division(tree: exp.Expression, target: str) -> None:
    """ORDER BY's NULLs placed, and ``x / 0`` treated, as the target engine does by itself: what
    SQL written by hand for it gets, and what the engine's SQL generator renders a plan as (sqlglot
    would otherwise spell the source's placement out, and guard each division with NULLIF)."""
    from sqlglot.dialects.dialect import Dialect

    ordering = Dialect.get_or_raise(target).NULL_ORDERING
    for ordered in tree.find_all(exp.Ordered):
        desc = bool(ordered.args.get("desc"))
        ordered.set("nulls_first", {"nulls_are_small": not desc, "nulls_are_large": desc,
                                    "nulls_are_first": True, "nulls_are_last": False}.get(ordering, False))
    for division in tree.find_all(exp.Div):
        division.set("safe", False)


def translate_plan(plan: PlanModel, source: str, target: str) -> PlanModel:
    """A hand-written plan as it means on ``source``, for ``target`` (sqlglot dialects): where
    ``/`` divides integers as integers on the target (Postgres) and not on the source (DuckDB),
    each division's left side is cast to ``real`` first, as the translated gold SQL does."""
    if engine_for_dialect(source).sql_style.integer_division or \
            not engine_for_dialect(target).sql_style.integer_division:
        return plan

    def visit(node: Any) -> Any:
        if isinstance(node, BaseModel):
            updates = {name: visit(getattr(node, name)) for name in type(node).model_fields}
            node = node.model_copy(update=updates)
            if isinstance(node, BinaryExpr) and node.op == "/" and not (
                    isinstance(node.left, CastExpr) and node.left.to == "real"):
                node = node.model_copy(update={"left": CastExpr(arg=node.left, to="real")})
            return node
        if isinstance(node, list):
            return [visit(item) for item in node]
        return node

    return visit(plan)


def translate_case(case: EvalCase, source: str, target_engine: str, target: str, *,
                   fold_names: bool = False) -> tuple[EvalCase, bool]:
    """``case`` with every piece of its SQL (gold, alternatives, a probe's, earlier turns')
    translated; True when a reviewed fix stood in for the translation."""
    fixed = False

    def one(sql: str, what: str) -> str:
        nonlocal fixed
        reviewed = REVIEWED.get((target_engine, case.id, what))
        if reviewed is not None:
            fixed = True
            return reviewed
        return translate_sql(sql, source, target, fold_names=fold_names)

    update: dict[str, object] = {}
    if case.plan is not None:
        update["plan"] = translate_plan(case.plan, source, target)
    if case.candidate_plans:
        update["candidate_plans"] = [translate_plan(p, source, target) for p in case.candidate_plans]
    if case.sql is not None:
        update["sql"] = one(case.sql, "sql")
    if case.alt_sql:
        update["alt_sql"] = [one(sql, f"alt_sql[{i}]") for i, sql in enumerate(case.alt_sql)]
    if case.turns:
        update["turns"] = [EarlierTurn(question=t.question,
                                       plan=translate_plan(t.plan, source, target) if t.plan else None,
                                       sql=one(t.sql, f"turns[{i}]") if t.sql else None)
                           for i, t in enumerate(case.turns)]
    return case.model_copy(update=update), fixed


def translate_suite(suite: EvalSuite, sources: dict[str, str], target_engine: str, target: str, *,
                    fold_names: bool = False) -> tuple[EvalSuite, list[str]]:
    """``suite`` with every case of the datasources in ``sources`` (id -> the dialect its SQL is
    written in) translated; the ids of the cases a reviewed fix stood in for."""
    cases, fixed = [], []
    for case in suite.cases:
        if len(case.datasources) == 1 and case.datasources[0] in sources:
            case, by_hand = translate_case(case, sources[case.datasources[0]], target_engine, target,
                                           fold_names=fold_names)
            if by_hand:
                fixed.append(case.id)
        cases.append(case)
    out = suite.model_copy(update={"cases": cases})
    out._path, out._header = suite.path, suite.header
    return out, fixed
