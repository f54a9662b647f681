"""The read-only guard: only one read query (SELECT, WITH ... SELECT, UNION ...) may reach a database.

It is the first of several layers: the adapters also open the database read-only, SQLite runs
under an authorizer and DuckDB re-checks with its own parser, so one layer's blind spot is not a hole.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from nl2sql_assets.datasources.base import QueryFailed, ReadOnlyViolation

if TYPE_CHECKING:
    from nl2sql_assets.datasources.engines import DatabaseEngine

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
    return _checked(sql, dialect)[0]


@functools.lru_cache(maxsize=2048)
def _checked(sql: str, dialect: str) -> tuple[str, exp.Expression | None]:
    """The SQL to run and its parsed tree (None where sqlglot cannot read it), or the guard's refusal."""
    return _check(sql, dialect)


def _check(sql: str, dialect: str) -> tuple[str, exp.Expression | None]:
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
        return cleaned, None
    if len(parsed) != 1:
        raise ReadOnlyViolation(f"{len(parsed)} statements in one string: {_HINT}")
    root = parsed[0]
    if not isinstance(root, _ALLOWED_ROOTS):
        raise ReadOnlyViolation(f"{_describe(root)} statement refused: {_HINT}")
    for node in root.walk():
        if isinstance(node, _FORBIDDEN):
            raise ReadOnlyViolation(f"{_describe(node)} inside the query refused: {_HINT}")
    return cleaned, root


# ---------------------------------------------------------------- what a server statement may call


def function_name(node: exp.Expression) -> str:
    """The name a function call is known by to the checks: an unknown function's own name, lower
    case, else sqlglot's canonical name for it (``STRPOS`` and ``POSITION`` are ``str_position``)."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return type(node).__name__.lower()


def function_names(tree: exp.Expression) -> set[str]:
    """Every function a statement calls (scalar, aggregate, window and table functions)."""
    return {function_name(node) for node in tree.find_all(exp.Func)}


@functools.lru_cache(maxsize=16)
def allowed_function_names(engine: DatabaseEngine) -> frozenset[str] | None:
    """The names of the functions ``engine`` lets a statement call, read off its ``allowed_calls``
    (None: the engine keeps no allow-list)."""
    if engine.allowed_calls is None:
        return None
    return frozenset(function_names(sqlglot.parse_one(engine.allowed_calls, read=engine.dialect)))


def check_server_statement(sql: str, engine: DatabaseEngine) -> str:
    """The guard (``check_read_only``) and what a read-only transaction on ``engine``'s server does
    not stop besides: text the checks cannot read, the engine's executable comments, a function it
    does not allow (or lists as dangerous), locking reads, session variables and its system
    catalogs. Returns the SQL to run. Cached, like the guard; the statement is parsed once."""
    return _server_check(sql, engine)


@functools.lru_cache(maxsize=2048)
def _server_check(sql: str, engine: DatabaseEngine) -> str:
    hint = f"only a read of the datasource's own tables, with the functions a data question needs, runs on {engine.label}"
    for marker in engine.refused_text:
        if marker in sql:
            raise ReadOnlyViolation(f"{marker} ... */ refused: {engine.label} runs what such a comment holds; {hint}")
    cleaned, tree = _checked(sql, engine.dialect)
    if tree is None:
        try:
            sqlglot.parse_one(cleaned, read=engine.dialect)
            reason = "not one query"
        except sqlglot.errors.SqlglotError as exc:
            reason = " ".join(str(exc).split())[:200]
        raise ReadOnlyViolation(f"the statement cannot be read as {engine.dialect} SQL ({reason}); a statement the "
                                f"checks cannot read does not run on a server") from None
    for node in tree.walk():
        if isinstance(node, exp.Lock):
            raise ReadOnlyViolation(f"{node.sql(dialect=engine.dialect)} refused: a read takes no lock on "
                                    f"{engine.label}; {hint}")
        if isinstance(node, exp.SessionParameter | exp.Parameter | exp.Placeholder):
            raise ReadOnlyViolation(f"{node.sql(dialect=engine.dialect)} refused: server and session variables "
                                    f"are not the datasource's data; {hint}")
    called = function_names(tree)
    allowed = allowed_function_names(engine)
    dangerous = set(engine.dangerous_functions) | set(engine.system_functions)
    refused = sorted(f for f in called if f in dangerous or f.startswith(engine.system_prefixes)
                     or (allowed is not None and f not in allowed))
    if refused:
        raise ReadOnlyViolation(f"function(s) {', '.join(f + '()' for f in refused)} refused: {hint}")
    for table in tree.find_all(exp.Table):
        parts = {table.name.lower(), table.text("db").lower(), table.text("catalog").lower()} - {""}
        if parts & engine.system_schemas or any(p.startswith(engine.system_prefixes) for p in parts):
            raise ReadOnlyViolation(f"{table.sql(dialect=engine.dialect)} refused: the system catalog is not "
                                    f"the datasource's; {hint}")
    return cleaned

