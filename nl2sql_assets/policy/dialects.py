"""Where a database resolves a name differently from sqlglot's qualifier, told per dialect.

Each ``NameRules`` is applied to the parsed statement before it is qualified (``facts.py``):

* **SQLite's double-quoted strings.** A double-quoted token that names no column SQLite can
  see from where it stands is the string of its text (``WHERE Airline = "JetBlue Airways"``).
  SQLite looks in the FROM sources of the token's own SELECT, then (in WHERE, GROUP BY, HAVING
  and ORDER BY) at that SELECT's ``AS`` aliases, then outwards through the enclosing SELECTs of
  a correlated sub-query; only when nothing matches is the token a string. ``[x]`` and
  backticks are never strings. A token that names a column anywhere on that path stays that
  column, so a denied column is checked however it is quoted. Where the sources cannot be
  listed (an unknown table, a star over an unknown source) the token is left a name: the
  check then fails closed rather than guessing.
* **Pseudo-columns.** SQLite's ``rowid`` / ``oid`` / ``_rowid_`` and DuckDB's ``rowid`` name
  a row's id where the table has no real column of that name. A read of one is a read of the
  table's INTEGER PRIMARY KEY where it has one (SQLite makes that column the rowid), else of
  ``Table.rowid``: a role allowed the table (or ``*``) reads it, one allowed a list of the
  table's columns does not.

The database itself (``clone.py``) checks the outcome: a statement it cannot prepare is the
SQL's own error, and every read SQLite reports must be among the facts.
"""

from __future__ import annotations

import dataclasses
import functools

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from nl2sql_assets.datasources.schema import SchemaSnapshot, TableInfo

# Clauses of a SELECT where SQLite also resolves a bare name to one of the SELECT's aliases.
_ALIAS_CLAUSES = frozenset({"where", "group", "having", "order", "qualify"})


@dataclasses.dataclass(frozen=True)
class NameRules:
    """One dialect's name rules that sqlglot's qualifier does not apply itself."""

    dialect: str
    #: names of the row id a table offers when no real column has the name
    pseudo_columns: frozenset[str] = frozenset()
    #: whether a double-quoted token that names nothing is a string (SQLite's fallback)
    double_quoted_strings: bool = False
    #: whether an INTEGER PRIMARY KEY column is the row id itself (SQLite)
    integer_key_is_rowid: bool = False

    def apply(self, tree: exp.Expression, sql: str, snapshot: SchemaSnapshot) -> set[tuple[str, str]]:
        """Rewrite ``tree`` (parsed from ``sql``) in place: double-quoted strings become string
        literals, pseudo-columns NULL. Returns the (table, column) reads the pseudo-columns made."""
        if not self.pseudo_columns and not self.double_quoted_strings:
            return set()
        reads: set[tuple[str, str]] = set()
        for scope in list(traverse_scope(tree)):
            for column in list(scope.find_all(exp.Column)):
                if isinstance(column.this, exp.Star) or column.parent is None:
                    continue
                name = column.name.lower()
                if name in self.pseudo_columns and self._pseudo(scope, column, snapshot, reads):
                    continue
                if (self.double_quoted_strings and not column.table and _double_quoted(column.this, sql)
                        and not _Resolution(scope, snapshot, self).visible(name, column)):
                    column.replace(exp.Literal.string(column.this.this))
        return reads

    # ------------------------------------------------------------ pseudo-columns

    def _pseudo(self, scope: Scope, column: exp.Column, snapshot: SchemaSnapshot,
                reads: set[tuple[str, str]]) -> bool:
        """Replace a pseudo-column reference with NULL and record what it reads; False when the
        name is a real column (or SQLite would not take it), left for the qualifier."""
        name = column.name.lower()
        if column.table:
            source = _source_named(scope, column.table)
        else:
            if _Resolution(scope, snapshot, self, pseudo=False).real_column(name):
                return False
            sources = list(scope.selected_sources.values())
            if len(sources) != 1:
                return False  # SQLite: ambiguous (or no source); the database says so
            source = sources[0][1]
        if isinstance(source, exp.Table):
            info = _table_info(snapshot, source)
            if info is None or info.column(name) is not None:
                return False
            reads.add((info.name, self._rowid_column(info)))
        elif not isinstance(source, Scope):
            return False
        column.replace(exp.Null())
        return True

    def _rowid_column(self, info: TableInfo) -> str:
        if self.integer_key_is_rowid and len(info.primary_key) == 1:
            key = info.column(info.primary_key[0])
            if key is not None and key.type.strip().upper() == "INTEGER":
                return key.name
        return "rowid"


def _double_quoted(identifier: exp.Expression, sql: str) -> bool:
    """Whether the identifier was written ``"like this"`` (not ``[x]`` or backticks)."""
    if not isinstance(identifier, exp.Identifier) or not identifier.quoted:
        return False
    start = (identifier.meta or {}).get("start")
    return isinstance(start, int) and 0 <= start < len(sql) and sql[start] == '"'


def _table_info(snapshot: SchemaSnapshot, table: exp.Table) -> TableInfo | None:
    if not isinstance(table.this, exp.Identifier) or table.text("catalog") or \
            table.text("db").lower() not in snapshot.own_schemas:
        return None
    return snapshot.table(table.name)


def _source_named(scope: Scope, ref: str) -> exp.Table | Scope | None:
    ref = ref.lower()
    level: Scope | None = scope
    while level is not None:
        for name, (_node, source) in level.selected_sources.items():
            if name.lower() == ref:
                return source
        level = level.parent
    return None


def _clause_of(node: exp.Expression, select: exp.Expression) -> str | None:
    """The key of ``select``'s argument that holds ``node`` (``where``, ``order``, ...)."""
    while node.parent is not None and node.parent is not select:
        node = node.parent
    return node.arg_key if node.parent is select else None


class _Resolution:
    """What names SQLite sees from one scope outwards."""

    def __init__(self, scope: Scope, snapshot: SchemaSnapshot, rules: NameRules, *, pseudo: bool = True) -> None:
        self.scope = scope
        self.snapshot = snapshot
        self.rules = rules
        self.pseudo = pseudo  # whether a table's pseudo-columns count as names it offers

    def visible(self, name: str, column: exp.Expression) -> bool:
        """True when ``name`` resolves to a column or an alias (or cannot be ruled out)."""
        level: Scope | None = self.scope
        node: exp.Expression = column
        while level is not None:
            names = self.source_names(level)
            if names is None or name in names:
                return True
            select = level.expression
            if (isinstance(select, exp.Select) and _clause_of(node, select) in _ALIAS_CLAUSES
                    and name in {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}):
                return True
            if level.is_derived_table or level.is_cte:
                return False  # SQLite has no lateral: a FROM sub-query sees nothing outside
            node = level.expression
            level = level.parent
        return False

    def real_column(self, name: str) -> bool:
        names = self.source_names(self.scope)
        return names is None or name in names

    def source_names(self, scope: Scope) -> set[str] | None:
        """Every column name the scope's FROM sources offer (lower-cased); None when one
        source's columns cannot be listed."""
        out: set[str] = set()
        for _alias, (node, source) in scope.selected_sources.items():
            names = self.names_of(node, source)
            if names is None:
                return None
            out |= names
        return out

    def names_of(self, node: exp.Expression, source: exp.Table | Scope) -> set[str] | None:
        alias = node.args.get("alias") if isinstance(node, exp.Expression) else None
        if isinstance(alias, exp.TableAlias) and alias.columns:
            return {c.name.lower() for c in alias.columns}
        if isinstance(source, exp.Table):
            info = _table_info(self.snapshot, source)
            if info is None:
                return None
            return {c.name.lower() for c in info.columns} | (set(self.rules.pseudo_columns) if self.pseudo else set())
        return self.outputs(source)

    def outputs(self, scope: Scope) -> set[str] | None:
        """The column names a derived table or CTE offers its outer query."""
        expression = scope.expression
        if not isinstance(expression, exp.Select):
            branches = scope.set_operation_scopes
            return self.outputs(branches[0]) if branches else None
        out: set[str] = set()
        for item in expression.expressions:
            if isinstance(item, exp.Star):
                every = self.source_names(scope)
                if every is None:
                    return None
                out |= every
            elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
                match = scope.selected_sources.get(item.table) or next(
                    (v for k, v in scope.selected_sources.items() if k.lower() == item.table.lower()), None)
                names = self.names_of(*match) if match else None
                if names is None:
                    return None
                out |= names
            else:
                out.add(item.alias_or_name.lower())
        return out


@functools.cache
def name_rules(dialect: str) -> NameRules:
    """The rules of the engine that speaks ``dialect`` (``DatabaseEngine.pseudo_columns`` and the
    rest); a dialect no engine of ours speaks is qualified by sqlglot's rules alone."""
    from nl2sql_assets.datasources.engines import engine_for_dialect

    engine = engine_for_dialect(dialect)
    if engine is None:
        return NameRules(dialect=dialect)
    return NameRules(dialect=dialect, pseudo_columns=engine.pseudo_columns,
                     double_quoted_strings=engine.double_quoted_strings,
                     integer_key_is_rowid=engine.integer_key_is_rowid)
