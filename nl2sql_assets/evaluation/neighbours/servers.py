"""Neighbour databases of a server datasource (Postgres, MySQL/MariaDB), never inside it.

A server's neighbour is a namespace in a scratch place: on Postgres a schema in a scratch database
(by default ``<source>_nl2sql_neighbours`` beside the source, made where the role may; or the
database of the URL ``neighbours: url_env`` names), on MySQL/MariaDB a database of its own on the
scratch server. The source is only read: its catalog (column types, enums, primary and unique keys,
foreign keys, NOT NULL, CHECK, unique indexes, views) and a bounded sample of each table's rows
(a large table in slices of its integer key, on Postgres without one by ``TABLESAMPLE``; a small
one from its start: never a full scan). A neighbour is made with the source's own definitions, so
the database itself refuses a row that breaks one. How each engine does this is ``catalogs``; this
module decides where neighbours live, which role builds them and which reads them (``Scratch``),
and stands them in for files.

What stands for a database file elsewhere in ``neighbours`` is a *handle*: a small JSON file naming
the engine, the datasource settings it is reached with (its URL's variable, never a password) and
the namespace. ``ServerFiles`` reads and writes through handles as ``formats`` does through files,
so generation, distillation, the kept sets, the gold audit and the witness search run unchanged.
Namespaces are named ``nl2sql_nb_<project>_...``, the project's mark being a digest of its neighbours
folder (``Scratch.tag``), so that ``neighbours prune`` sweeps only its own project's where several share a
scratch place; ``discard`` drops one (a candidate not kept, a pruned set), and the witness search
refills one per thread (``ServerMemory``), dropped when its process ends.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.neighbours.catalogs import (
    PREFIX,
    ServerCatalog,
    catalog_of,
    ensure_scratch_database,
)
from nl2sql_assets.evaluation.neighbours.tables import TIMEOUT_S, Source, _replace_into, _temporary

__all__ = ["PREFIX", "Scratch", "ServerFiles", "handle_place", "handle_scratch", "project_tag", "read_handle",
           "scratch_of", "source_handle", "write_handle"]


@dataclass(frozen=True)
class Scratch:
    """Where a server datasource's neighbours are made: the settings of the role that builds them
    (``config``: the scratch database on Postgres, the server on MySQL), the source's own id for
    messages, and, where the datasource's own role is another one on the same server, that role's
    settings there (``reader``) and its account name (``grantee``): it grades on the neighbours and
    is granted only SELECT on them, so they are read-only to it by the database's own rights.
    ``tag`` marks the namespaces one project makes (``project_tag``; empty in a handle written
    before namespaces were marked); it is not part of where they live (``identity``)."""

    config: DatasourceConfig
    source: str
    reader: DatasourceConfig | None = None
    grantee: str | None = None
    tag: str = ""

    @property
    def prefix(self) -> str:
        """What every namespace this project makes here starts with."""
        return f"{PREFIX}{self.tag}_" if self.tag else PREFIX

    @property
    def grading(self) -> DatasourceConfig:
        """The settings statements on a neighbour are run with."""
        return self.reader or self.config

    def identity(self) -> str:
        from nl2sql_assets.datasources.engines import engine_of

        built = engine_of(self.config.engine).identity(self.config)
        return json.dumps(built if self.grantee is None else {**built, "grantee": self.grantee}, sort_keys=True)


def _dump(config: DatasourceConfig | None) -> dict[str, Any] | None:
    return None if config is None else config.model_dump(mode="json", exclude={"path"})


def _handle_text(config: DatasourceConfig, namespace: str | None, scratch: Scratch | None) -> str:
    data = {"engine": config.engine, "config": _dump(config), "namespace": namespace,
            "scratch": None if scratch is None else _dump(scratch.config),
            "reader": None if scratch is None else _dump(scratch.reader),
            "grantee": None if scratch is None else scratch.grantee,
            "tag": None if scratch is None or not scratch.tag else scratch.tag}
    return json.dumps(data, sort_keys=True) + "\n"


def write_handle(path: Path, config: DatasourceConfig, namespace: str | None, scratch: Scratch | None = None) -> Path:
    """A handle file: the settings a database is read with (never a password), its namespace, and
    where its (or its source's) neighbours are made, by which role, and which role reads them
    (``discard`` drops a neighbour with the builder's settings)."""
    temporary = _temporary(path)
    temporary.write_text(_handle_text(config, namespace, scratch), encoding="utf-8")
    return _replace_into(temporary, path)


def read_handle(path: Path) -> tuple[DatasourceConfig, str | None]:
    """The settings a handle's database is read with, and its namespace (None: a source)."""
    config, namespace, _ = _handle(path)
    return config, namespace


def _handle(path: Path) -> tuple[DatasourceConfig, str | None, Scratch | None]:
    """(the settings it is read with, its namespace, the scratch place of its neighbours or None)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        config = DatasourceConfig.model_validate(data["config"])
        scratch = None
        if data.get("scratch") is not None:
            reader = data.get("reader")
            scratch = Scratch(DatasourceConfig.model_validate(data["scratch"]), config.id,
                              None if reader is None else DatasourceConfig.model_validate(reader),
                              data.get("grantee"), data.get("tag") or "")
        return config, data.get("namespace"), scratch
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"{path}: cannot read this neighbour's handle ({exc}); delete its set's folder and it is "
                        "made again") from None


def project_tag(folder: Path) -> str:
    """The mark of the project whose neighbours live under ``folder``: 8 hex digits of its path."""
    return hashlib.sha256(str(Path(folder).resolve()).encode("utf-8")).hexdigest()[:8]


def handle_place(path: Path) -> Scratch | None:
    """Where the neighbours of a handle's source are made, by whom, under which mark (None: a
    handle written before the scratch place was kept in it)."""
    return _handle(path)[2]


def handle_scratch(path: Path) -> DatasourceConfig | None:
    """Where the neighbours of a handle's source are made, with the builder's settings (None: a
    handle written before the scratch place was kept in it)."""
    scratch = _handle(path)[2]
    return None if scratch is None else scratch.config


def source_handle(path: Path, datasource: DatasourceConfig, url_env: str | None, tag: str) -> Path:
    """The handle of a server datasource as the source of its neighbours (written at ``path``, left
    as it is when it says the same): where they are made, by which role, which role reads them, and
    the mark of the project making them (``project_tag``)."""
    scratch = scratch_of(datasource, url_env)
    ensure_scratch_database(scratch.config)  # here, once: not from each worker making a neighbour
    scratch = replace(with_grading_role(scratch), tag=tag)
    text = _handle_text(datasource, None, scratch)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        write_handle(path, datasource, None, scratch)
    return path


def namespace_for(path: Path, prefix: str = PREFIX) -> str:
    """The namespace of the neighbour written at ``path``: unique to that file, whatever its set;
    ``prefix`` is its project's (``Scratch.prefix``)."""
    return prefix + hashlib.sha256(str(Path(path).resolve()).encode("utf-8")).hexdigest()[:16]


class ServerFiles:
    """The neighbour format of one server engine (``postgres``, ``mysql``): read, write, open,
    open backwards, discard; a scratch database for the witness search."""

    suffix: ClassVar[str] = ".json"
    #: witness candidates tried at once (each thread refills a scratch namespace of its own): a
    #: candidate on a server is round trips, not work in this process
    side_by_side: ClassVar[int] = 3

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.dialect = engine
        self.catalog: ServerCatalog = catalog_of(engine)
        self.suffix = self.catalog.handle_suffix

    # ------------------------------------------------------------ the source

    def read(self, path: Path, max_rows: int | None) -> Source:
        config, namespace, scratch = _handle(path)
        source = self.catalog.read(config, namespace, max_rows)
        source.scratch = scratch or Scratch(config, config.id)
        return source

    def fingerprint(self, path: Path, max_rows: int) -> str:
        """A digest of what the neighbours copy (the catalog and the sampled rows) and of where
        they are made."""
        source = self.read(path, max_rows)
        digest = hashlib.sha256(source.scratch.identity().encode("utf-8"))
        for part in [*source.types, *source.constraints, *source.indexes, *source.views]:
            digest.update(part.encode("utf-8"))
        for table in source.tables:
            digest.update(table.create_sql.encode("utf-8"))
            digest.update(json.dumps([list(r) for r in table.rows], default=str).encode("utf-8"))
        return digest.hexdigest()

    # ------------------------------------------------------------ neighbours

    def write(self, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]], path: Path) -> Path:
        scratch: Scratch = source.scratch
        if scratch is None:
            raise ValueError("a server's source carries where its neighbours are made (Source.scratch)")
        namespace = namespace_for(path, scratch.prefix)
        self.catalog.make(scratch.config, namespace, source, rows, grantee=scratch.grantee)
        return write_handle(path, scratch.grading, namespace, scratch)

    def open(self, path: Path) -> Any:
        config, namespace = read_handle(path)
        return self.catalog.open(config, namespace)

    def open_reversed(self, path: Path, timeout_s: float = TIMEOUT_S) -> Any:
        """A copy of the database holding each table's rows in the other order, dropped on close
        (Postgres reads a table in the order its rows went in; so does MySQL where no key orders it)."""
        source = self.read(path, None)
        scratch: Scratch = source.scratch
        namespace = read_handle(path)[1]
        copy = f"{namespace or scratch.prefix + 'src'}_r{os.getpid()}_{threading.get_ident() % 100000}"
        self.catalog.make(scratch.config, copy, source, {t.name: t.rows[::-1] for t in source.tables},
                          grantee=scratch.grantee)
        adapter = self.catalog.open(scratch.grading, copy, timeout_s)
        return _DroppedOnClose(adapter, lambda: self.catalog.drop(scratch.config, copy))

    def check_writable(self, path: Path) -> None:
        """Before a set is built: that the role may make a neighbour where they live, and grant the
        grading role SELECT there (a UserError naming the grant, or url_env, where it may not),
        found once here rather than in each worker."""
        config, _, scratch = _handle(path)
        target = scratch or Scratch(config, config.id)
        probe = f"{target.prefix}probe{os.getpid()}"
        try:
            self.catalog.make(target.config, probe, Source(tables=[]), {}, grantee=target.grantee)
        finally:
            with contextlib.suppress(Exception):
                self.catalog.drop(target.config, probe)

    def discard(self, path: Path) -> None:
        """Drop the neighbour's namespace (with its builder's settings) and its handle (a candidate
        not kept, a pruned set)."""
        with contextlib.suppress(UserError):
            config, namespace, scratch = _handle(path)
            if namespace is not None:
                self.catalog.drop(config if scratch is None else scratch.config, namespace)
        with contextlib.suppress(OSError):
            Path(path).chmod(0o644)
            Path(path).unlink()

    # ------------------------------------------------------------ the witness search

    def template(self, source: Source) -> ServerMemory:
        return ServerMemory(self.catalog, source)

    def scratch(self, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]], template: Any = None) -> Any:
        memory = template if template is not None else ServerMemory(self.catalog, source)
        return ServerScratch(self, memory, source, rows)


class _DroppedOnClose:
    def __init__(self, adapter: Any, drop: Any) -> None:
        self.adapter, self._drop = adapter, drop

    def execute(self, sql: str, **kwargs: Any) -> Any:
        return self.adapter.execute(sql, **kwargs)

    def close(self) -> None:
        self.adapter.close()
        self._drop()


class ServerMemory:
    """The witness search's scratch namespaces: one pair per thread (forwards, backwards), made on
    first use, refilled for each candidate, dropped when the process ends."""

    def __init__(self, catalog: ServerCatalog, source: Source) -> None:
        self.catalog = catalog
        self.source = source
        self._local = threading.local()
        self._made: list[str] = []
        self._connections: list[Any] = []  # the builder's, one per namespace, kept between refills
        self._lock = threading.Lock()
        atexit.register(self.close)

    def fill(self, rows: Mapping[str, Sequence[tuple[Any, ...]]], *, backwards: bool = False) -> Any:
        """This thread's namespace (its backwards one) holding ``rows`` alone, and an adapter on it."""
        name = "backwards" if backwards else "forwards"
        held = getattr(self._local, name, None)
        scratch: Scratch = self.source.scratch
        if held is None:
            namespace = f"{scratch.prefix}w{os.getpid()}_{threading.get_ident() % 1000000}{'b' if backwards else 'f'}"
            self.catalog.make(scratch.config, namespace, self.source, {}, grantee=scratch.grantee)
            with self._lock:
                self._made.append(namespace)
            held = (namespace, self.catalog.open(scratch.grading, namespace),
                    self.catalog.connect_to(scratch.config, namespace))
            with self._lock:
                self._connections.append(held[2])
            setattr(self._local, name, held)
        namespace, adapter, builder = held
        self.catalog.refill(scratch.config, namespace, self.source,
                            {n: list(r)[::-1] for n, r in rows.items()} if backwards else rows, conn=builder)
        return adapter

    def close(self) -> None:
        with self._lock:
            made, self._made = self._made, []
            connections, self._connections = self._connections, []
        for conn in connections:
            with contextlib.suppress(Exception):
                conn.close()
        scratch: Scratch = self.source.scratch
        for namespace in made:
            with contextlib.suppress(Exception):
                self.catalog.drop(scratch.config, namespace)


class ServerScratch:
    """One witness candidate on a server: this thread's scratch namespace refilled with its rows."""

    def __init__(self, files: ServerFiles, memory: ServerMemory, source: Source,
                 rows: Mapping[str, Sequence[tuple[Any, ...]]]) -> None:
        self.files, self.memory, self.source, self.rows = files, memory, source, rows
        self._adapter = memory.fill(rows)

    def adapter(self) -> Any:
        return _Borrowed(self._adapter)

    def reversed(self) -> Any:
        return _Borrowed(self.memory.fill(self.rows, backwards=True))

    def save(self, path: Path) -> Path:
        return self.files.write(self.source, self.rows, path)

    def close(self) -> None:
        return None


class _Borrowed:
    """An adapter the scratch keeps open for the next candidate: closing it does nothing."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter

    def execute(self, sql: str, **kwargs: Any) -> Any:
        return self.adapter.execute(sql, **kwargs)

    def close(self) -> None:
        return None


def with_grading_role(scratch: Scratch) -> Scratch:
    """``scratch`` with the grading role's account, where the datasource's own role is not the
    builder: it is let read the neighbours (and nothing more) by the database's rights. A
    UserError naming the grant where that role cannot reach the scratch database."""
    if scratch.reader is None:
        return scratch
    catalog = catalog_of(scratch.config.engine)
    from nl2sql_assets.datasources.base import DatasourceUnavailable

    builder = catalog.account(scratch.config)
    try:
        grantee = catalog.account(scratch.reader)
    except DatasourceUnavailable as exc:
        database = scratch.reader.database or "(the server)"
        raise UserError(f"{exc}: the datasource's role grades on its neighbours, made in {database} by the role "
                        f"evals.yaml's neighbours: url_env names; GRANT CONNECT ON DATABASE {database} TO that "
                        "role") from None
    if grantee == builder:
        return Scratch(scratch.config, scratch.source)
    catalog.allow_reading(scratch.config, grantee)
    return Scratch(scratch.config, scratch.source, scratch.reader, grantee)


def scratch_of(datasource: DatasourceConfig, url_env: str | None) -> Scratch:
    """Where ``datasource``'s neighbours are made: the database of the URL ``url_env`` names
    (Postgres: schemas in it; MySQL: databases on its server), else beside the source (Postgres:
    database ``<source>_nl2sql_neighbours``; MySQL: databases on the source's server)."""
    from nl2sql_assets.datasources.server import ServerAddress

    if url_env is not None:
        config = datasource.model_copy(update={"url_env": url_env, "url": None, "password_env": None,
                                               "database": None, "schemas": []})
        schemes = ("postgresql", "postgres", "mysql", "mariadb")
        built = ServerAddress.of(config, schemes, 0)  # the variable set, the URL read
        read = ServerAddress.of(datasource, schemes, 0)
        if (built.host, built.port) != (read.host, read.port) or built.user == read.user:
            return Scratch(config, datasource.id)  # another server, or one role: it reads what it builds
        # the datasource's own role reads the neighbours, where the builder's URL makes them
        reader = datasource.model_copy(update={"database": built.database if datasource.engine == "postgres"
                                               else None, "schemas": []})
        return Scratch(config, datasource.id, reader)
    if datasource.engine == "postgres":
        address = ServerAddress.of(datasource, ("postgresql", "postgres"), 5432)
        source_db = datasource.database or address.database or "postgres"
        return Scratch(datasource.model_copy(update={"database": f"{source_db}_nl2sql_neighbours", "schemas": []}),
                       datasource.id)
    return Scratch(datasource.model_copy(update={"database": None}), datasource.id)
