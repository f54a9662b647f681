"""The database engines: one object per kind of database, registered once, the one place that knows
the kinds.

An engine object says how its datasources are configured (a file's ``path``, or a server's URL
whose secret part lives in the environment), opens the read-only, bounded adapter for one, names
its sqlglot dialect, and says what its SQL may not touch (system catalogs, and the functions no
role may call) and how its names resolve. Everything else asks the engine by the datasource's
``engine`` name (``engine_of(cfg.engine)``); nothing outside the engine modules branches on it.

Each kind is a module that defines its engine; ``KINDS`` maps a name to that module, so a kind is
imported only when a datasource of it is used (DuckDB's and the server drivers are heavy). Adding
SQL Server or Snowflake is one new module and one line here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from nl2sql_assets.config import ConfigError, DatasourceConfig, ProjectConfig

if TYPE_CHECKING:
    from nl2sql_assets.datasources.base import DatasourceAdapter
    from nl2sql_assets.datasources.schema import SchemaSnapshot


class SchemaCopy(Protocol):
    """An engine's empty in-memory copy of a schema: ``prepare`` compiles a statement there (never
    runs it) and says ``(error, reads)``: the engine's message when it cannot, else the (table,
    column) pairs it reads (``""`` as the column of a table read without one, ``ROWID`` for a row
    id), or None where the engine reports no reads; ``(None, None)``: nothing to say."""

    def prepare(self, sql: str) -> tuple[str | None, frozenset[tuple[str, str]] | None]: ...

#: engine name -> the module that defines it (as ``ENGINE``)
KINDS: dict[str, str] = {
    "sqlite": "nl2sql_assets.datasources.sqlite",
    "duckdb": "nl2sql_assets.datasources.duckdb_adapter",
    "postgres": "nl2sql_assets.datasources.postgres",
    "mysql": "nl2sql_assets.datasources.mysql",
}


@dataclass(frozen=True)
class SqlStyle:
    """How a plan is written in an engine's SQL so that it means what it means on SQLite, the
    suites' first engine (the SQL generator, ``engine.sqlgen``, reads it)."""

    #: the operator that matches a pattern without regard to ASCII case (``LIKE`` where it already does)
    like: str = "LIKE"
    #: ``group_concat(x)`` is ``GROUP_CONCAT(x)`` or ``STRING_AGG(x, ',')``
    string_agg: str = "GROUP_CONCAT"
    #: whether ``/`` between two integers divides as integers (SQLite, Postgres)
    integer_division: bool = True
    #: a plan's cast types (integer, real, text) as the engine's type names
    cast_types: dict[str, str] = field(default_factory=lambda: {"integer": "INTEGER", "real": "REAL",
                                                                "text": "TEXT"})
    #: a plan's date parts (year, month, day as integers; year_month 'YYYY-MM'; date 'YYYY-MM-DD'),
    #: each a SQL template whose ``{}`` is the date
    date_parts: dict[str, str] = field(default_factory=dict)


@dataclass
class TableData:
    """A table to copy into a server (the demo's databases; later, neighbour databases): its
    columns with their types as the source's dialect writes them, its keys and its rows."""

    name: str
    #: (name, type in the source's dialect, NOT NULL)
    columns: list[tuple[str, str, bool]]
    primary_key: list[str] = field(default_factory=list)
    #: column -> (parent table, parent column)
    references: dict[str, tuple[str, str]] = field(default_factory=dict)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    description: str | None = None


class DatabaseEngine:
    """One kind of database. Subclasses set the class attributes and implement ``open``."""

    #: the name datasources give in ``engine:``
    name: ClassVar[str]
    #: how people call it, in messages
    label: ClassVar[str]
    #: the sqlglot dialect its SQL is read and written in
    dialect: ClassVar[str]
    #: a server reached by URL (True) or a file opened by path (False)
    server: ClassVar[bool] = False
    #: the schemes of a server's URL (``postgresql``); none for a file engine
    url_schemes: ClassVar[tuple[str, ...]] = ()
    #: schemas no statement may read (lower case): the catalogs
    system_schemas: ClassVar[frozenset[str]] = frozenset()
    #: name prefixes of system tables and catalog functions (lower case)
    system_prefixes: ClassVar[tuple[str, ...]] = ()
    #: functions that read server settings or state, no role may call (lower case)
    system_functions: ClassVar[frozenset[str]] = frozenset()
    #: the functions no role may call by default (files, the network, other sessions, native code);
    #: ``policies.dangerous_functions`` in nl2sql.yaml replaces the list per dialect
    dangerous_functions: ClassVar[tuple[str, ...]] = ()
    #: the functions a statement may call, written as one SQL statement that calls each of them
    #: (``guard.allowed_function_names`` reads the names the checks compare with off it); None:
    #: any function but the dangerous ones (the file engines, whose own layers refuse the rest)
    allowed_calls: ClassVar[str | None] = None
    #: how the SQL generator writes a plan in this dialect
    sql_style: ClassVar[SqlStyle] = SqlStyle()
    #: text that makes the server run what a comment holds (MySQL's ``/*! ... */``): refused
    refused_text: ClassVar[tuple[str, ...]] = ()
    #: schemas a plain table name may carry and still be the datasource's own (``main.Track``)
    own_schemas: ClassVar[frozenset[str]] = frozenset({""})
    #: whether unquoted names fold to lower case and quoted ones match exactly (Postgres); False:
    #: names match without regard to case (SQLite, DuckDB, MySQL column names)
    folds_to_lower: ClassVar[bool] = False
    # How names resolve where sqlglot's qualifier does not say (``policy.dialects.NameRules``):
    #: names of the row id a table offers when no real column has the name (SQLite's rowid)
    pseudo_columns: ClassVar[frozenset[str]] = frozenset()
    #: whether a double-quoted token that names nothing is the string of its text (SQLite)
    double_quoted_strings: ClassVar[bool] = False
    #: whether an INTEGER PRIMARY KEY column is the row id itself (SQLite)
    integer_key_is_rowid: ClassVar[bool] = False

    def open(self, cfg: DatasourceConfig, *, bulk: bool = False) -> DatasourceAdapter:
        """The read-only adapter of a datasource of this kind. ``bulk``: one reader for thousands
        of statements (the prediction grader), each checked by the database's own rules only."""
        raise NotImplementedError

    def schema_copy(self, snapshot: SchemaSnapshot) -> SchemaCopy | None:
        """An empty copy of ``snapshot``'s tables in this engine, in memory, where the engine can
        make one (SQLite, DuckDB): the final-SQL check asks it to prepare a statement, never run
        it. None for a server, whose own word comes from the live database (``statement_reads``)."""
        return None

    def write_tables(self, cfg: DatasourceConfig, namespace: str, tables: list[TableData], source_dialect: str,
                     *, replace: bool = False) -> None:
        """Copy ``tables`` (parents before children) into ``namespace`` of the server ``cfg`` reaches
        (a Postgres schema, a MySQL database), through a connection of its own that may write;
        the read-only adapter is never it. A namespace that exists is refused unless ``replace``."""
        raise NotImplementedError(f"tables are not copied into {self.label} datasources")

    def namespaced(self, cfg: DatasourceConfig, namespace: str) -> DatasourceConfig:
        """``cfg`` reading ``namespace`` (its schema or database)."""
        raise NotImplementedError(f"{self.label} datasources have no namespaces")

    def config_problems(self, cfg: DatasourceConfig) -> list[str]:
        """What is wrong with ``cfg`` for this kind, each with the fix (empty: nothing)."""
        problems = []
        if self.server:
            if cfg.path is not None:
                problems.append(f"path: a {self.label} datasource is reached by URL, not a file path; give url_env "
                                "(the variable holding postgresql://user@host:port/db) or url")
            if cfg.url is None and cfg.url_env is None:
                problems.append(f"url_env: a {self.label} datasource needs its URL: url_env names the environment "
                                "variable that holds it (or url, without a password)")
        else:
            if cfg.path is None:
                problems.append(f"path: a {self.label} datasource is a file: give its path")
            extra = [f for f in ("url", "url_env", "password_env", "database") if getattr(cfg, f) is not None]
            if extra or cfg.schemas:
                problems.append(f"{(extra or ['schemas'])[0]}: a {self.label} datasource is a file (path:); "
                                "a URL, a password and schemas are a server's")
        return problems

    def where(self, cfg: DatasourceConfig) -> str:
        """Where the datasource lives, for messages: a file, or a server's host and port (never a password)."""
        return f"{self.label} file {cfg.path}"

    def identity(self, cfg: DatasourceConfig) -> dict[str, Any]:
        """What a report says of the database besides its schema: a file's name, a server's host,
        port and database (never a password)."""
        return {"path": str(cfg.path)} if cfg.path is not None else {}


_ENGINES: dict[str, DatabaseEngine] = {}


def engine_of(name: str) -> DatabaseEngine:
    """The engine called ``name`` (its module imported on first use); a ConfigError naming the
    kinds there are otherwise."""
    engine = _ENGINES.get(name)
    if engine is not None:
        return engine
    module = KINDS.get(name)
    if module is None:
        raise ConfigError(f"unknown database engine {name!r}; the engines are {', '.join(KINDS)}")
    engine = importlib.import_module(module).ENGINE
    _ENGINES[name] = engine
    return engine


def engine_names() -> tuple[str, ...]:
    return tuple(KINDS)


def engine_for_dialect(dialect: str) -> DatabaseEngine | None:
    """The engine whose SQL is ``dialect`` (None: no engine of ours speaks it)."""
    if dialect in KINDS and engine_of(dialect).dialect == dialect:  # the usual case: named alike
        return engine_of(dialect)
    for name in KINDS:
        engine = engine_of(name)
        if engine.dialect == dialect:
            return engine
    return None


def dialect_of(name: str) -> str:
    """The sqlglot dialect of the engine called ``name``."""
    return engine_of(name).dialect


def datasource_problems(cfg: DatasourceConfig) -> list[str]:
    """``field: what is wrong, and the fix`` for each way ``cfg`` does not fit its engine (an
    unknown engine included)."""
    try:
        engine = engine_of(cfg.engine)
    except ConfigError as exc:
        return [f"engine: {exc}"]
    return engine.config_problems(cfg)


def check_datasource(cfg: DatasourceConfig) -> None:
    """Raise ConfigError naming the datasource, the field and the fix when ``cfg`` does not fit its engine."""
    problems = datasource_problems(cfg)
    if problems:
        raise ConfigError("\n".join(f"datasource {cfg.id!r}: {p}" for p in problems))


def check_datasources(config: ProjectConfig) -> ProjectConfig:
    """Every datasource of a loaded project checked by its engine: one line per problem, naming the
    file, the line and the field, as the loader names its own."""
    from nl2sql_assets.yamlio import YamlLocator

    lines: list[str] = []
    locator = None
    for index, cfg in enumerate(config.datasources):
        for problem in datasource_problems(cfg):
            field = problem.split(":", 1)[0]
            if config.source is not None and locator is None and config.source.is_file():
                locator = YamlLocator(config.source.read_text(encoding="utf-8"))
            line = locator.line(["datasources", index, field]) if locator is not None else None
            where = f"{config.source}{f', line {line}' if line else ''}: " if config.source else ""
            lines.append(f"{where}datasources.{index}.{problem}")
    if lines:
        raise ConfigError("\n".join(lines))
    return config
