"""The demo on a server: ``init --demo DIR --database URL`` copies the demo's three databases into a
Postgres or MySQL/MariaDB server and writes a project that evaluates there.

* **The data.** Chinook (from the checked SQLite file) and the generated ``support`` and
  ``webanalytics`` databases are copied table by table, keys and foreign keys included, each into a
  namespace of its own (``nl2sql_chinook``, ...: a Postgres schema, a MySQL database) by the engine's
  own writer (``DatabaseEngine.write_tables``). Postgres gets Chinook's names in lower case, as
  Postgres ports of Chinook have them, so the suites' unquoted SQL reaches them; MySQL keeps them.
* **The project.** ``nl2sql.yaml`` names the same datasource ids (``chinook``, ``support``,
  ``webanalytics``), each reading its namespace on the server; the URL is written there only when
  it carries no password, else it is read from ``NL2SQL_DATABASE_URL`` (the command prints the
  ``export`` line).
* **The suites.** The shipped suites' SQL (gold, alternatives, probes, earlier turns) is
  translated from the engine it was written for into the server's dialect (``demo.translate``:
  sqlglot, then the reviewed fixes where its translation is wrong), the rows are regenerated on
  the server, and each answerable case's rows are compared with the rows its original SQL gives on
  the original file: ``ServerDemo.differences`` lists every case where they differ.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from nl2sql_assets.config import ConfigError, DatasourceConfig, url_password
from nl2sql_assets.datasources.engines import DatabaseEngine, TableData, engine_names, engine_of
from nl2sql_assets.demo.catalog import DEMO_FILES

#: the namespace (Postgres schema, MySQL database) each demo datasource is copied into
NAMESPACE_PREFIX = "nl2sql_"
#: the variable the project reads the URL from when it carries a password
URL_VARIABLE = "NL2SQL_DATABASE_URL"


def engine_for_url(url: str) -> DatabaseEngine:
    """The server engine a URL's scheme names (``postgresql://``, ``mysql://``); a ConfigError
    naming the schemes there are otherwise."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    schemes: dict[str, DatabaseEngine] = {}
    for name in engine_names():
        engine = engine_of(name)
        for s in engine.url_schemes:
            schemes[s] = engine
    if scheme not in schemes:
        raise ConfigError(f"--database {_shown(url)}: a server URL starts with "
                          f"{', '.join(s + '://' for s in schemes)}")
    return schemes[scheme]


def _shown(url: str) -> str:
    password = url_password(url)
    return url.replace(f":{password}@", ":***@") if password else url


def namespace_of(datasource: str, prefix: str = NAMESPACE_PREFIX) -> str:
    return f"{prefix}{datasource}"


def read_tables(path: Path, engine: str) -> list[TableData]:
    """A demo database file's tables (parents first), their columns, keys and every row."""
    from nl2sql_assets.evaluation.neighbours.formats import format_of

    source = format_of(engine).read(path, max_rows=None)
    return [TableData(name=t.name, columns=[(c.name, c.type, c.not_null) for c in t.columns],
                      primary_key=[c.name for c in t.columns if c.primary_key],
                      references=dict(t.references), rows=list(t.rows)) for t in source.tables]


def server_datasource(datasource: str, url: str, engine: DatabaseEngine,
                      prefix: str = NAMESPACE_PREFIX) -> DatasourceConfig:
    """The demo datasource ``datasource`` reading its namespace on the server at ``url``."""
    base = DatasourceConfig(id=datasource, engine=engine.name, url=url) if url_password(url) is None else \
        DatasourceConfig(id=datasource, engine=engine.name, url_env=URL_VARIABLE)
    return engine.namespaced(base, namespace_of(datasource, prefix))


@dataclass
class ServerDemo:
    """What ``load_server_demo`` did: the datasources, the tables and rows copied, the suites
    translated, and the cases whose rows on the server differ from the original file's."""

    engine: str
    datasources: dict[str, DatasourceConfig]
    tables: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    #: suite file -> case ids translated by sqlglot alone / with a reviewed fix
    translated: dict[str, int] = field(default_factory=dict)
    fixed: dict[str, list[str]] = field(default_factory=dict)
    #: "suite/case" -> why its rows on the server differ from the original's
    differences: dict[str, str] = field(default_factory=dict)
    #: the export line to print (the URL carries a password), else None
    export: str | None = None


def load_server_demo(url: str, files: dict[str, Path], *, force: bool = False,
                     prefix: str = NAMESPACE_PREFIX) -> ServerDemo:
    """Copy the demo's database files (``files``: datasource id -> file) into the server at ``url``,
    each datasource into the namespace ``prefix`` + its id."""
    engine = engine_for_url(url)
    demo = ServerDemo(engine=engine.name, datasources={})
    for datasource, path in files.items():
        source_engine = DEMO_FILES[datasource][0]
        cfg = server_datasource(datasource, url, engine, prefix)
        writable = cfg.model_copy(update={"url": url, "url_env": None}) if cfg.url_env else cfg
        tables = read_tables(path, source_engine)
        engine.write_tables(writable, namespace_of(datasource, prefix), tables, engine_of(source_engine).dialect,
                            replace=force)
        demo.datasources[datasource] = cfg
        demo.tables[datasource] = len(tables)
        demo.rows[datasource] = sum(len(t.rows) for t in tables)
    if url_password(url) is not None:
        demo.export = f"export {URL_VARIABLE}='{url}'"
    return demo


def build_demo_files(chinook: Path | None) -> tuple[Path, dict[str, Path]]:
    """The demo's database files in a temporary folder (the caller removes it): the checked copy
    of Chinook and the two generated DuckDB databases."""
    from nl2sql_assets.datasources.chinook import resolve_chinook
    from nl2sql_assets.demo.files import copy_chinook, write_demo_databases

    source = resolve_chinook(chinook)
    folder = Path(tempfile.mkdtemp(prefix="nl2sql-demo-"))
    try:
        paths = {"chinook": copy_chinook(source, folder / DEMO_FILES["chinook"][1])}
        paths.update(write_demo_databases(folder, chinook=source))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder, paths


SUITE_NOTE = ("# Moved to {label} by `nl2sql-assets init --demo DIR --database URL`: every case's SQL translated\n"
              "# from the engine it was written for (demo.translate), its rows regenerated on the server.\n")


def move_suites(demo: ServerDemo, packaged: Path, suites_dir: Path, files: dict[str, Path], url: str) -> None:
    """The shipped suites into ``suites_dir``, translated into the server's dialect, their rows
    regenerated on the server and compared with the rows the original SQL gives on the original
    files (``demo.differences``: every case where they differ)."""
    import contextlib
    import os

    from nl2sql_assets.datasources.registry import DatasourceRegistry
    from nl2sql_assets.demo.translate import translate_suite
    from nl2sql_assets.evaluation.judging.comparison import explain_strict, rows_from_dicts
    from nl2sql_assets.evaluation.suites import load_suite, regenerate, write_suite

    engine = engine_of(demo.engine)
    sources = {ds: engine_of(DEMO_FILES[ds][0]).dialect for ds in demo.datasources}
    moved: list[tuple[str, Path, object]] = []
    for path in sorted(packaged.glob("*.yaml")):
        original = load_suite(path)
        if not all(set(c.datasources) <= set(sources) for c in original.cases):
            shutil.copyfile(path, suites_dir / path.name)  # another project's datasources (the wide bed's)
            continue
        translated, fixed = translate_suite(original, sources, engine.name, engine.dialect,
                                            fold_names=engine.folds_to_lower)
        target = suites_dir / path.name
        write_suite(translated, target, header=SUITE_NOTE.format(label=engine.label) + original.header)
        demo.translated[path.name] = sum(1 for c in original.cases if c.sql and c.datasources[0] in sources)
        if fixed:
            demo.fixed[path.name] = fixed
        moved.append((path.stem, target, original))
    previous = os.environ.get(URL_VARIABLE)
    os.environ[URL_VARIABLE] = url  # the project reads it from there when it carries a password
    try:
        with DatasourceRegistry(list(demo.datasources.values())) as registry:
            for name, target, original in moved:
                report = regenerate(target, registry, allow_packaged=True)
                for failure in report.failed:
                    demo.differences[f"{name}/{failure.case_id}"] = failure.reason
                on_server = {c.id: c for c in load_suite(target, allow_stale_rows=True).cases}
                for case in original.cases:  # type: ignore[attr-defined]
                    if case.rows is None or case.id not in on_server or f"{name}/{case.id}" in demo.differences:
                        continue
                    there = on_server[case.id].rows or []
                    verdict = explain_strict(rows_from_dicts(case.rows)[1], rows_from_dicts(there)[1],
                                             case.order_matters)
                    if not verdict.passed:
                        demo.differences[f"{name}/{case.id}"] = verdict.message
    finally:
        if previous is None:
            with contextlib.suppress(KeyError):
                del os.environ[URL_VARIABLE]
        else:
            os.environ[URL_VARIABLE] = previous
