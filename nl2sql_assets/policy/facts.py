"""What one SQL statement reads, resolved the way the database resolves it.

``analyse`` parses the exact text the executor will run, qualifies it against the datasource's
schema with sqlglot's optimizer (the dialect's own rules for aliases, CTEs, correlated
sub-queries and stars), then walks every scope and records each schema table and
``Table.Column`` it reads. Rules (``policy/rules.py``) judge these facts; nothing here decides.

Where sqlglot and the engines may disagree, the facts over-approximate, never under:

* A select alias that shadows a column of the query's own tables counts as reading that
  column too, wherever it is used, except as a bare ORDER BY key (``ORDER BY name`` or
  ``ORDER BY (name)``), the one place SQLite and DuckDB both read the alias. Inside an
  expression (``ORDER BY (customer_id = 17)``) both engines read the real column, while
  sqlglot's qualifier keeps the alias.
* A name that cannot be pinned to one source (qualification fails, or a column is left with
  no table and is not a select alias), a star that cannot be expanded, DuckDB's
  ``COLUMNS(...)``, ``#n`` and whole-row references are all recorded as unresolved.

The result is cached per (SQL, dialect, schema fingerprint): evaluation runs send the same
SQL for every role.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema

from nl2sql_assets.datasources.guard import function_name, function_names
from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.policy import clone
from nl2sql_assets.policy.dialects import name_rules

_SHADOW_META = "nl2sql_shadowed"


@dataclasses.dataclass(frozen=True)
class TableRef:
    """A table named in FROM or JOIN, as written (lower-cased), before any resolution."""

    name: str
    db: str = ""
    catalog: str = ""
    function: bool = False  # a table function: ``read_csv(...)``, ``pragma_table_info(...)``


@dataclasses.dataclass(frozen=True)
class QueryFacts:
    """What a statement reads. ``tables`` and ``columns`` use the schema's own spelling."""

    sql: str
    dialect: str
    parse_error: str | None = None
    #: every FROM/JOIN source the text names (CTE names excluded)
    table_refs: tuple[TableRef, ...] = ()
    #: every function called, lower-cased (scalar, aggregate, window and table functions)
    functions: frozenset[str] = frozenset()
    #: why the statement's names do not resolve (empty when they all do)
    unresolved: tuple[str, ...] = ()
    #: the database's own message when it cannot prepare the statement against the schema (the
    #: SQL is wrong: an unknown or ambiguous name, bad syntax); None when it can, or was not asked
    database_error: str | None = None
    tables: frozenset[str] = frozenset()
    columns: frozenset[tuple[str, str]] = frozenset()
    #: per SELECT, the schema tables its FROM and JOINs bring together, through derived tables,
    #: CTEs, set operations and laterals (a sub-query in WHERE or the select list is its own)
    joins: tuple[frozenset[str], ...] = ()
    #: the outermost LIMIT (or FETCH FIRST) as a row count; None when there is none
    limit: int | None = None
    #: why the outermost LIMIT fixes no row count (a percentage, an expression); None otherwise
    limit_unbounded: str | None = None
    #: the qualified tree, for rules that need more than names (never mutate it)
    tree: exp.Expression | None = None

    @property
    def column_names(self) -> list[str]:
        return sorted(f"{t}.{c}" for t, c in self.columns)


# ---------------------------------------------------------------- schema and cache

_schema_lock = threading.Lock()
_schemas: OrderedDict[tuple[int, str], tuple[SchemaSnapshot, str, MappingSchema]] = OrderedDict()


def _schema_entry(schema: SchemaSnapshot, dialect: str) -> tuple[str, MappingSchema]:
    """The snapshot's fingerprint and sqlglot schema, kept per (snapshot object, dialect); a
    strong reference is held, so an id is never reused while its entry lives."""
    key = (id(schema), dialect)
    with _schema_lock:
        entry = _schemas.get(key)
        if entry is not None and entry[0] is schema:
            _schemas.move_to_end(key)
            return entry[1], entry[2]
    fingerprint = schema.fingerprint()
    # Tables of other schemas (``other.t``) are left out: names there never resolve (fail closed).
    tables = {t.name: {c.name: "TEXT" for c in t.columns} for t in schema.tables if "." not in t.name and t.columns}
    mapping = MappingSchema(tables, dialect=dialect)
    with _schema_lock:
        _schemas[key] = (schema, fingerprint, mapping)
        while len(_schemas) > 32:
            _schemas.popitem(last=False)
    return fingerprint, mapping


#: a server's own word on a statement it never runs: (its error, or the (table, column) pairs it reads)
DatabaseWord = Callable[[str], tuple[str | None, frozenset[tuple[str, str]] | None]]


def analyse(sql: str, dialect: str, schema: SchemaSnapshot, database: DatabaseWord | None = None) -> QueryFacts:
    """The facts of ``sql`` in ``dialect`` against ``schema`` (cached; never raises). ``database``:
    a server's own word on the statement (``statement_reads`` of its adapter), which the facts
    must cover, as SQLite's and DuckDB's in-memory copies are asked (``clone``)."""
    fingerprint, mapping = _schema_entry(schema, dialect)
    return _analyse_cached(sql, dialect, fingerprint, database is not None, _Schema(schema, mapping, database))


class _Schema:
    """Carries the snapshot into the cached function without making it part of the key."""

    __slots__ = ("database", "mapping", "snapshot")

    def __init__(self, snapshot: SchemaSnapshot, mapping: MappingSchema, database: DatabaseWord | None) -> None:
        self.snapshot = snapshot
        self.mapping = mapping
        self.database = database

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Schema)  # the fingerprint in the key already tells schemas apart


def _prepared(sql: str, dialect: str, schema: _Schema, fingerprint: str) -> clone.Prepared | None:
    """The database's own word: the server's, where the caller brought it, else the in-memory copy's."""
    if schema.database is not None:
        error, reads = schema.database(sql)
        return clone.Prepared(error=error, reads=reads)
    return clone.prepare(sql, dialect, schema.snapshot, fingerprint)


@functools.lru_cache(maxsize=4096)
def _analyse_cached(sql: str, dialect: str, fingerprint: str, asked_database: bool, schema: _Schema) -> QueryFacts:
    facts = _analyse(sql, dialect, schema.snapshot, schema.mapping)
    if facts.parse_error is not None and not facts.parse_error.startswith("not a query"):
        # sqlglot could not read it: the database says whether the SQL itself is wrong
        prepared = _prepared(sql, dialect, schema, fingerprint)
        if prepared is not None and prepared.error is not None:
            return dataclasses.replace(facts, database_error=prepared.error)
        return facts
    prepared = _prepared(sql, dialect, schema, fingerprint)
    if prepared is None:
        return facts
    if prepared.error is not None:
        return dataclasses.replace(facts, database_error=prepared.error)
    missed = _missed_reads(facts, prepared.reads or frozenset(), schema.snapshot)
    if missed:
        note = f"the database reads {', '.join(missed)}, which the analysis did not find"
        return dataclasses.replace(facts, unresolved=(*facts.unresolved, note))
    return facts


def _missed_reads(facts: QueryFacts, reads: frozenset[tuple[str, str]], snapshot: SchemaSnapshot) -> list[str]:
    """The reads SQLite's compiler reported that the facts do not hold (by schema spelling)."""
    tables = {t.lower() for t in facts.tables}
    columns = {(t.lower(), c.lower()) for t, c in facts.columns}
    missed = []
    for table, column in sorted(reads):
        info = snapshot.table(table)
        name = info.name if info is not None else table
        if column == "":
            if name.lower() not in tables:
                missed.append(name)
        elif column.upper() == "ROWID":
            if (name.lower(), "rowid") not in columns:
                missed.append(f"{name}.rowid")
        elif (name.lower(), column.lower()) not in columns:
            missed.append(f"{name}.{column}")
    return missed


# ---------------------------------------------------------------- the analysis


def _analyse(sql: str, dialect: str, snapshot: SchemaSnapshot, mapping: MappingSchema) -> QueryFacts:
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except Exception as exc:  # sqlglot's own errors, and anything else it trips on: refused, never raised
        return QueryFacts(sql=sql, dialect=dialect, parse_error=_first_line(exc))
    if len(statements) != 1:
        return QueryFacts(sql=sql, dialect=dialect, parse_error=f"{len(statements)} statements, expected one query")
    tree = statements[0]
    if not isinstance(tree, exp.Query):
        return QueryFacts(sql=sql, dialect=dialect, parse_error=f"not a query ({type(tree).__name__})")

    table_refs = _table_refs(tree)
    functions = frozenset(_function_names(tree))
    limit, limit_unbounded = _outer_limit(tree)
    unresolved: list[str] = [f"{o}" for o in _opaque_references(tree)]

    try:
        pseudo_reads = name_rules(dialect).apply(tree, sql, snapshot)
        _mark_shadowed_aliases(tree)
        qualified = qualify(  # in place: the tree was parsed for this analysis alone
            tree,
            dialect=dialect,
            schema=mapping,
            expand_stars=True,
            validate_qualify_columns=True,
            quote_identifiers=False,
            identify=False,
        )
    except Exception as exc:  # fail closed: a statement sqlglot cannot qualify is not allowed
        unresolved.append(f"cannot resolve the names: {_first_line(exc)}")
        return QueryFacts(sql=sql, dialect=dialect, table_refs=table_refs, functions=functions,
                          unresolved=tuple(unresolved), limit=limit, limit_unbounded=limit_unbounded)

    reads = _Reads(snapshot)
    try:
        for scope in traverse_scope(qualified):
            reads.scope(scope)
    except Exception as exc:
        reads.unresolved.append(f"cannot walk the query's scopes: {_first_line(exc)}")
    unresolved.extend(reads.unresolved)
    for table, column in pseudo_reads:
        reads.tables.add(table)
        reads.columns.add((table, column))
    return QueryFacts(
        sql=sql,
        dialect=dialect,
        table_refs=table_refs,
        functions=functions,
        unresolved=tuple(dict.fromkeys(unresolved)),
        tables=frozenset(reads.tables),
        columns=frozenset(reads.columns),
        joins=tuple(dict.fromkeys(reads.joins)),
        limit=limit,
        limit_unbounded=limit_unbounded,
        tree=qualified,
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


def _lower(node: exp.Expression | str | None) -> str:
    if node is None:
        return ""
    return (node if isinstance(node, str) else node.name).lower()


def _table_refs(tree: exp.Expression) -> tuple[TableRef, ...]:
    """Every FROM/JOIN source as written, except references to a CTE of the statement."""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    refs: list[TableRef] = []
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            refs.append(TableRef(name=_func_name(table.this), db=_lower(table.text("db")),
                                 catalog=_lower(table.text("catalog")), function=True))
            continue
        name, db, catalog = table.name.lower(), table.text("db").lower(), table.text("catalog").lower()
        if not db and not catalog and name in ctes:
            continue
        refs.append(TableRef(name=name, db=db, catalog=catalog))
    return tuple(dict.fromkeys(refs))


_func_name = function_name
_function_names = function_names


def _opaque_references(tree: exp.Expression) -> list[str]:
    """References whose columns cannot be named before they run: DuckDB's ``COLUMNS(...)``,
    positional ``#n``, and a star filtered by a pattern (``* LIKE 'c%'``)."""
    found = []
    for node in tree.walk():
        if isinstance(node, exp.Columns):
            found.append("COLUMNS(...) selects columns by pattern")
        elif isinstance(node, exp.PositionalColumn):
            found.append(f"positional column reference {node.sql()}")
        elif isinstance(node, exp.Star) and not isinstance(node.parent, exp.Select | exp.Count | exp.Column):
            found.append(f"'*' used in {type(node.parent).__name__}")
    return found


def _outer_limit(tree: exp.Expression) -> tuple[int | None, str | None]:
    """(rows, why unbounded) of the statement's outermost LIMIT or FETCH FIRST: the cap on what
    it returns. A percentage or an expression fixes no row count."""
    node = tree.args.get("limit")
    if node is None:
        return None, None
    options = node.args.get("limit_options")
    if options is not None and options.args.get("percent"):
        return None, f"{node.sql()} is a share of the rows, not a row count"
    value = node.args.get("count") if isinstance(node, exp.Fetch) else node.args.get("expression")
    if isinstance(value, exp.Literal) and not value.is_string:
        try:
            number = float(value.this)
        except ValueError:
            number = math.nan
        if number.is_integer() and number >= 0:
            return int(number), None
    return None, f"{node.sql()} is not a plain row count"


def _bare_order_key(column: exp.Column, select: exp.Expression) -> bool:
    """``ORDER BY name`` (or ``(name)``) directly under the SELECT: SQL reads the select alias."""
    node: exp.Expression = column
    while isinstance(node.parent, exp.Paren):
        node = node.parent
    ordered = node.parent
    return (
        isinstance(ordered, exp.Ordered)
        and ordered.this is node
        and isinstance(ordered.parent, exp.Order)
        and ordered.parent.parent is select
    )


def _mark_shadowed_aliases(tree: exp.Expression) -> None:
    """Note, on each SELECT, the select aliases it uses anywhere but as a bare ORDER BY key.
    After qualification, those names also count as reads of any same-named column."""
    for scope in traverse_scope(tree):
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias) and e.alias}
        if not aliases:
            continue
        used = set()
        for column in scope.find_all(exp.Column):
            if column.table or column.name.lower() not in aliases:
                continue
            parent = column.parent
            if isinstance(parent, exp.Alias) and parent.parent is select:
                continue  # the select item itself (``x AS x``): a plain read, qualified as such
            if _bare_order_key(column, select):
                continue
            used.add(column.name.lower())
        if used:
            select.meta[_SHADOW_META] = frozenset(used)


class _Reads:
    """Collects, scope by scope, the schema tables and columns the qualified query reads."""

    def __init__(self, snapshot: SchemaSnapshot) -> None:
        self.snapshot = snapshot
        self.tables: set[str] = set()
        self.columns: set[tuple[str, str]] = set()
        self.joins: list[frozenset[str]] = []
        self.unresolved: list[str] = []

    def scope(self, scope: Scope) -> None:
        for _name, (_node, source) in scope.selected_sources.items():
            if isinstance(source, exp.Table):
                self.table(source)
        if isinstance(scope.expression, exp.Select):
            joined = self.joined(scope)
            if len(joined) > 1:
                self.joins.append(frozenset(joined))
        select = scope.expression
        for column in scope.find_all(exp.Column):
            if isinstance(column.this, exp.Star):
                if not isinstance(column.parent, exp.Count):
                    self.unresolved.append(f"'{column.sql()}' could not be expanded")
                continue
            if column.table:
                self.qualified(scope, column)
            else:
                self.unqualified(scope, column)
        for whole_row in scope.find_all(exp.TableColumn):
            self.whole_row(scope, whole_row)
        for name in select.meta.get(_SHADOW_META, ()) if select.meta else ():
            self.shadowed(scope, name)
        for star in scope.find_all(exp.Star):
            if isinstance(star.parent, exp.Select):
                self.unresolved.append("'*' could not be expanded")

    def joined(self, scope: Scope) -> set[str]:
        """The schema tables one SELECT's FROM and JOINs bring together: a derived table, a CTE,
        a set operation or a lateral counts with every table it reaches this way."""
        out: set[str] = set()
        if isinstance(scope.expression, exp.Select):
            for _name, (_node, source) in scope.selected_sources.items():
                if isinstance(source, exp.Table):
                    info = self.snapshot.table(source.name) if isinstance(source.this, exp.Identifier) else None
                    if info is not None:
                        out.add(info.name)
                elif isinstance(source, Scope):
                    out |= self.joined(source)
            return out
        # A set operation or a lateral: everything its own scopes reach.
        for child in (*scope.set_operation_scopes, *scope.subquery_scopes, *scope.derived_table_scopes,
                      *scope.udtf_scopes):
            out |= self.joined(child)
        return out

    def table(self, source: exp.Table) -> str | None:
        if not isinstance(source.this, exp.Identifier):
            return None  # a table function: judged by its name, by the rules
        db, catalog = source.text("db").lower(), source.text("catalog").lower()
        info = self.snapshot.named(source.name) if db in self.snapshot.own_schemas and not catalog else None
        if info is None:
            self.unresolved.append(f"table {source.sql()} is not in the datasource's schema")
            return None
        self.tables.add(info.name)
        return info.name

    def column_of(self, source: exp.Table, name: str) -> tuple[str, str] | None:
        table = self.table(source)
        if table is None:
            return None
        info = self.snapshot.named(table)
        col = info.column(name, self.snapshot.exact_names) if info is not None else None
        return (table, col.name) if col is not None else None

    @staticmethod
    def source(scope: Scope, ref: str) -> exp.Table | Scope | None:
        """The source a table alias names: in this scope, else the nearest enclosing one."""
        ref = ref.lower()
        s: Scope | None = scope
        while s is not None:
            for name, (_node, source) in s.selected_sources.items():
                if name.lower() == ref:
                    return source
            s = s.parent
        return None

    def qualified(self, scope: Scope, column: exp.Column) -> None:
        source = self.source(scope, column.table)
        if source is None:
            self.unresolved.append(f"column {column.sql()} names no table in scope")
        elif isinstance(source, exp.Table):
            read = self.column_of(source, column.name)
            if read is None:
                self.unresolved.append(f"column {column.sql()} is not in the datasource's schema")
            else:
                self.columns.add(read)
        # else a CTE or derived table: its own scope is checked where it is defined

    def whole_row(self, scope: Scope, node: exp.TableColumn) -> None:
        """DuckDB's ``SELECT t FROM tickets t``: the row as a struct, so every column of ``t``."""
        source = self.source(scope, node.name)
        if source is None:
            self.unresolved.append(f"whole-row reference {node.sql()} names no table in scope")
        elif isinstance(source, exp.Table):
            table = self.table(source)
            info = self.snapshot.table(table) if table is not None else None
            if info is not None:
                self.columns.update((info.name, c.name) for c in info.columns)

    def unqualified(self, scope: Scope, column: exp.Column) -> None:
        expression = scope.expression
        names = {n.lower() for n in expression.named_selects} if isinstance(expression, exp.Query) else set()
        if column.name.lower() not in names:
            self.unresolved.append(f"column {column.sql()} could not be pinned to a table")

    def shadowed(self, scope: Scope, name: str) -> None:
        """Every same-named column of the nearest scope whose tables have one counts as read."""
        s: Scope | None = scope
        while s is not None:
            hits = []
            for _alias, (_node, source) in s.selected_sources.items():
                if isinstance(source, exp.Table):
                    read = self.column_of(source, name)
                    if read is not None:
                        hits.append(read)
                elif (isinstance(source, Scope) and isinstance(source.expression, exp.Query)
                      and name in {n.lower() for n in source.expression.named_selects}):
                    hits.append(("", name))
            if hits:
                self.columns.update(h for h in hits if h[0])
                return
            s = s.parent
