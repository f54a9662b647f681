"""The read-only guard: only one read query (SELECT, WITH ... SELECT, UNION ...) may reach a database.

It is the first of several layers: the adapters also open the database read-only, SQLite runs
under an authorizer and DuckDB re-checks with its own parser, so one layer's blind spot is not a hole.
"""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from nl2sql_assets.datasources.base import QueryFailed, ReadOnlyViolation

# Keywords a read query may start with (after any opening parentheses).
READ_STARTS = frozenset({"SELECT", "WITH", "VALUES", "FROM"})

_ALLOWED_ROOTS: tuple[type[exp.Expression], ...] = (exp.Query, exp.Values)

_FORBIDDEN_NAMES = (
    "Insert", "Update", "Delete", "Merge", "Copy", "Create", "Drop", "Alter", "Command", "Pragma",
    "Attach", "Detach", "Install", "Set", "Use", "TruncateTable", "Transaction", "Commit",
    "Rollback", "Into", "LoadData", "Export", "Grant", "Revoke", "Kill", "Refresh", "Cache", "Uncache",
)  # fmt: skip
# getattr: the sqlglot range the package accepts does not have every class in every version.
_FORBIDDEN: tuple[type[exp.Expression], ...] = tuple(
    cls for name in _FORBIDDEN_NAMES if isinstance(cls := getattr(exp, name, None), type)
)

_HINT = "only a single read query (SELECT, WITH ... SELECT, UNION ...) may run"


def _describe(node: exp.Expression) -> str:
    if isinstance(node, exp.Command):
        return str(node.this).upper() or "COMMAND"
    if isinstance(node, exp.Into):
        return "SELECT ... INTO"
    return type(node).__name__.upper()


def check_read_only(sql: str, dialect: str) -> str:
    """Refuse anything but one read query; return the SQL to run (a trailing ``;`` removed).

    Raises ReadOnlyViolation for writes, DDL, ATTACH, PRAGMA, SET, COPY, INSTALL/LOAD and for
    several statements in one string; QueryFailed for text that is not SQL at all. A query that
    starts like a read but that sqlglot cannot parse is passed on: the database reports its own
    syntax error, and its read-only layers still hold. Accepted statements are remembered, since
    evaluation runs send the same SQL again and again.
    """
    return _check_cached(sql, dialect)


@functools.lru_cache(maxsize=2048)
def _check_cached(sql: str, dialect: str) -> str:
    return _check(sql, dialect)


def _check(sql: str, dialect: str) -> str:
    engine = sqlglot.Dialect.get_or_raise(dialect)
    try:
        tokens = engine.tokenize(sql)
    except TokenError as exc:
        raise QueryFailed(f"the SQL could not be read: {exc}") from None

    statements: list[list] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            statements.append([])
        else:
            statements[-1].append(token)
    statements = [s for s in statements if s]
    if not statements:
        raise QueryFailed("the SQL is empty")
    if len(statements) > 1:
        raise ReadOnlyViolation(f"{len(statements)} statements in one string: {_HINT}")

    first = next((t for t in statements[0] if t.token_type != TokenType.L_PAREN), statements[0][0])
    word = first.text.upper()
    if word not in READ_STARTS:
        raise ReadOnlyViolation(f"{word or 'this'} statement refused: {_HINT}")

    # Run the text without trailing semicolons (sqlite3 counts ';;' as a second statement).
    cleaned = sql.rstrip().rstrip(";").rstrip()

    try:
        parsed = [p for p in engine.parser().parse(tokens, sql) if p is not None]
    except ParseError:
        return cleaned
    if len(parsed) != 1:
        raise ReadOnlyViolation(f"{len(parsed)} statements in one string: {_HINT}")
    root = parsed[0]
    if not isinstance(root, _ALLOWED_ROOTS):
        raise ReadOnlyViolation(f"{_describe(root)} statement refused: {_HINT}")
    for node in root.walk():
        if isinstance(node, _FORBIDDEN):
            raise ReadOnlyViolation(f"{_describe(node)} inside the query refused: {_HINT}")
    return cleaned
